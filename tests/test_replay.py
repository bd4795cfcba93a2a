"""Replay: a recorded history run again under other strategies.

What a user relies on: the source is never written; the recorded run's own row is what it
sent; a strategy replayed is what ``condense`` would have done step by step; masking sends
less than nothing at all; no strategy splits a tool pair or loses a keep pin; the output is
the same every time; a model's summaries are asked for once, then reused.
"""

from __future__ import annotations

import hashlib
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openhands_memory.condensers import (
    LLMSummarizingCondenser,
    NoOpCondenser,
    ObservationMaskingCondenser,
    default_condenser,
)
from openhands_memory.conversation import EventStore
from openhands_memory.events import ActionEvent, Condensation, MessageEvent
from openhands_memory.replay.calls import model_calls
from openhands_memory.replay.meter import first_difference

from . import factories as f
from .cli_runner import invoke, run
from .llm_server import FakeLLMServer, text_reply
from .sdk_shape import sdk_history

def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("replay-demo") / "demo.db"
    run("demo", path, "--json")
    return path


@pytest.fixture(scope="module")
def sdk_db(tmp_path_factory) -> Path:
    """An SDK-shaped history of 400 steps with the SDK's own condensations recorded."""
    path = tmp_path_factory.mktemp("replay-sdk") / "sdk.db"
    with EventStore(path) as store:
        store.create_conversation("sdk").append_many(list(sdk_history(400, seed=3, thinking=True)))
    return path


def strategies():
    return [("none", NoOpCondenser()), ("masking", ObservationMaskingCondenser(attention_window=20)),
            ("summary", LLMSummarizingCondenser(max_size=60, keep_first=2))]


def replayed(path: Path, cid: str, chosen=None):
    with EventStore(path, create=False, readonly=True) as store:
        return store.conversation(cid).replay(chosen or strategies())


# --- what a replay says ----------------------------------------------------------------------


def test_the_recorded_row_is_what_the_run_sent(demo_db):
    """The baseline appends the recorded condensations as they were: its condensations are
    the recorded ones, and replaying the demo's own condenser gives the same call by call."""
    with EventStore(demo_db, create=False, readonly=True) as store:
        conv = store.conversation("demo")
        recorded = sum(isinstance(e, Condensation) for e in conv.events())
        result = conv.replay([("default", default_condenser())])
    base, again = result.strategies
    assert base.baseline and base.label == "recorded"
    assert base.totals.condensations == recorded == 3
    assert again.totals.condensations == recorded
    assert [(c.input_tokens, c.cached_tokens, c.events) for c in base.calls] == \
        [(c.input_tokens, c.cached_tokens, c.events) for c in again.calls]


def test_a_rolling_summary_condenses_as_condense_does_step_by_step(sdk_db, tmp_path):
    """The replay's count of condensations equals a loop that appends each recorded
    response's events and runs ``condense`` before each (written here independently)."""
    with EventStore(sdk_db, create=False, readonly=True) as store:
        events = [e for e in store.conversation("sdk").events() if not isinstance(e, Condensation)]
    by_hand = 0
    with EventStore(tmp_path / "steps.db") as scratch:
        conv = scratch.create_conversation("steps")
        condenser = LLMSummarizingCondenser(max_size=60, keep_first=2)
        previous = None
        for e in events:
            answer = isinstance(e, ActionEvent) or (isinstance(e, MessageEvent) and e.source == "agent")
            same = isinstance(e, ActionEvent) and isinstance(previous, ActionEvent) \
                and previous.llm_response_id == e.llm_response_id
            if answer and not same:
                by_hand += conv.condense(condenser).condensation is not None
            conv.append(e.model_copy(update={"parent_id": None}))
            previous = e
    summary = replayed(sdk_db, "sdk").strategies[3]
    assert summary.totals.condensations == by_hand > 5
    assert summary.totals.summary_calls == by_hand


def test_masking_sends_less_than_nothing_and_a_summary_less_than_both(sdk_db, demo_db):
    for path, cid in ((sdk_db, "sdk"), (demo_db, "demo")):
        base, none, masking, summary = replayed(path, cid).strategies
        assert masking.totals.input_tokens < none.totals.input_tokens
        assert summary.totals.peak_context < none.totals.peak_context
        assert none.totals.condensations == 0 and none.totals.forgotten == {}
        assert masking.totals.forgotten and set(masking.totals.forgotten) <= {"ObservationEvent", "AgentErrorEvent"}
        # Without condensing, each call's input is the previous one's plus the new events.
        assert all(c.cached_tokens == p.input_tokens for p, c in zip(none.calls, none.calls[1:]))
        for s in (base, none, masking, summary):
            assert s.totals.pairs_broken == 0 and s.totals.pins_broken == 0
            assert s.totals.calls == len(s.calls) == base.totals.calls
            assert all(0 <= c.cached_tokens <= c.input_tokens for c in s.calls)


