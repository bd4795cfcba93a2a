"""A fork keeps its context: what a condensation forgot is stored as what it forgot on its
path, cut at the path's jumps, and a fork moves each part by its own interval's shift.

A strategy names one range from the first to the last event of each run it forgets in the
view; on a branch that range spans the ids of the branch left between them. Stored whole,
the fork (which renumbers each interval of the path apart) moved it by the shift of the
interval where it starts, and hid its own context and every event appended to it after.
These tests hold, on both backends: the reproduction (the fork's view is the source's, and
what is appended to it is shown and later summarised), a range as the old code stored it
(the view and a fork read it right, ``doctor`` names it and ``--fix`` cuts it), and a
property over random trees with forks.
"""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openhands_memory import ranges
from openhands_memory.condensers import AmortizedForgettingCondenser, LLMSummarizingCondenser
from openhands_memory.conversation import Conversation, EventStore
from openhands_memory.conversation.condensing import CondenseOutcome
from openhands_memory.errors import NoCondensationAvailable
from openhands_memory.inspection import doctor
from openhands_memory.view import View

from . import factories as f


def seen(view: View) -> list[tuple[str, str | None]]:
    """What the model is shown, apart from ids (a fork renumbers them): each event's external
    id, and the summary's text."""
    return [(e.id, getattr(e, "summary", None)) for e in view.events]


def grow(conv: Conversation) -> CondenseOutcome:
    """30 events; HEAD back to 10; 5 more (30..34, a branch after 10); a condensation that
    forgets 1..10 and 30..31 (stored as event 35)."""
    conv.append_many([f.user(f"first line {i}") for i in range(30)])
    conv.navigate(10)
    conv.append_many([f.user(f"branch {i}") for i in range(5)])
    return conv.condense(LLMSummarizingCondenser(max_size=10, keep_first=1))


def test_a_fork_of_a_branch_keeps_the_context_its_condensation_left(database_url):
    with EventStore(database_url) as store:
        conv = store.create_conversation("S")
        done = grow(conv)
        assert done.stored_as == 35 and done.forgotten_ids == [*range(1, 11), 30, 31]
        with store.reading() as db:  # what was forgotten on the path, cut at its jump
            assert db.forgotten_ranges("S") == [(35, 1, 10), (35, 30, 31)]
        source = seen(conv.view())
        assert len(source) == 5 and source[1][1] is not None  # event 0, the summary, 32..34

        fork = conv.fork(conversation_id="F")
        assert seen(fork.view()) == source
        with store.reading() as db:
            assert db.forgotten_ranges("F") == [(16, 1, 12)]
        added = fork.append_many([f.user(f"after the fork {i}") for i in range(20)])
        assert added == list(range(17, 37))
        assert fork.view().seqs[-20:] == added
        assert seen(fork.view()) == source + [(fork.get(i).id, None) for i in added]

        later = fork.condense(LLMSummarizingCondenser(max_size=10, keep_first=1))
        assert set(later.forgotten_ids) & set(added)
        assert "after the fork 0" in (fork.view().summary_event.summary or "")  # type: ignore[union-attr]
        assert seen(conv.view()) == source  # the source is as it was
        report = doctor.check(store, full=True)
        assert report.healthy, report.problems


def _as_the_old_code_stored_it(store: EventStore, cid: str, cond: int, run: ranges.Run) -> None:
    """Replace a condensation's ranges and hidden runs by one range, as the code before the
    cut stored what a strategy named: the range whole, folded into one hidden run."""
    with store.writing() as db:
        db.execute("DELETE FROM hidden_run WHERE conversation_id = ?", (cid,))
        db.execute("DELETE FROM forgotten_range WHERE conversation_id = ?", (cid,))
        db.execute("INSERT INTO forgotten_range (conversation_id, condensation_id, start_id, end_id) "
                   "VALUES (?, ?, ?, ?)", (cid, cond, *run))
        db.execute("INSERT INTO hidden_run (conversation_id, from_id, start_id, end_id, until_id) "
                   "VALUES (?, ?, ?, ?, NULL)", (cid, cond, *run))


def test_doctor_names_a_range_the_old_code_stored_across_a_jump_and_fix_cuts_it(database_url):
    with EventStore(database_url) as store:
        conv = store.create_conversation("S")
        grow(conv)
        want = seen(conv.view())
        _as_the_old_code_stored_it(store, "S", 35, (1, 31))
        with EventStore(database_url) as fresh:  # read without the writer's cache
            old = fresh.conversation("S")
            assert seen(old.view()) == want  # ids off the path are never shown anyway
            fork = old.fork(conversation_id="F")  # cut per interval as it is copied
            assert seen(fork.view()) == want
            added = fork.append_many([f.user(f"after the fork {i}") for i in range(20)])
            assert fork.view().seqs[-20:] == added

        for full in (True, False):
            report = doctor.check(store, full=full)
            assert [(p.conversation, p.check, p.ids, p.fixable) for p in report.problems] == [
                ("S", "forgotten range off its path", [35], True)], report.problems
            detail = report.problems[0].detail
            assert "forgets 1..31" in detail and "0..10, 30..35" in detail and "1..10, 30..31" in detail

        repaired = doctor.repair(store, doctor.check(store, full=True))
        assert any("cut the ranges condensation 35 forgot" in line for line in repaired.fixed), repaired
        with store.reading() as db:
            assert db.forgotten_ranges("S") == [(35, 1, 10), (35, 30, 31)]
        assert seen(conv.view()) == want
        report = doctor.check(store, full=True)
        assert report.healthy, report.problems


