"""A strategy keeps no state: its model calls go into the record its caller hands in
(``strategy.ModelCalls``), a dry run's "call no model" is the caller's to say, and a strategy
with pin rules is a copy. So one strategy object serves any number of conversations, one after
another or at once, and what one run asked of the model never shows up in another's ledger.

The model is a real OpenAI-compatible server on loopback (tests/llm_server.py).
"""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest

from openhands_memory.condensers import LLMSummarizingCondenser, PipelineCondenser, RecentEventsCondenser
from openhands_memory.condensers.llm_base import PREVIEW_SUMMARY, LedgerEntry
from openhands_memory.conversation import EventStore
from openhands_memory.events import Condensation
from openhands_memory.llm import LLMConfig
from openhands_memory.strategy import ModelCalls, Strategy
from openhands_memory.view.pins import PinRule
from openhands_memory.view.tokens import FRESH

from . import factories as f
from .llm_server import FakeLLMServer


def config(server: FakeLLMServer) -> LLMConfig:
    return LLMConfig(model="openai/test-model", api_base=server.url, api_key="sk-test", timeout=5.0,
                     num_retries=0)


def fill(conv: Any, pairs: int = 8) -> None:
    events = [f.system(), f.user("fix the parser")]
    for i in range(pairs):
        events += [f.action(f"r{i}", f"call{i}"), f.observation(f"call{i}", f"output {i}")]
    conv.append_many(events)


def ledger(store: EventStore, cid: str) -> list[tuple]:
    return store.db.execute(
        "SELECT prompt_tokens, outcome, condensation_id FROM llm_call WHERE conversation_id = ? ORDER BY id", (cid,)
    ).fetchall()


def settings_of(strategy: Any) -> dict:
    return copy.deepcopy(vars(strategy))


def test_one_strategy_condenses_two_conversations_and_keeps_nothing(store, llm_server):
    strategy = LLMSummarizingCondenser(llm_config=config(llm_server), max_size=10, keep_first=2)
    before = settings_of(strategy)
    first, second = store.create_conversation("first"), store.create_conversation("second")
    fill(first)
    fill(second)
    llm_server.push_text("what the first did", prompt_tokens=11)
    llm_server.push_text("what the second did", prompt_tokens=22)
    a, b = first.condense(strategy), second.condense(strategy)
    assert (a.condensation.summary, b.condensation.summary) == ("what the first did", "what the second did")
    assert ledger(store, "first") == [(11, "ok", a.stored_as)]
    assert ledger(store, "second") == [(22, "ok", b.stored_as)]
    assert settings_of(strategy) == before


def test_one_strategy_runs_in_two_threads_at_once(tmp_path, llm_server):
    """Each thread's store and conversation, one strategy object: each ledger holds exactly
    its own run's call."""
    strategy = LLMSummarizingCondenser(llm_config=config(llm_server), max_size=10, keep_first=2)
    for _ in range(2):
        llm_server.push_text("a summary", prompt_tokens=7)
    done: dict[str, Any] = {}
    failed: list[BaseException] = []

    def run(name: str) -> None:
        try:
            with EventStore(tmp_path / f"{name}.db") as store:
                conv = store.create_conversation(name)
                fill(conv)
                outcome = conv.condense(strategy)
                done[name] = (outcome.stored_as, ledger(store, name))
        except BaseException as e:  # noqa: BLE001  the main thread says what went wrong
            failed.append(e)

    threads = [threading.Thread(target=run, args=(name,)) for name in ("left", "right")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not failed, failed
    for stored_as, rows in done.values():
        assert stored_as is not None and rows == [(7, "ok", stored_as)]
    assert len(done) == 2 and llm_server.pending == 0


def test_the_calls_of_a_run_are_in_the_record_handed_in(store, llm_server):
    conv = store.create_conversation("c")
    fill(conv)
    view = conv.view()
    strategy = LLMSummarizingCondenser(llm_config=config(llm_server), max_size=10, keep_first=2)
    llm_server.push_text("one", prompt_tokens=5)
    llm_server.push_text("two", prompt_tokens=6)
    first, second = ModelCalls(), ModelCalls()
    assert isinstance(strategy.condense(view, FRESH, first), Condensation)
    assert isinstance(strategy.condense(view, FRESH, second), Condensation)
    assert [(type(c), c.call.prompt_tokens, c.produced) for c in first.calls] == [(LedgerEntry, 5, True)]
    assert [c.call.prompt_tokens for c in second.calls] == [6]
    assert first.failure is None and not first.needs_model
    assert ledger(store, "c") == []  # the caller records; the strategy never writes


def test_a_pipeline_adds_each_strategy_s_calls_to_one_record(store, llm_server):
    conv = store.create_conversation("c")
    fill(conv)
    conv.request_condensation()  # a hard requirement: a failed model falls back to the offline summary
    strategy = PipelineCondenser([
        RecentEventsCondenser(max_events=100),
        LLMSummarizingCondenser(llm_config=config(llm_server), max_size=10, keep_first=2),
    ])
    llm_server.push_fault("401")
    calls = ModelCalls()
    result = strategy.condense(conv.view(), FRESH, calls)
    assert isinstance(result, Condensation) and result.note.fallback == "offline"
    assert [(c.call.outcome, c.produced) for c in calls.calls] == [("error", False)]
    assert calls.failure is not None and "\n" not in calls.failure and not calls.needs_model


def test_a_preview_is_the_caller_s_and_calls_no_model(store, llm_server):
    conv = store.create_conversation("c")
    fill(conv)
    strategy = LLMSummarizingCondenser(llm_config=config(llm_server), max_size=10, keep_first=2)
    before = settings_of(strategy)
    done = conv.condense(strategy, dry_run=True, preview=True)
    assert done.condensation.summary == PREVIEW_SUMMARY and llm_server.requests == []
    assert settings_of(strategy) == before
    llm_server.push_text("a real one")
    assert conv.condense(strategy, dry_run=True).condensation.summary == "a real one"
    with pytest.raises(ValueError, match="preview goes with dry_run"):
        conv.condense(strategy, preview=True)
    assert ledger(store, "c") == [] and len(conv) == 18  # dry runs write nothing


def test_with_pins_is_a_copy():
    plain = LLMSummarizingCondenser(max_size=10, keep_first=2)
    rules = [PinRule(first_user_message=True)]
    pinned = plain.with_pins(rules, 0.25)
    assert plain.pin_rules == () and plain.config().get("pins") is None
    assert pinned.pin_rules == tuple(rules) and pinned.pin_budget == 0.25 and pinned is not plain
    assert pinned.config()["pins"] == [{"first_user_message": True, "mode": "keep"}]


def test_every_condenser_meets_the_strategy_protocol():
    """What the conversation reads of a strategy, each condenser has (the base class's defaults)."""
    from openhands_memory.condensers import CONDENSER_TYPES

    members = [name for name in vars(Strategy) if not name.startswith("_")]
    assert set(members) == {"pin_rules", "pin_limit", "condense", "config", "summarizer"}
    for kind, cls in CONDENSER_TYPES.items():
        made = cls() if kind != "pipeline" else cls([])
        for name in members:
            assert hasattr(made, name), (kind, name)
        assert made.pin_rules == () and made.pin_limit() is None and made.config()["type"] == kind
        assert made.summarizer == ("the offline summarizer" if kind in ("llm", "structured", "llm_attention") else None)
