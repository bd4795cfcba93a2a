"""History trees: on any branch, the view is the SDK's fold over ``path_to_root(leaf)``.

The OpenHands SDK keeps a conversation as a tree (``parent_id``, HEAD, ``navigate_to``) and
shows the agent ``View.from_events(path_to_root(leaf))``. These tests drive a conversation
through random appends, navigations (to any event, or to an empty HEAD), state updates (which
are not tree nodes), condensation requests and condensations (made from the branch's own
view), and check after every step, on both backends, that:

* ``conv.view()`` equals the in-memory fold over the path a model of the SDK's tree gives
  (each event's parent is the leaf when it was appended; a node becomes the leaf);
* ``conv.view(at=N)`` equals the fold over the path from N, for an N on another branch too;
* a fresh store (nothing cached) gives the same view as the one that wrote;
* ``doctor --full`` finds nothing wrong (the hidden runs replay per path).
"""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openhands_memory.condensers import AmortizedForgettingCondenser, LLMSummarizingCondenser
from openhands_memory.conversation import EventStore
from openhands_memory.errors import NoCondensationAvailable
from openhands_memory.events import ConversationStateUpdateEvent, Event
from openhands_memory.inspection import doctor
from openhands_memory.storage import tree
from openhands_memory.view import View

from . import factories as f


class SdkTree:
    """The SDK's tree, kept beside the store: parents by seq, the leaf, the events.

    The events appended here name no parent, so each follows the previous event (the SDK's
    rule for an event without ``parent_id``) unless HEAD was moved: then it follows HEAD,
    and the first node appended there becomes HEAD (a state update never does)."""

    def __init__(self) -> None:
        self.parent: dict[int, int | None] = {}
        self.events: dict[int, Event] = {}
        self.leaf: int | None = None
        self.moved = False  # HEAD was moved and no node appended since

    def appended(self, seqs: list[int], events: list[Event]) -> None:
        for seq, e in zip(seqs, events):
            self.parent[seq] = self.leaf if self.moved else (seq - 1 if seq > 0 else None)
            self.events[seq] = e.model_copy().with_seq(seq)
            if not isinstance(e, ConversationStateUpdateEvent):
                self.leaf, self.moved = seq, False

    def navigate(self, to: int | None) -> None:
        self.leaf, self.moved = to, True

    def path(self, leaf: int | None) -> list[Event]:
        out = []
        while leaf is not None:
            out.append(self.events[leaf])
            leaf = self.parent[leaf]
        return out[::-1]


def shown(view: View) -> list[tuple[int | None, str]]:
    return [(e.seq, e.id if e.seq is not None else getattr(e, "summary", None) or e.text)  # type: ignore[attr-defined]
            for e in view.events]


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("pair"), st.integers(1, 3)),
        st.tuples(st.just("user"), st.just(0)),
        st.tuples(st.just("state"), st.just(0)),
        st.tuples(st.just("navigate"), st.integers(-1, 1000)),
        st.tuples(st.just("request"), st.just(0)),
        st.tuples(st.just("condense"), st.integers(0, 1)),
        st.tuples(st.just("pin"), st.integers(0, 1000)),
    ),
    min_size=5,
    max_size=40,
)


def run(url: str, cid: str, ops: list[tuple[str, int]]) -> None:
    strategies = [AmortizedForgettingCondenser(max_size=8, keep_first=2), LLMSummarizingCondenser(max_size=8, keep_first=2)]
    model = SdkTree()
    with EventStore(url) as store:
        conv = store.create_conversation(cid)
        first = [f.system(), f.user("task")]
        model.appended(conv.append_many(first), first)
        calls = 0
        for op, arg in ops:
            if op == "pair":  # a thinking tool loop of ``arg`` calls, one call a response
                events: list[Event] = []
                for k in range(arg):
                    calls += 1
                    events += [f.action(f"r{calls}", f"c{calls}", think=k == 0), f.observation(f"c{calls}")]
                model.appended(conv.append_many(events), events)
            elif op == "user":
                e = f.user(f"more {len(model.events)}")
                model.appended([conv.append(e)], [e])
            elif op == "state":
                e = ConversationStateUpdateEvent(key="execution_status", value="running")
                model.appended([conv.append(e)], [e])
            elif op == "request":
                e = conv.get(conv.request_condensation())
                model.appended([e.seq], [e])  # type: ignore[list-item]
            elif op == "pin":  # keep or reinject one of the events shown on this branch
                stored = [e.seq for e in conv.view().events if e.seq is not None]
                if not stored:
                    continue
                seq = conv.pin(stored[arg % len(stored)], "keep" if arg % 2 else "reinject")
                model.appended([seq], [conv.get(seq)])
            elif op == "navigate":
                to = None if arg < 0 else arg % len(model.events)
                conv.navigate(to)
                model.navigate(to)
            else:
                try:
                    done = conv.condense(strategies[arg])
                except NoCondensationAvailable:  # a request with no cut on this branch: refused
                    continue
                if done.stored_as is not None:
                    model.appended([done.stored_as], [conv.get(done.stored_as)])
            assert conv.head == model.leaf
            want = View.from_events(model.path(model.leaf))
            assert shown(conv.view()) == shown(want), (op, arg)
            with store.reading() as db:  # what stats and history count as shown
                assert tree.visible_now(db, cid) == conv.view().intervals
            other = (arg * 7 + 3) % len(model.events)
            assert shown(conv.view(at=other)) == shown(View.from_events(model.path(other))), ("at", other)
        with EventStore(url) as fresh:
            assert shown(fresh.conversation(cid).view()) == shown(View.from_events(model.path(model.leaf)))
        report = doctor.check(store, full=True)
        assert report.healthy, report.problems


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_every_branch_shows_the_sdk_fold_over_its_path(database_url, ops):
    run(database_url, str(uuid.uuid4()), ops)


