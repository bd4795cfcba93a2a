"""Pins: keep pins survive every strategy's cut (the hard reset too), reinject pins come back
once, after the summary, and pins are events (``view(at=N)``, branches, unpins, groups).

The property tests drive every strategy through a real SQLite store, with keep pins made at
random while the history grows, and check the SDK's four properties independently
(``test_condensers.assert_well_formed``) plus the fifth: no keep pin is ever forgotten.
"""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openhands_memory.condensers import (
    AmortizedForgettingCondenser,
    Condenser,
    ConversationWindowCondenser,
    LLMSummarizingCondenser,
    ObservationMaskingCondenser,
    RecentEventsCondenser,
    StructuredSummaryCondenser,
)
from openhands_memory.config import condenser_from_toml
from openhands_memory.conversation import EventStore
from openhands_memory.errors import ConfigError, EventNotFound, NoCondensationAvailable, PinBudgetExceeded, PinRefused
from openhands_memory.events import (
    CondensationSummaryEvent,
    ConversationStateUpdateEvent,
    Event,
    PinnedContextEvent,
    SystemPromptEvent,
)
from openhands_memory.view import View
from openhands_memory.view.pins import PinRule
from openhands_memory.view.tokens import FRESH

from . import factories as f
from .test_condensers import assert_well_formed


def strategies() -> list:
    return [
        LLMSummarizingCondenser(max_size=10, keep_first=1),  # offline summarizer
        LLMSummarizingCondenser(max_size=10, keep_first=2, hard_fallback="reset"),
        StructuredSummaryCondenser(max_size=10, keep_first=1),
        AmortizedForgettingCondenser(max_size=8, keep_first=1, hard_fallback="reset"),
        RecentEventsCondenser(keep_first=1, max_events=6),
        ConversationWindowCondenser(),
        ObservationMaskingCondenser(attention_window=2),
    ]


def shown(view: View) -> list[tuple[int | None, str]]:
    return [(e.seq, e.kind) for e in view.events]


def pair(n: int, *, think: bool = False, tool: str = "terminal", text: str | None = None) -> list[Event]:
    return [f.action(f"r{n}", f"c{n}", think=think, tool=tool), f.observation(f"c{n}", text, tool=tool)]


STEP = st.one_of(
    st.tuples(st.just("pair"), st.integers(1, 3)),  # a tool loop of k calls (thinking when k > 1)
    st.tuples(st.just("batch"), st.integers(2, 3)),  # a parallel batch of k calls
    st.tuples(st.just("user"), st.just(0)),
    st.tuples(st.just("state"), st.just(0)),
    st.tuples(st.just("request"), st.just(0)),
    st.tuples(st.just("pin"), st.integers(0, 10_000)),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=4, max_size=40), which=st.integers(0, 6))
def test_no_strategy_forgets_a_keep_pin_and_each_pin_shows_once(tmp_path_factory, steps, which):
    strategy = strategies()[which]
    with EventStore(tmp_path_factory.mktemp("pins") / "p.db") as store:
        conv = store.create_conversation("c")
        conv.append_many([f.system(), f.user("the task")])
        n = 0
        for op, arg in steps:
            if op == "pair":
                events = []
                for k in range(arg):
                    n += 1
                    events += pair(n, think=arg > 1 and k == 0)
                conv.append_many(events)
            elif op == "batch":
                n += 1
                calls = [f"b{n}c{k}" for k in range(arg)]
                conv.append_many([f.action(f"b{n}", c) for c in calls] + [f.observation(c) for c in calls])
            elif op == "user":
                conv.append(f.user(f"more {n}"))
            elif op == "state":
                conv.append(ConversationStateUpdateEvent(key="execution_status", value="running"))
            elif op == "request":
                conv.request_condensation()
            else:  # keep or reinject one of the events in view
                stored = [e.seq for e in conv.view().events if e.seq is not None]
                conv.pin(stored[arg % len(stored)], "keep" if arg % 3 else "reinject")
            try:
                conv.step(strategy)
            except NoCondensationAvailable:
                pass
            view = conv.view()
            history = list(conv.events())
            pins = conv.pins()
            keep = {p.seq for p in pins if p.mode == "keep"}
            assert keep <= set(view.seqs), f"{strategy.type} forgot keep pins {keep - set(view.seqs)}"
            again = [e.pinned_seq for e in view.events if isinstance(e, PinnedContextEvent)]
            for p in pins:  # each pinned event is shown exactly once: in place, or again
                assert view.seqs.count(p.seq) + again.count(p.seq) == 1, (p, again)
            if again:  # right after the summary (or the system prompt), together
                first = view.events.index(next(e for e in view.events if isinstance(e, PinnedContextEvent)))
                before = view.events[first - 1] if first else None
                assert first == 0 or isinstance(before, (CondensationSummaryEvent, SystemPromptEvent))
                assert all(isinstance(e, PinnedContextEvent) for e in view.events[first : first + len(again)])
            assert_well_formed(view, history, where=f"{strategy.type} after {op}")
            assert shown(view) == shown(View.from_events(history))
        assert shown(EventStore(store.location.path).conversation("c").view()) == shown(conv.view())