def test_calls_are_the_recorded_responses():
    events = [f.system(), f.user(), *f_batch("r1", 2), f.agent_says("done"), f.user("more"), *f_batch("r2", 1)]
    for i, e in enumerate(events):
        e.with_seq(i)
    calls = model_calls(events)
    # A batch of parallel calls is one response; the agent's message is another.
    assert [(c.position, c.end) for c in calls] == [(2, 4), (6, 7), (8, 9)]
    # Results that came between a response's actions do not make a second call.
    interleaved = [f.system(), f.user(), f.action("r1", "c1"), f.observation("c1"), f.action("r1", "c2"),
                   f.observation("c2"), *f_batch("r2", 1)]
    for i, e in enumerate(interleaved):
        e.with_seq(i)
    assert [(c.position, c.end) for c in model_calls(interleaved)] == [(2, 5), (6, 7)]


def f_batch(response: str, width: int):
    calls = [f"{response}-c{i}" for i in range(width)]
    return [f.action(response, c) for c in calls] + [f.observation(c) for c in calls]


def test_only_the_branch_at_head_is_replayed(tmp_path):
    with EventStore(tmp_path / "tree.db") as store:
        conv = store.create_conversation("t")
        conv.append_many([f.system(), f.user(), *f_batch("r1", 1), *f_batch("r2", 1)])
        conv.navigate(3)  # back to r1's result: the next events make a second branch
        conv.append_many(f_batch("r3", 1) + f_batch("r4", 1) + f_batch("r5", 1))
        result = conv.replay([("none", NoOpCondenser())])
    assert result.events == 4 + 6 and result.calls == 4  # r1, r3, r4, r5: never r2


def test_keep_pins_are_never_broken(tmp_path):
    with EventStore(tmp_path / "pins.db") as store:
        conv = store.create_conversation("p")
        events = [e for e in sdk_history(150, seed=5) if not isinstance(e, Condensation)]
        conv.append_many(events[:2])
        conv.pin(1, label="task")
        conv.append_many(events[2:])
        result = conv.replay([("summary", LLMSummarizingCondenser(max_size=40, keep_first=0))])
        final = store.conversation("p").view()
    summary = result.strategies[1]
    assert summary.totals.condensations > 3
    assert summary.totals.pins_broken == 0 and summary.totals.pairs_broken == 0
    # Every call's view held the task: its tokens are in each input from the first call on.
    assert 1 in {e.seq for e in final.events}


# --- the command -----------------------------------------------------------------------------


def test_the_command_writes_nothing_and_says_the_same_twice(demo_db):
    before = digest(demo_db)
    first = run("replay", demo_db, "demo", "--json").output
    second = run("replay", demo_db, "demo", "--json").output
    assert first == second  # byte-identical
    assert digest(demo_db) == before
    data = json.loads(first)
    assert [s["label"] for s in data["strategies"]] == ["recorded", "none", "masking", "summary"]
    table = run("replay", demo_db, "demo").output
    assert all(len(line) <= 80 for line in table.splitlines())
    assert "summary: 4 summaries by the offline summarizer" in table


def test_costs_come_from_litellm_prices(demo_db):
    data = json.loads(run("replay", demo_db, "demo", "--type", "noop", "--model", "gpt-4o", "--json").output)
    assert data["prices"]["model"] == "gpt-4o" and data["tokenizer"] == "litellm:gpt-4o"
    for s in data["strategies"]:
        t = s["totals"]
        expected = t["input_tokens"] * data["prices"]["input"] + t["output_tokens"] * data["prices"]["output"]
        assert t["cost_usd"] == pytest.approx(expected, rel=1e-6)
        assert t["cost_cached_usd"] < t["cost_usd"]


def test_the_html_page_has_a_series_per_strategy(demo_db, tmp_path):
    page = tmp_path / "replay.html"
    run("replay", demo_db, "demo", "--type", "noop", "--type", "observation_masking,attention_window=30",
        "--html", page)
    found: list[str] = []

    class Series(HTMLParser):
        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if attrs.get("class") == "series":
                found.append(attrs["data-strategy"])

    text = page.read_text()
    Series().feed(text)
    assert found == ["recorded", "noop", "observation_masking,attention_window=30"]
    assert "<script" not in text and "https://" not in text


