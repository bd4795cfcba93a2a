"""Worked vectors for the view, each asserted on every way a view is built.

Sources:
* the SDK reference §2.5: manipulation index sets and enforcement vectors (verified on 1.58.0);
* the legacy reference §7.3: ``tests/unit/memory/test_view.py`` and the recommended extras.

Every case runs three ways (``BUILD``):
* ``memory``      ``View.from_events(events)``, the plain in-memory fold;
* ``sql``         the events appended to a conversation in a real SQLite file, then
                  ``conv.view()`` (``view_query.load`` over the visible id intervals);
* ``incremental`` the same, but asking for the view after every append, so the final view
                  is the cached one, extended append by append.

Notation as in the references: M = user MessageEvent, A(r, c[, think]) = ActionEvent with
llm_response_id r and tool_call_id c, O(c) = ObservationEvent, E(c) = AgentErrorEvent,
X(c) = UserRejectObservation, C = Condensation, Req = CondensationRequest. Every event's
external id is its label (``m0``, ``a1``, ...), so results read as the reference writes them.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Callable

import pytest

from openhands_memory.events import (
    ActionEvent,
    Condensation,
    CondensationRequest,
    CondensationSummaryEvent,
    Event,
)
from openhands_memory.view.manipulation import ManipulationIndices
from openhands_memory.conversation import EventStore
from openhands_memory.view import View, manipulation_indices

from . import factories as f

# --- builders -------------------------------------------------------------------------------


def _named(event: Event, uid: str) -> Event:
    return event.model_copy(update={"id": uid})


def M(uid: str) -> Event:
    return _named(f.user(uid), uid)


def A(uid: str, r: str, c: str, think: bool = False) -> Event:
    return _named(f.action(r, c, think=think, thought=f"thinking {uid}"), uid)


def O(uid: str, c: str) -> Event:  # noqa: E743 - the reference's letter
    return _named(f.observation(c), uid)


def E(uid: str, c: str) -> Event:
    return _named(f.error(c), uid)


def X(uid: str, c: str) -> Event:
    return _named(f.rejection(c), uid)


def C(uid: str, *, forget=(), ids=None, ranges=None, summary=None, offset=None) -> Event:
    """``forget``: external ids (SDK form); ``ids``: sequence numbers (legacy form)."""
    runs = list(ranges) if ranges is not None else None
    if ids is not None:
        runs = (runs or []) + [(i, i) for i in ids]
    return _named(
        f.condensation(forget=list(forget), ranges=runs, summary=summary, offset=offset), uid
    )


def Req(uid: str) -> Event:
    return _named(f.request(), uid)


def labels(view: View) -> list[str]:
    return [e.id for e in view]


# --- the three ways to build a view ---------------------------------------------------------


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory):
    # One file for the whole module: creating (migrating) a database costs ~0.2 s.
    s = EventStore(tmp_path_factory.mktemp("vectors") / "vectors.db")
    yield s
    s.close()


BUILD = ["memory", "sql", "incremental"]


@pytest.fixture(params=BUILD)
def build(request, shared_store) -> Callable[[list[Event]], View]:
    mode = request.param

    def make(events: list[Event]) -> View:
        if mode == "memory":
            return View.from_events(events)
        conv = shared_store.create_conversation(str(uuid.uuid4()))
        if mode == "sql":
            conv.append_many(events)
            return conv.view()
        for e in events:
            conv.view()
            conv.append(e)
        return conv.view()

    return make


# --- SDK §2.5: worked index sets ------------------------------------------------------------

# Each row: name, events, manipulation indices of that view.
INDEX_SETS: list[tuple[str, Callable[[], list[Event]], set[int]]] = [
    ("[M,M,M]", lambda: [M("m0"), M("m1"), M("m2")], {0, 1, 2, 3}),
    ("[A(r1,c1),O(c1)]", lambda: [A("a1", "r1", "c1"), O("o1", "c1")], {0, 2}),
    (
        "[M,A(r1,c1),O(c1),M]",
        lambda: [M("m0"), A("a1", "r1", "c1"), O("o1", "c1"), M("m1")],
        {0, 1, 3, 4},
    ),
    (
        "[A(r1,c1,think),A(r1,c2),A(r1,c3),O1,O2,O3]",
        lambda: [
            A("a1", "r1", "c1", think=True), A("a2", "r1", "c2"), A("a3", "r1", "c3"),
            O("o1", "c1"), O("o2", "c2"), O("o3", "c3"),
        ],
        {0, 6},
    ),
    (
        "[A(r1,c1),A(r1,c2),O1,O2,A(r2,c3),A(r2,c4),O3,O4]",
        lambda: [
            A("a1", "r1", "c1"), A("a2", "r1", "c2"), O("o1", "c1"), O("o2", "c2"),
            A("a3", "r2", "c3"), A("a4", "r2", "c4"), O("o3", "c3"), O("o4", "c4"),
        ],
        {0, 4, 8},
    ),
    (
        "[M,A(r1,c1),A(r1,c2),O1,M,O2,M,A(r2,c3),O3] (the M inside the pair span is swallowed)",
        lambda: [
            M("m0"), A("a1", "r1", "c1"), A("a2", "r1", "c2"), O("o1", "c1"), M("m1"),
            O("o2", "c2"), M("m2"), A("a3", "r2", "c3"), O("o3", "c3"),
        ],
        {0, 1, 6, 7, 9},
    ),
    (
        "[A(r1,c1),A(r1,c2),M,O1,O2]",
        lambda: [A("a1", "r1", "c1"), A("a2", "r1", "c2"), M("m0"), O("o1", "c1"), O("o2", "c2")],
        {0, 5},
    ),
    (
        "[M,A(r1,c1,think),O1,A(r2,c2),O2,M,A(r3,c3,think),O3] (tool loops)",
        lambda: [
            M("m0"), A("a1", "r1", "c1", think=True), O("o1", "c1"), A("a2", "r2", "c2"),
            O("o2", "c2"), M("m1"), A("a3", "r3", "c3", think=True), O("o3", "c3"),
        ],
        {0, 1, 5, 6, 8},
    ),
    (
        "[M,A(r1,c1,think),O1,A(r2,c2),O2,A(r3,c3),O3,M]",
        lambda: [
            M("m0"), A("a1", "r1", "c1", think=True), O("o1", "c1"), A("a2", "r2", "c2"),
            O("o2", "c2"), A("a3", "r3", "c3"), O("o3", "c3"), M("m1"),
        ],
        {0, 1, 7, 8},
    ),
    (
        "[M,A(r1,c1a,think),A(r1,c1b),O1a,O1b,A(r2,c2),O2,M]",
        lambda: [
            M("m0"), A("a1a", "r1", "c1a", think=True), A("a1b", "r1", "c1b"),
            O("o1a", "c1a"), O("o1b", "c1b"), A("a2", "r2", "c2"), O("o2", "c2"), M("m1"),
        ],
        {0, 1, 7, 8},
    ),
    (
        # Index 3 splits batch r1: the SDK allows it, and a cut there is repaired only by the
        # next rebuild (enforcement then drops a2/o2). We reproduce the SDK's set.
        "[M,A(r1,c1),E(c1),A(r1,c2),O(c2),M] (interleaved error batch)",
        lambda: [
            M("m0"), A("a1", "r1", "c1"), E("e1", "c1"), A("a2", "r1", "c2"), O("o2", "c2"),
            M("m1"),
        ],
        {0, 1, 3, 5, 6},
    ),
    ("[]", lambda: [], {0}),
]


@pytest.mark.parametrize(
    "events, expected", [(ev, exp) for _, ev, exp in INDEX_SETS], ids=[n for n, _, _ in INDEX_SETS]
)
def test_manipulation_index_sets(build, events, expected):
    source = events()
    view = build(events())
    # These views are well formed: nothing is dropped, the view is the list itself.
    assert labels(view) == [e.id for e in source]
    assert view.dropped == []
    assert set(view.manipulation_indices) == expected
    assert isinstance(view.manipulation_indices, ManipulationIndices)
    # The pure function agrees on the raw list.
    assert set(manipulation_indices(source)) == expected


def test_pending_action_index_set(build):
    """``[M, A(r1,c1)]`` (pending action): index 2 is removed, so the set is ``{0, 1}``.

    On the raw list that is the tool-call-matching property at work. Our views are always
    enforced (the SQL view and the cached view alike), so the unanswered action is dropped and
    the view is ``[M]``, whose set is ``{0, 1}`` as well.
    """
    raw = [M("m0"), A("a1", "r1", "c1")]
    assert set(manipulation_indices(raw)) == {0, 1}
    assert set(View(events=raw).manipulation_indices) == {0, 1}
    view = build([M("m0"), A("a1", "r1", "c1")])
    assert labels(view) == ["m0"]
    assert set(view.manipulation_indices) == {0, 1}


# --- SDK §2.5: enforcement vectors ----------------------------------------------------------

ENFORCEMENT: list[tuple[str, Callable[[], list[Event]], list[str], list[str]]] = [
    (
        "batch atomicity drops a2, then tool-call matching drops o1, o2",
        lambda: [
            M("m0"), A("a1", "r1", "c1"), A("a2", "r1", "c2"), O("o1", "c1"), O("o2", "c2"),
            M("m1"), C("k1", forget=["a1"]),
        ],
        ["m0", "m1"],
        ["batch_atomicity", "tool_call_matching"],
    ),
    (
        "tool-loop atomicity drops the rest of the loop",
        lambda: [
            M("m0"), A("a1", "r1", "c1", think=True), O("o1", "c1"), A("a2", "r2", "c2"),
            O("o2", "c2"), M("m1"), C("k1", forget=["a1", "o1"]),
        ],
        ["m0", "m1"],
        ["tool_loop_atomicity"],
    ),
    (
        "observation uniqueness keeps the first result",
        lambda: [M("m0"), A("a1", "r1", "c1"), E("e1", "c1"), O("o1", "c1"), M("m1")],
        ["m0", "a1", "e1", "m1"],
        ["observation_uniqueness"],
    ),
    (
        # The SDK's incremental path would give [m0, a1]; every one of our views is enforced.
        "pending action is dropped",
        lambda: [M("m0"), A("a1", "r1", "c1")],
        ["m0"],
        ["tool_call_matching"],
    ),
    (
        # SDK: condensations apply in order, so k1's summary enters the list, and k2 forgets it
        # by its derived id "k1-summary" before inserting S2 at 1: [m0, k2-summary, m3, m4].
        # Ours (the legacy fold): forgotten = {m1} ∪ {m2} (the store ignores "k1-summary",
        # which names no stored event), and only the NEWEST condensation with a summary and an
        # offset contributes: S2 at 1. Different route, same list: [m0, S2, m3, m4].
        "multi-summary: newest summary wins",
        lambda: [
            M("m0"), M("m1"), M("m2"), M("m3"),
            C("k1", forget=["m1"], summary="S1", offset=1),
            M("m4"),
            C("k2", forget=["k1-summary", "m2"], summary="S2", offset=1),
        ],
        ["m0", "k2-summary", "m3", "m4"],
        [],
    ),
    (
        # Where the two semantics part: k2 does NOT forget k1-summary. The SDK keeps both
        # summaries, [m0, k2-summary, k1-summary, m3, m4]; ours shows only the newest one.
        "multi-summary without forgetting the first: still only the newest summary",
        lambda: [
            M("m0"), M("m1"), M("m2"), M("m3"),
            C("k1", forget=["m1"], summary="S1", offset=1),
            M("m4"),
            C("k2", forget=["m2"], summary="S2", offset=1),
        ],
        ["m0", "k2-summary", "m3", "m4"],
        [],
    ),
]


@pytest.mark.parametrize(
    "events, expected, props",
    [(ev, exp, p) for _, ev, exp, p in ENFORCEMENT],
    ids=[n for n, *_ in ENFORCEMENT],
)
def test_enforcement_vectors(build, events, expected, props):
    view = build(events())
    assert labels(view) == expected
    assert [d.property for d in view.dropped] == props
    # What was dropped plus what was kept is every visible event that was not forgotten.
    assert not any(set(d.ids) & set(expected) for d in view.dropped)


def test_multi_summary_summary_text(build):
    view = build(ENFORCEMENT[4][1]())
    summary = view[1]
    assert isinstance(summary, CondensationSummaryEvent)
    assert summary.summary == "S2"
    assert view.summary_event is summary
    assert view.seqs == [0, None, 3, 5]


def test_view_ids_is_a_deprecated_alias_of_seqs(build):
    view = build(ENFORCEMENT[4][1]())
    with pytest.warns(DeprecationWarning, match="View.seqs"):
        assert view.ids == [0, None, 3, 5]


def test_enforcement_warns(build, caplog):
    with caplog.at_level("WARNING", logger="openhands_memory.view"):
        view = build(ENFORCEMENT[0][1]())
    text = caplog.text
    assert "batch_atomicity dropped 1 event" in text
    assert "tool_call_matching dropped 2 event" in text
    assert [d.ids for d in view.dropped] == [("a2",), ("o1", "o2")]


# --- legacy §7.3: tests/unit/memory/test_view.py (ids = list index) -------------------------


def five() -> list[Event]:
    return [M(f"m{i}") for i in range(5)]


def test_preserves_uncondensed_lists(build):
    view = build(five())
    assert labels(view) == ["m0", "m1", "m2", "m3", "m4"]
    assert view.unhandled_condensation_request is False


def test_forgets_events(build):
    view = build(five() + [C("c", ids=[0, 1, 2, 3, 4])])
    assert labels(view) == []
    assert len(view) == 0


@pytest.mark.parametrize("k", range(5))
def test_keeps_non_forgotten_events(build, k):
    view = build(five() + [C("c", ids=[k])])
    assert labels(view) == [f"m{i}" for i in range(5) if i != k]


@pytest.mark.parametrize("offset", range(5))
def test_inserts_summary(build, offset):
    view = build(five() + [C("c", ids=[], summary="My Summary", offset=offset)])
    assert len(view) == 6
    for i, e in enumerate(view):
        if i < offset:
            assert e.id == f"m{i}"
        elif i == offset:
            assert isinstance(e, CondensationSummaryEvent)
            assert e.summary == "My Summary"
            assert e.id == "c-summary"
        else:
            assert e.id == f"m{i - 1}"


def test_no_condensation_action_in_view(build):
    view = build([M("m0"), M("m1"), C("c", ids=[0]), M("m2"), M("m3")])
    assert labels(view) == ["m1", "m2", "m3"]
    assert not any(isinstance(e, (Condensation, CondensationRequest)) for e in view)


def test_unhandled_request_with_no_condensation(build):
    view = build([M("m0"), M("m1"), Req("q"), M("m2")])
    assert view.unhandled_condensation_request is True
    assert labels(view) == ["m0", "m1", "m2"]


def test_handled_request_with_condensation_action(build):
    view = build([M("m0"), M("m1"), Req("q"), M("m2"), C("c", ids=[0, 1]), M("m3")])
    assert view.unhandled_condensation_request is False
    assert labels(view) == ["m2", "m3"]


def test_multiple_condensation_requests_pattern(build):
    view = build([M("m0"), Req("q1"), M("m1"), C("c", ids=[0]), M("m2"), Req("q2"), M("m3")])
    assert view.unhandled_condensation_request is True
    assert labels(view) == ["m1", "m2", "m3"]


def test_condensation_action_before_request(build):
    view = build([M("m0"), C("c", ids=[]), M("m1"), Req("q"), M("m2")])
    assert view.unhandled_condensation_request is True
    assert labels(view) == ["m0", "m1", "m2"]


def test_no_condensation_events(build):
    view = build([M("m0"), M("m1"), M("m2")])
    assert view.unhandled_condensation_request is False
    assert labels(view) == ["m0", "m1", "m2"]


def test_only_condensation_action(build):
    view = build([M("m0"), M("m1"), C("c", ids=[0]), M("m2")])
    assert view.unhandled_condensation_request is False
    assert labels(view) == ["m1", "m2"]


def test_request_always_removed(build):
    a = build([M("m0"), Req("q"), M("m1")])
    assert a.unhandled_condensation_request is True
    assert labels(a) == ["m0", "m1"]
    b = build([M("m0"), Req("q"), M("m1"), C("c", ids=[]), M("m2")])
    assert b.unhandled_condensation_request is False
    assert labels(b) == ["m0", "m1", "m2"]


# Recommended extra vectors [derived]


def test_summary_persists_when_later_condensation_has_none(build):
    view = build(
        five()
        + [C("k1", ids=[1], summary="S1", offset=1), M("m5"), C("k2", ids=[3])]  # k2: no summary
    )
    assert labels(view) == ["m0", "k1-summary", "m2", "m4", "m5"]
    assert view[1].summary == "S1"


def test_summary_persists_with_summary_but_no_offset(build):
    # Only a condensation with BOTH summary and offset replaces the summary shown.
    view = build(five() + [C("k1", ids=[0], summary="S1", offset=0), C("k2", ids=[1], summary="S2")])
    assert labels(view) == ["k1-summary", "m2", "m3", "m4"]
    assert view[0].summary == "S1"


def test_range_form(build):
    view = build(five() + [C("c", ranges=[(1, 3)])])
    assert labels(view) == ["m0", "m4"]


def test_reversed_range_forgets_nothing(build):
    view = build(five() + [C("c", ranges=[(3, 1)])])
    assert labels(view) == ["m0", "m1", "m2", "m3", "m4"]


@pytest.mark.parametrize("offset", [5, 6, 100])
def test_offset_past_the_end_appends(build, offset):
    view = build(five() + [C("c", ids=[0], summary="S", offset=offset)])
    assert labels(view) == ["m1", "m2", "m3", "m4", "c-summary"]


def test_sdk_and_legacy_forget_forms_agree(build):
    view = build(five() + [C("c", forget=["m1", "m2"], ids=[3])])
    assert labels(view) == ["m0", "m4"]


# --- find_next -----------------------------------------------------------------------------


def test_find_next_past_the_end_is_none(build):
    view = build([M("m0"), A("a1", "r1", "c1"), O("o1", "c1"), M("m1")])
    assert view.find_next(0) == 0
    assert view.find_next(2) == 3
    assert view.find_next(4) == 4
    assert view.find_next(5) is None
    assert view.find_next(100) is None


def test_find_next_on_a_pending_action_is_none():
    # The unenforced list (what a condenser could be handed as a rewritten view).
    view = View(events=[M("m0"), A("a1", "r1", "c1")])
    assert view.find_next(1) == 1
    assert view.find_next(2) is None  # len(view) is not an index: a call awaits its result


def test_find_next_inside_a_pair_skips_to_its_end(build):
    view = build([M("m0"), A("a1", "r1", "c1"), A("a2", "r1", "c2"), M("m1"), O("o1", "c1"), O("o2", "c2")])
    assert view.find_next(2) == 6
    assert view.find_next(7) is None


def test_empty_view_find_next(build):
    view = build([])
    assert view.find_next(0) == 0
    assert view.find_next(1) is None


# --- view(at=N) ---------------------------------------------------------------------------


def history_with_condensations() -> list[Event]:
    return [
        f.system().model_copy(update={"id": "sys"}),
        M("m0"),
        A("a1", "r1", "c1", think=True), A("a2", "r1", "c2"), O("o1", "c1"), E("e2", "c2"),
        A("a3", "r2", "c3"), X("x3", "c3"),
        M("m1"),
        Req("q1"),
        C("k1", ranges=[(2, 5)], summary="S1", offset=1),
        A("a4", "r3", "c4"), E("e4", "c4"), A("a5", "r3", "c5"), O("o5", "c5"),
        O("o4", "c4"),  # late duplicate result
        M("m2"),
        C("k2", forget=["m0", "k1-summary"]),  # no summary: S1 persists
        A("a6", "r4", "c6", think=True),  # pending for a while
        Req("q2"),
        O("o6", "c6"),
        C("k3", ranges=[(11, 12)], summary="S3", offset=3),  # splits batch r3
        M("m3"),
        A("a7", "r5", "c7"),
    ]


def test_view_at_every_n_equals_the_fold_of_the_prefix(shared_store):
    events = history_with_condensations()
    conv = shared_store.create_conversation(str(uuid.uuid4()))
    conv.append_many(events)
    stored = list(conv.events())
    assert len(stored) == len(events)
    for n in range(len(events)):
        expected = View.from_events(events[: n + 1])
        got = conv.view(at=n)
        assert labels(got) == labels(expected), n
        assert [type(e) for e in got] == [type(e) for e in expected], n
        assert got.seqs == expected.seqs, n
        assert got.unhandled_condensation_request == expected.unhandled_condensation_request, n
        assert got.upto == n
        assert [d.property for d in got.dropped] == [d.property for d in expected.dropped], n
        # and from the events as read back from the file
        again = View.from_events(stored[: n + 1])
        assert labels(again) == labels(expected), n
    assert labels(conv.view()) == labels(conv.view(at=len(events) - 1))
    assert labels(conv.view(at=10_000)) == labels(conv.view())


def test_view_at_spot_checks(shared_store):
    events = history_with_condensations()
    conv = shared_store.create_conversation(str(uuid.uuid4()))
    conv.append_many(events)
    # right after k1: a1..e2 forgotten; S1 at 1; request handled
    # a1 (thinking) opens a tool loop that runs through a3/x3 (no other event between), so
    # forgetting a1..e2 breaks the loop and tool-loop atomicity drops a3 and x3 too.
    v = conv.view(at=10)
    assert labels(v) == ["sys", "k1-summary", "m0", "m1"]
    assert [d.property for d in v.dropped] == ["tool_loop_atomicity"]
    assert v.unhandled_condensation_request is False
    # right after q1: the request is unhandled
    assert conv.view(at=9).unhandled_condensation_request is True
    # right after k2: m0 forgotten, S1 persists; e4 came first, so the late o4 is dropped
    v = conv.view(at=17)
    assert labels(v) == ["sys", "k1-summary", "m1", "a4", "e4", "a5", "o5", "m2"]
    assert [d.property for d in v.dropped] == ["observation_uniqueness", "tool_loop_atomicity"]
    # right after a6: the pending action is dropped
    assert "a6" not in labels(conv.view(at=18))
    # right after k3: batch r3 split (a4, e4 forgotten) -> a5 dropped, then o5 and o4; S3 is
    # inserted at 3 before enforcement, which then removes a3/x3 (broken loop) ahead of it.
    # a6 (thinking) is a loop of its own: q2 ends it before o6 arrives.
    v = conv.view(at=21)
    assert labels(v) == ["sys", "k3-summary", "m1", "m2", "a6", "o6"]
    assert [d.property for d in v.dropped] == [
        "batch_atomicity", "tool_call_matching", "tool_loop_atomicity"
    ]
    assert v.unhandled_condensation_request is False
    assert labels(v) == labels(View.from_events(events[:22]))


# --- list-like access -----------------------------------------------------------------------


def test_list_like_access(build):
    events = [
        f.system().model_copy(update={"id": "sys"}), M("m0"), M("m1"), A("a1", "r1", "c1"),
        O("o1", "c1"), M("m2"), C("k", ids=[1], summary="S", offset=1), M("m3"),
    ]
    view = build(events)
    assert len(view) == 7
    assert labels(view) == ["sys", "k-summary", "m1", "a1", "o1", "m2", "m3"]
    assert view[0].id == "sys"
    assert view[-1].id == "m3"
    assert isinstance(view[1], CondensationSummaryEvent)
    assert isinstance(view[3], ActionEvent)
    assert [e.id for e in view[2:4]] == ["m1", "a1"]
    assert [e.id for e in view[::3]] == ["sys", "a1", "m3"]
    assert [e.id for e in view[-2:]] == ["m2", "m3"]
    assert [e.id for e in view[5:100]] == ["m2", "m3"]
    assert isinstance(view[1:3], list)
    assert [e.id for e in iter(view)] == labels(view)
    assert list(view) == view.events
    assert view.seqs == [0, None, 2, 3, 4, 5, 7]
    with pytest.raises(IndexError):
        view[7]


def test_build_modes_agree_on_all_vectors(shared_store):
    """Belt and braces: every vector above gives the same view in the three build modes."""
    cases = [ev for _, ev, _ in INDEX_SETS] + [ev for _, ev, _, _ in ENFORCEMENT]
    cases.append(history_with_condensations)
    for make in cases:
        mem = View.from_events(make())
        conv = shared_store.create_conversation(str(uuid.uuid4()))
        conv.append_many(make())
        sql = conv.view()
        assert labels(sql) == labels(mem)
        assert sql.seqs == mem.seqs
        assert sql.unhandled_condensation_request == mem.unhandled_condensation_request
        for a, b in itertools.zip_longest(sql, mem):
            assert a.to_json_dict() | {"timestamp": None} == b.to_json_dict() | {"timestamp": None}
