"""Agents sharing one conversation: ``conv.step`` survives another agent's condensation landing
under it (it reads the view again and decides again, a few times, then raises), while an
explicit ``condense`` still surfaces the conflict. On every backend, through PgBouncer too."""

from __future__ import annotations

import multiprocessing
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest

from openhands_memory.condensers import LLMSummarizingCondenser, NoOpCondenser
from openhands_memory.conversation import EventStore
from openhands_memory.conversation.conversation import STEP_TRIES
from openhands_memory.errors import ConcurrentCondensation
from openhands_memory.events import Condensation
from openhands_memory.llm import LLMConfig
from openhands_memory.view.tokens import FRESH
from openhands_memory.view.view import View

from . import factories as f
from .llm_server import FakeLLMServer


def pair(n: int) -> list:
    return [f.action(f"r{n}", f"c{n}"), f.observation(f"c{n}", f"output of step {n} " * 4)]


@dataclass
class Rivalled(NoOpCondenser):
    """``inner``'s decision, but for each of the first ``rivals`` calls another store's agent
    appends and condenses after this view was read (what a second agent does meanwhile)."""

    inner: Any = None
    rival: Callable[[], None] | None = None
    rivals: int = 0
    calls: list[int] = field(default_factory=list)

    def condense(self, view: View, tokens: Any = FRESH, calls: Any = None) -> Any:
        result = self.inner.condense(view, tokens, calls)
        self.calls.append(view.upto)
        if len(self.calls) <= self.rivals:
            self.rival()
        return result


def condensations(store: EventStore, cid: str) -> list[Condensation]:
    return [e for e in store.conversation(cid).events() if isinstance(e, Condensation)]


def forgotten_stays_forgotten(store: EventStore, cid: str) -> None:
    """Every condensation forgets only events stored before it, which the view it was made
    from still showed: none forgets again what an earlier one forgot (as one made from a
    stale view would)."""
    events = list(store.conversation(cid).events())
    seq_of = {e.id: e.seq for e in events}
    seen: set[int] = set()
    for cond in (e for e in events if isinstance(e, Condensation)):
        forgotten = {seq_of[uid] for uid in cond.forgotten_event_ids}
        forgotten.update(seq for lo, hi in cond.forgotten_ranges or () for seq in range(lo, hi + 1))
        assert forgotten and max(forgotten) < cond.seq, cond.seq
        assert not forgotten & seen, f"condensation {cond.seq} forgets again {sorted(forgotten & seen)[:5]}"
        seen |= forgotten


def _setup(database_url: str) -> tuple[EventStore, EventStore, Callable[[], None]]:
    mine, theirs = EventStore(database_url), EventStore(database_url)
    conv = mine.create_conversation("shared")
    conv.append_many([f.system(), f.user("task")] + [e for n in range(40) for e in pair(n)])
    other = theirs.conversation("shared")
    counter = iter(range(100, 10_000))
    condenser = LLMSummarizingCondenser(max_size=30, keep_first=1)

    def rival() -> None:
        """Another agent: it condenses (its view is past max_size), then goes on past it."""
        other.append_many([e for _ in range(20) for e in pair(next(counter))])
        assert other.condense(condenser).condensation is not None
        other.append_many([e for _ in range(20) for e in pair(next(counter))])

    return mine, theirs, rival


def test_a_step_condenses_again_from_a_fresh_view_after_a_rival_condensation(database_url):
    mine, theirs, rival = _setup(database_url)
    with mine, theirs:
        strategy = Rivalled(inner=LLMSummarizingCondenser(max_size=30, keep_first=1), rival=rival, rivals=1)
        view = mine.conversation("shared").step(strategy)
        # The first decision was refused (the rival's landed after its view), the second was
        # made from the view the rival's condensation left, and stored.
        assert len(strategy.calls) == 2 and strategy.calls[1] > strategy.calls[0]
        fresh = EventStore(database_url)
        with fresh:
            assert view.seqs == fresh.conversation("shared").view().seqs
            assert len(view) <= 31
            assert [c.seq for c in condensations(fresh, "shared")][1:] == [strategy.calls[1] + 1]
            forgotten_stays_forgotten(fresh, "shared")


def test_a_step_gives_up_after_its_tries_and_an_explicit_condense_at_once(database_url):
    mine, theirs, rival = _setup(database_url)
    with mine, theirs:
        conv = mine.conversation("shared")
        strategy = Rivalled(inner=LLMSummarizingCondenser(max_size=30, keep_first=1), rival=rival, rivals=STEP_TRIES)
        with pytest.raises(ConcurrentCondensation):
            conv.step(strategy)
        assert len(strategy.calls) == STEP_TRIES
        assert len(condensations(mine, "shared")) == STEP_TRIES  # the rival's, none of ours
        explicit = Rivalled(inner=LLMSummarizingCondenser(max_size=30, keep_first=1), rival=rival, rivals=1)
        with pytest.raises(ConcurrentCondensation):
            conv.condense(explicit)
        assert len(explicit.calls) == 1
        assert len(condensations(mine, "shared")) == STEP_TRIES + 1
        forgotten_stays_forgotten(mine, "shared")


def test_a_refused_condensation_keeps_its_model_call_in_the_ledger(tmp_path, llm_server: FakeLLMServer):
    mine, theirs, rival = _setup(str(tmp_path / "ledger.db"))
    with mine, theirs:
        config = LLMConfig(model="openai/test-model", api_base=llm_server.url, api_key="sk-test", timeout=5.0,
                           num_retries=1, retry_min_wait=0.01, retry_max_wait=0.05)
        llm_server.push_text("The agent ran forty steps.", prompt_tokens=77)
        strategy = Rivalled(inner=LLMSummarizingCondenser(llm_config=config, max_size=30, keep_first=1),
                            rival=rival, rivals=1)
        with pytest.raises(ConcurrentCondensation):
            mine.conversation("shared").condense(strategy)
        with mine.reading() as db:
            rows = db.all("SELECT condensation_id, prompt_tokens, outcome FROM llm_call", ())
        assert rows == [(None, 77, "ok")]


def _agent(url: str, worker: int, steps: int, out: Any) -> None:
    """An agent's loop on the shared conversation: a call and its result, then a step."""
    try:
        with EventStore(url) as store:
            conv = store.conversation("shared")
            condenser = LLMSummarizingCondenser(max_size=30, keep_first=1)
            for n in range(steps):
                conv.append_many(pair(worker * 1000 + n))
                view = conv.step(condenser)
                assert len(view) <= 31 + 4 * 2, len(view)  # (the others' pairs since it condensed)
        out.put((worker, "ok"))
    except BaseException as e:  # reported to the test
        out.put((worker, f"{type(e).__name__}: {e}"))


def test_agents_sharing_a_conversation_step_without_a_crash(database_url):
    with EventStore(database_url) as store:
        store.create_conversation("shared").append_many([f.system(), f.user("task")])
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    agents = [ctx.Process(target=_agent, args=(database_url, w, 40, out)) for w in range(4)]
    for p in agents:
        p.start()
    reports = sorted(out.get(timeout=180) for _ in agents)
    for p in agents:
        p.join(60)
    assert reports == [(w, "ok") for w in range(4)]
    with EventStore(database_url) as store:
        conv = store.conversation("shared")
        events = list(conv.events())
        assert [e.seq for e in events] == list(range(len(events)))
        assert len([e for e in events if not isinstance(e, Condensation)]) == 2 + 4 * 40 * 2
        assert len(condensations(store, "shared")) >= 4
        forgotten_stays_forgotten(store, "shared")