def test_many_conversations_are_summed(sdk_db, tmp_path):
    many = tmp_path / "many.db"
    with EventStore(many) as store:
        for k in range(3):
            store.create_conversation(f"c{k}").append_many(list(sdk_history(60, seed=k)))
    data = json.loads(run("replay", many, "--all-conversations", "--type", "noop", "--json").output)
    assert len(data["conversations"]) == 3
    total = data["totals"][1]["totals"]["input_tokens"]
    assert total == sum(c["strategies"][1]["totals"]["input_tokens"] for c in data["conversations"])


@pytest.mark.parametrize("args, message", [
    (("nope",), "no conversation"),
    (("demo", "--model", "no-such-model-xyz"), "price map has no such model"),
    (("demo", "--type", "noop", "--set", "x=1", "--type", "llm"), "--set adjusts a single --type"),
    (("demo", "--type", "no_such_type"), "no_such_type"),
])
def test_bad_input_is_one_line_and_exit_1_or_2(demo_db, args, message):
    before = digest(demo_db)
    result = invoke("replay", demo_db, *args)
    assert result.exit_code in (1, 2) and message in result.output
    assert digest(demo_db) == before


def test_the_scratch_is_never_the_source(demo_db):
    result = invoke("replay", demo_db, "demo", "--scratch", demo_db)
    assert result.exit_code == 1 and f"is the database {demo_db}, which this command reads" in result.output


# --- model summaries: asked once, then reused ---------------------------------------------------


def test_a_second_replay_with_a_model_calls_none(demo_db, tmp_path):
    scratch = tmp_path / "scratch.db"
    server = FakeLLMServer(responder=lambda request: text_reply("The agent fixed the date parser.")).start()
    env = {"OPENHANDS_MEMORY_LLM_API_BASE": server.url, "OPENHANDS_MEMORY_LLM_API_KEY": "sk-test"}
    try:
        args = ("replay", demo_db, "demo", "--type", "llm,max_size=80,keep_first=2", "--llm", "openai/test-model",
                "--scratch", scratch, "--json")
        first = json.loads(run(*args, env=env).output)["strategies"][1]["totals"]
        asked = len(server.requests)
        after_first = ledger(scratch)
        second = json.loads(run(*args, env=env).output)["strategies"][1]["totals"]
    finally:
        server.stop()
    assert first["summary_calls"] == asked == first["model_calls"] > 0
    # The calls went to the scratch's ledger (the source's has none).
    assert after_first == [("replay:demo:1", "ok")] * asked and ledger(demo_db) == []
    assert second["model_calls"] == 0 and second["summary_cache_hits"] == first["summary_calls"]
    assert len(server.requests) == asked  # nothing more reached the model
    # The second replay replaced the first's conversation and made no call: nothing to record.
    assert ledger(scratch) == []
    assert first["input_tokens"] == second["input_tokens"]


def ledger(path: Path) -> list[tuple]:
    with EventStore(path, create=False, readonly=True) as store, store.reading() as db:
        return db.all("SELECT conversation_id, outcome FROM llm_call ORDER BY id")


def test_the_spending_limit_stops_a_replay(demo_db, tmp_path):
    def priced(request):
        return text_reply("summary", prompt_tokens=1_000_000, completion_tokens=1_000_000)

    server = FakeLLMServer(responder=priced).start()
    env = {"OPENHANDS_MEMORY_LLM_API_BASE": server.url, "OPENHANDS_MEMORY_LLM_API_KEY": "sk-test"}
    try:
        result = invoke("replay", demo_db, "demo", "--type", "llm,max_size=80,keep_first=2", "--llm", "openai/gpt-4o",
                        "--scratch", tmp_path / "s.db", "--max-cost", "0.01", env=env)
    finally:
        server.stop()
    assert result.exit_code == 1
    assert "spending limit" in result.output and len(server.requests) == 1


# --- the meter -------------------------------------------------------------------------------


@given(st.lists(st.integers(0, 1), max_size=300), st.lists(st.integers(0, 1), max_size=300), st.integers(0, 320))
@settings(max_examples=300, deadline=None)
def test_first_difference_is_the_common_start_whatever_the_hint(a, b, hint):
    b = a[: len(b)] + b[len(a):] if len(b) > 5 and hint % 2 else b  # long common starts too
    naive = 0
    while naive < min(len(a), len(b)) and a[naive] == b[naive]:
        naive += 1
    assert first_difference(a, b, hint) == naive  # type: ignore[arg-type]