def rolling_history(conv, pairs: int = 40) -> None:
    conv.append_many([f.system(), f.user("Fix the failing parser test")])
    for n in range(pairs):
        tool = "task_tracker" if n % 10 == 3 else "terminal"
        conv.append_many(pair(n, tool=tool, text=f"plan v{n}" if tool == "task_tracker" else None))


def test_a_reinject_pin_comes_back_once_per_view_right_after_the_summary(conv):
    rolling_history(conv, 4)
    plan = conv.view().events[-1].seq  # the task tracker's result (pair 3)
    conv.pin(plan, "reinject", label="plan")
    strategy = LLMSummarizingCondenser(max_size=10, keep_first=2)
    condensed = 0
    for n in range(4, 60):
        conv.append_many(pair(n))
        done = conv.condense(strategy)
        condensed += done.stored_as is not None
        view = conv.view()
        again = [e for e in view.events if isinstance(e, PinnedContextEvent)]
        if plan in view.seqs:
            assert again == []
            continue
        assert len(again) == 1 and again[0].pinned_seq == plan
        at = view.events.index(again[0])
        assert isinstance(view.events[at - 1], CondensationSummaryEvent)
        assert "not a new request" in again[0].text and "plan v3" in again[0].text
        assert shown(view) == shown(View.from_events(list(conv.events())))
        # the summaries never swallow it: it is shown once, by the pin
        text = "\n".join(part.get("text", "") for m in view.to_messages() for part in m.get("content") or [])
        assert text.count("plan v3") == 1
    assert condensed >= 3


def test_a_keep_pin_survives_the_hard_reset(conv):
    """A request on a view too short to halve is the SDK's hard reset: everything after the
    system prompt goes, except the pinned result and its call."""
    rolling_history(conv, 2)
    conv.pin(3, "keep")
    conv.request_condensation()
    done = conv.condense(LLMSummarizingCondenser(max_size=100, keep_first=4))
    assert done.fallback is not None and done.stored_as is not None
    view = conv.view()
    assert [s for s in view.seqs if s is not None] == [0, 2, 3]
    assert [p.seq for p in done.pins_carried] == [3]


def test_a_condensation_made_elsewhere_cannot_forget_a_keep_pin(conv):
    """``carve``: a strategy that names the pinned event is corrected before it is stored."""
    rolling_history(conv, 6)
    conv.pin(3, "keep")

    class ForgetsAll(Condenser):
        type = "forgets_all"

        def condense(self, view, tokens=FRESH, calls=None):
            from openhands_memory.events import Condensation

            return Condensation(forgotten_event_ids=[e.id for e in view.events[1:-2]])

    done = conv.condense(ForgetsAll())
    assert done.stored_as is not None
    assert {2, 3} <= set(conv.view().seqs)


def test_pins_are_events_seen_by_view_at_and_undone_by_unpin(conv):
    rolling_history(conv, 6)
    first = conv.pin(4, "keep", label="call")
    assert [p.seq for p in conv.pins()] == [4]
    assert conv.view(at=first - 1).pins.by_seq == {}
    unpinned = conv.unpin(4)
    assert conv.pins() == []
    assert [p.seq for p in conv.view(at=unpinned - 1).pins] == [4]
    assert [p.seq for p in conv.pins(at=unpinned - 1)] == [4]
    assert conv.get(first).kind == "PinEvent"


def test_a_newer_pin_in_a_group_replaces_the_older(conv):
    rolling_history(conv, 20)
    conv.pin(9, "reinject", group="tasks")
    conv.pin(29, "reinject", group="tasks")
    assert [(p.seq, p.group) for p in conv.pins()] == [(29, "tasks")]


def test_a_pin_belongs_to_its_branch(conv):
    rolling_history(conv, 6)
    conv.navigate(7)
    conv.pin(5, "keep")
    branch_tip = conv.head
    conv.navigate(9)
    conv.append(f.user("another way"))
    assert conv.pins() == []
    assert [p.seq for p in conv.view(head=branch_tip).pins] == [5]


def test_pins_are_refused_with_the_reason(conv):
    rolling_history(conv, 30)
    state = conv.append(ConversationStateUpdateEvent(key="x", value=1))
    with pytest.raises(PinRefused, match="never shown"):
        conv.pin(state, "keep")
    with pytest.raises(EventNotFound):
        conv.pin(10_000)
    with pytest.raises(PinRefused, match="mode"):
        conv.pin(3, "forever")  # type: ignore[arg-type]
    with pytest.raises(PinRefused, match="not pinned"):
        conv.unpin(3)
    conv.step(LLMSummarizingCondenser(max_size=20, keep_first=1))
    gone = min(s for s in range(2, 40) if s not in conv.view().seqs)
    before = len(conv)
    with pytest.raises(PinRefused, match="reinject"):
        conv.pin(gone, "keep")
    assert len(conv) == before  # nothing written
    conv.pin(gone, "reinject")
    assert any(isinstance(e, PinnedContextEvent) and e.pinned_seq == gone for e in conv.view().events)