def test_a_branch_never_shows_a_siblings_summary_or_what_only_the_sibling_forgot(database_url):
    with EventStore(database_url) as store:
        conv = store.create_conversation("t")
        conv.append_many([f.system(), f.user("task")])
        for i in range(6):
            conv.append_many([f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}")])
        fork_point = 7
        summarizer = LLMSummarizingCondenser(max_size=8, keep_first=2)
        done = conv.condense(summarizer)
        assert done.stored_as is not None and conv.view().summary_event is not None
        conv.navigate(fork_point)
        branch = conv.view()
        assert branch.summary_event is None
        assert branch.seqs == list(range(fork_point + 1))
        conv.append(f.user("try another way"))
        assert conv.view().seqs == [*range(fork_point + 1), done.stored_as + 1]
        assert [b.leaf for b in conv.branches()] == [done.stored_as, done.stored_as + 1]
        assert [b.head for b in conv.branches()] == [False, True]
        # the other branch still shows its summary
        assert conv.view(at=done.stored_as).summary_event is not None
        # history marks what HEAD's path hides: nothing here; the sibling's forgotten events
        # off the path keep their condensation
        from openhands_memory.inspection.history import history

        rows = {r.id: r.forgotten_by for r in history(store, "t")}
        assert all(rows[seq] is None for seq in range(fork_point + 1))
        assert any(rows[seq] == done.stored_as for seq in range(fork_point + 1, done.stored_as))


def test_appends_after_a_navigate_follow_head_and_keep_ids_gap_free(database_url):
    with EventStore(database_url) as store:
        conv = store.create_conversation("t")
        conv.append_many([f.system(), f.user("a"), f.user("b"), f.user("c")])
        conv.navigate(1)
        assert conv.append(f.user("d")) == 4
        assert conv.head == 4
        assert conv.view().seqs == [0, 1, 4]
        conv.navigate(None)
        assert conv.head is None and conv.view().seqs == []
        conv.append(f.user("new root"))
        assert conv.view().seqs == [5]
        assert [e.seq for e in conv.events()] == [0, 1, 2, 3, 4, 5]
        assert sorted(b.leaf for b in conv.branches()) == [3, 4, 5]


def test_a_fork_copies_the_path_renumbered_and_the_source_is_unchanged(database_url):
    with EventStore(database_url) as store:
        conv = store.create_conversation("src")
        conv.append_many([f.system(), f.user("task")])
        for i in range(6):
            conv.append_many([f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}")])
        conv.condense(AmortizedForgettingCondenser(max_size=8, keep_first=2))
        conv.navigate(9)
        conv.append_many([f.action("rx", "cx"), f.observation("cx")])
        source_view = shown(conv.view())
        before = [e.to_json() for e in conv.events()]
        fork = conv.fork(conversation_id="copy")
        assert [e.id for e in fork.view().events] == [e.id for e in conv.view().events]
        assert len(fork) == sum(e - s + 1 for s, e in conv.view().path)
        assert fork.metadata["forked_from"] == {"conversation": "src", "event": conv.head}
        assert [e.to_json() for e in conv.events()] == before and shown(conv.view()) == source_view
        assert doctor.check(store, full=True).healthy


def test_navigating_to_an_unknown_event_changes_nothing(database_url):
    import pytest

    from openhands_memory.errors import EventNotFound

    with EventStore(database_url) as store:
        conv = store.create_conversation("t")
        conv.append_many([f.system(), f.user("a")])
        with pytest.raises(EventNotFound):
            conv.navigate(2)
        assert conv.head == 1 and conv.view().seqs == [0, 1]


def test_a_view_with_a_hundred_branches_on_its_path_is_a_few_statements(tmp_path):
    """A path is found by one statement, whatever the branches on it; a view on a branch costs
    two statements more than a linear one (its condensations, its hidden runs)."""
    path = tmp_path / "tree.db"
    with EventStore(path) as store:
        conv = store.create_conversation("t")
        conv.append_many([f.system(), f.user("task")])
        for i in range(100):  # each step abandons one event: 100 branch points on HEAD's path
            conv.append(f.user(f"abandoned {i}"))
            conv.navigate(len(conv) - 2)
            conv.append_many([f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}")])
        conv.condense(AmortizedForgettingCondenser(max_size=60, keep_first=2))
    with EventStore(path) as store:
        statements: list[str] = []
        store.recorder.conn.set_trace_callback(statements.append)  # type: ignore[attr-defined]
        view = store.conversation("t").view()
        store.recorder.conn.set_trace_callback(None)  # type: ignore[attr-defined]
    assert view.path is not None and len(view.path) == 101
    counted = [s for s in statements if not s.lstrip().upper().startswith(("BEGIN", "COMMIT", "ROLLBACK", "PRAGMA"))]
    assert len(counted) <= 12, counted


def test_doctor_names_a_parent_that_does_not_precede_its_event(tmp_path):
    import sqlite3

    path = tmp_path / "m.db"
    with EventStore(path) as store:
        conv = store.create_conversation("t")
        conv.append_many([f.system(), f.user("a"), f.user("b")])
        assert doctor.check(store, full=True).healthy
    with sqlite3.connect(path) as db:  # a hand edit: a loop the library never writes
        db.execute("UPDATE event SET parent_seq = 2 WHERE conversation_id = 't' AND id = 1")
    with EventStore(path) as store:
        report = doctor.check(store)
        assert [p.check for p in report.problems] == ["tree"]
        assert "events 1 name a parent that does not precede them" in report.problems[0].detail


def test_jsonl_export_keeps_the_tree(tmp_path):
    import io

    from openhands_memory.io.importer import import_path
    from openhands_memory.io.jsonl import write_jsonl

    with EventStore(tmp_path / "one.db") as one:
        conv = one.create_conversation("c")
        conv.append_many([f.system(), f.user("a"), f.user("b")])
        conv.navigate(1)
        conv.append(f.user("c"))
        conv.navigate(None)
        conv.append(f.user("new root"))
        conv.navigate(3)
        text = io.StringIO()
        write_jsonl(conv, text)
        (tmp_path / "c.jsonl").write_text(text.getvalue())
        want = {n: conv.view(at=n).seqs for n in range(5)}
    with EventStore(tmp_path / "two.db") as two:
        import_path(two, tmp_path / "c.jsonl")
        back = two.conversation("c")
        assert {n: back.view(at=n).seqs for n in range(5)} == want


def test_an_event_naming_the_node_before_state_updates_continues_its_branch(tmp_path):
    """State updates the SDK never makes HEAD: an event that names the node before them
    continues that node's branch (they are detached, not a branch point); one that names an
    earlier event after a node came in between starts a branch."""
    from openhands_memory.events import MessageEvent

    def naming(parent: Event, text: str) -> Event:
        return MessageEvent.model_validate({**f.user(text).model_dump(), "parent_id": parent.id})

    with EventStore(tmp_path / "m.db") as store:
        conv = store.create_conversation("t")
        conv.append_many([f.system(), f.user("a")])
        conv.append_many([ConversationStateUpdateEvent(key="k", value=i) for i in range(3)])  # 2..4
        conv.append(naming(conv.get(1), "b"))  # 5: follows 1 across 2..4
        with store.reading() as db:
            assert db.path("t") == [(0, 5)] and db.jumps("t") == []
            assert sorted(r[0] for r in db.all("SELECT id FROM event WHERE conversation_id = 't' AND detached")) == [2, 3, 4]
        conv.append_many([f.user("c"), naming(conv.get(5), "d")])  # 6, then 7 names 5 past 6
        with store.reading() as db:
            assert db.path("t") == [(0, 5), (7, 7)]
        assert conv.view().seqs == [0, 1, 5, 7]