def test_doctor_rebuilds_lost_ranges_as_what_was_forgotten_on_the_path(database_url):
    """The Condensation's JSON names one range across the jump (as its strategy made it); the
    ranges a repair writes from it are cut at the jump, as the condensation stored them."""
    with EventStore(database_url) as store:
        conv = store.create_conversation("S")
        grow(conv)
        assert conv.get(35).forgotten_ranges == [(1, 31)]  # type: ignore[attr-defined]
        with store.writing() as db:
            db.execute("DELETE FROM forgotten_range WHERE conversation_id = 'S'")
        report = doctor.check(store, full=True)
        assert ("condensation without ranges", [35]) in [(p.check, p.ids) for p in report.problems]
        assert "forgets 12 events" in next(p.detail for p in report.problems if p.check == "condensation without ranges")
        doctor.repair(store, report)
        with store.reading() as db:
            assert db.forgotten_ranges("S") == [(35, 1, 10), (35, 30, 31)]
        report = doctor.check(store, full=True)
        assert report.healthy, report.problems


def test_doctor_reports_a_range_outside_the_events_before_its_condensation(database_url):
    with EventStore(database_url) as store:
        conv = store.create_conversation("S")
        grow(conv)
        with store.writing() as db:  # a hand edit: no code writes it
            db.execute("UPDATE forgotten_range SET end_id = 40 WHERE conversation_id = 'S' AND start_id = 30")
        report = doctor.check(store, full=True)
        outside = [p for p in report.problems if p.check == "forgotten range outside its events"]
        assert [(p.ids, p.fixable) for p in outside] == [([35], False)]
        assert "forgets 30..40" in outside[0].detail and "(0..34)" in outside[0].detail
        repaired = doctor.repair(store, report)
        with store.reading() as db:  # left as it is: what was meant cannot be known
            assert (35, 30, 40) in db.forgotten_ranges("S")
        assert not any("cut the ranges" in line for line in repaired.fixed)


# --- a property over random trees with forks ---------------------------------------------------

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("users"), st.integers(1, 6)),
        st.tuples(st.just("pair"), st.integers(1, 2)),
        st.tuples(st.just("navigate"), st.integers(0, 1000)),
        st.tuples(st.just("branch"), st.integers(0, 1000)),  # back to a shown event, a few events there
        st.tuples(st.just("condense"), st.integers(0, 3)),  # 2, 3: then a fork at HEAD
        st.tuples(st.just("fork"), st.one_of(st.just(-1), st.integers(0, 1000))),  # -1: at HEAD
    ),
    min_size=6,
    max_size=20,
)


def on_their_paths(store: EventStore, cids: list[str]) -> None:
    """Every stored range lies among the events before its condensation, inside one interval
    of that condensation's path."""
    with store.reading() as db:
        for cid in cids:
            for cond, start, end in db.forgotten_ranges(cid):
                path = db.path(cid, cond)
                assert 0 <= start <= end < cond, (cid, cond, start, end)
                assert any(s <= start and end <= e for s, e in path), (cid, cond, start, end, path)


def forked(conv: Conversation, at: int | None, cid: str) -> Conversation:
    """A fork of ``conv`` at ``at`` (None: HEAD), checked against the source's view there."""
    want = conv.view() if at is None else conv.view(at=at)
    fork = conv.fork(at=at, conversation_id=cid)
    got = fork.view()
    assert seen(got) == seen(want), at
    assert got.unhandled_condensation_request == want.unhandled_condensation_request
    return fork


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_a_fork_shows_what_its_source_showed_at_the_fork_point(database_url, ops):
    # Small windows, so that a condensation often lands on a branch and forgets across its jump.
    strategies = [LLMSummarizingCondenser(max_size=6, keep_first=1), AmortizedForgettingCondenser(max_size=6, keep_first=1)]
    tag = uuid.uuid4().hex[:8]
    with EventStore(database_url) as store:
        conv = store.create_conversation(f"{tag}-0")
        conv.append_many([f.system(), f.user("task")])
        made = [conv.id]
        calls = 0
        for op, arg in ops:
            if op == "users":
                added = conv.append_many([f.user(f"{conv.id} {len(conv) + k}") for k in range(arg)])
                assert conv.view().seqs[-arg:] == added  # what was just appended is shown
            elif op == "pair":
                events = []
                for _ in range(arg):
                    calls += 1
                    events += [f.action(f"r{calls}", f"c{calls}"), f.observation(f"c{calls}")]
                conv.append_many(events)
            elif op == "navigate":
                conv.navigate(arg % len(conv))
            elif op == "branch":  # a jump inside the window the next condensation cuts
                shown = conv.view().seqs
                if shown:
                    conv.navigate(shown[arg % len(shown)])
                    conv.append_many([f.user(f"{conv.id} {len(conv) + k}") for k in range(4)])
            elif op == "condense":
                try:
                    conv.condense(strategies[arg % 2])
                except NoCondensationAvailable:
                    continue
                if arg >= 2:  # a later condensation may cover what an earlier one did wrong
                    conv = forked(conv, None, f"{tag}-{len(made)}")
                    made.append(conv.id)
            else:  # fork at HEAD or at an event of any branch, and go on in the fork
                conv = forked(conv, None if arg < 0 else arg % len(conv), f"{tag}-{len(made)}")
                made.append(conv.id)
            on_their_paths(store, [conv.id])  # its source no longer changes
        with store.reading() as db:  # a fork between a call and its result leaves it dangling
            problems = [p for cid in made for p in doctor.check_conversation(db, cid, full=True)[0]
                        if p.check != "dangling tool call"]
        assert not problems, problems