def test_the_budget_names_the_pins_over_it(conv):
    conv.append_many([f.system(), f.user("task")])
    conv.append_many(pair(1, text="x" * 4000))
    conv.append_many(pair(2, text="y" * 400))
    conv.pin(5, "keep", budget=1000)
    before = len(conv)
    with pytest.raises(PinBudgetExceeded, match=r"#3 \(1,0"):
        conv.pin(3, "keep", budget=1000)
    assert len(conv) == before


def test_rules_from_toml_pin_the_task_and_the_latest_task_list(conv):
    strategy = condenser_from_toml(tomllib.loads('''
        [condenser]
        type = "llm"
        max_size = 12
        keep_first = 1

        [[condenser.pins]]
        first_user_message = true

        [[condenser.pins]]
        tool = "task_tracker"
        mode = "reinject"
    '''))
    rolling_history(conv, 0)
    for n in range(40):
        tool = "task_tracker" if n % 10 == 3 else "terminal"
        conv.append_many(pair(n, tool=tool, text=f"plan v{n}" if tool == "task_tracker" else None))
        conv.step(strategy)
        view = conv.view()
        assert 1 in view.seqs  # the task
        if n < 3:
            continue
        latest = max(p.seq for p in conv.pins() if p.rule == "tool:task_tracker")
        plans = [p for p in conv.pins() if p.rule == "tool:task_tracker"]
        assert len(plans) == 1  # each newer result replaced the one before
        assert latest in view.seqs or any(
            isinstance(e, PinnedContextEvent) and e.pinned_seq == latest for e in view.events)
    assert f"plan v33" in conv.get(latest).observation["content"][0]["text"]  # type: ignore[attr-defined]
    # the rules stay with the strategy's stored settings
    section = {k: v for k, v in strategy.config().items() if v is not None}
    assert condenser_from_toml({"condenser": section}).pin_rules == strategy.pin_rules


def test_a_bad_rule_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"condenser.pins\[0\]"):
        condenser_from_toml(tomllib.loads('[condenser]\ntype="noop"\n[[condenser.pins]]\nmode="keep"\n'))
    with pytest.raises(ConfigError, match=r"condenser.pins\[0\].kind"):
        condenser_from_toml(tomllib.loads('[condenser]\ntype="noop"\n[[condenser.pins]]\nkind="PinEvent"\n'))
    with pytest.raises(ConfigError, match="pin_budget"):
        condenser_from_toml(tomllib.loads('[condenser]\ntype="noop"\npin_budget=2\n'))


def test_pins_on_postgresql_match_sqlite(database_url):
    """The same history and pins give the same view on both backends."""
    with EventStore(database_url) as store:
        conv = store.create_conversation("c")
        rolling_history(conv, 20)
        conv.pin(1, "keep")
        conv.pin(9, "reinject", label="plan")
        for _ in range(3):
            conv.request_condensation()
            conv.step(LLMSummarizingCondenser(max_size=100, keep_first=1))
        view = conv.view()
        assert 1 in view.seqs and 9 not in view.seqs
        assert shown(view) == shown(View.from_events(list(conv.events())))
        fresh = EventStore(database_url).conversation("c").view()
        assert shown(fresh) == shown(view)


def test_an_sdk_agents_conversation_takes_no_pin_rows_but_its_rules_still_hold(conv):
    """The SDK could not load a pin event from its log: rules are judged in memory there."""
    rolling_history(conv, 30)
    with conv.store.writing(conv.id) as db:
        db.set_base_state(conv.id, "{}")
    with pytest.raises(PinRefused, match="SDKCondenser"):
        conv.pin(1)
    strategy = LLMSummarizingCondenser(max_size=20, keep_first=1).with_pins(
        [PinRule(first_user_message=True)])
    before = len(conv)
    done = conv.condense(strategy)
    assert done.stored_as == before  # the condensation, and no pin row
    assert 1 in conv.view().seqs and conv.pins() == []


def test_a_dry_run_judges_the_rules_and_writes_nothing(conv):
    rolling_history(conv, 30)
    strategy = LLMSummarizingCondenser(max_size=20, keep_first=1).with_pins(
        [PinRule(first_user_message=True)])
    before = len(conv)
    done = conv.condense(strategy, dry_run=True)
    assert len(conv) == before and conv.pins() == []
    assert [p.seq for p in done.pins_carried] == [1] and 1 not in done.forgotten_ids
