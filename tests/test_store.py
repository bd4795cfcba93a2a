"""EventStore: conversations, gap-free ids, atomic batches, paging, condensation bookkeeping,
SQLite settings, and two processes appending to one conversation at once."""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import time
import uuid

import pytest

from openhands_memory.errors import (
    ConversationExists,
    ConversationNotFound,
    DuplicateEventId,
    EventNotFound,
    MalformedEvent,
)
from openhands_memory.events import Condensation, CondensationNote, MessageEvent, PauseEvent
from openhands_memory.storage import IntegrityViolation, hidden
from openhands_memory.storage.sqlite import SqliteSession
from openhands_memory.conversation import EventStore

from . import factories as f


def count_rows(store: EventStore, table: str, conversation_id: str | None = None) -> int:
    sql = f"SELECT COUNT(*) FROM {table}"
    if conversation_id is None:
        return store.db.execute(sql).fetchone()[0]
    return store.db.execute(sql + " WHERE conversation_id = ?", (conversation_id,)).fetchone()[0]


def all_ids(store: EventStore, conversation_id: str) -> list[int]:
    return [r[0] for r in store.db.execute(
        "SELECT id FROM event WHERE conversation_id = ? ORDER BY id", (conversation_id,))]


def ranges_of(store: EventStore, conversation_id: str, condensation_id: int) -> list[tuple[int, int]]:
    return [tuple(r) for r in store.db.execute(
        "SELECT start_id, end_id FROM forgotten_range WHERE conversation_id = ? AND condensation_id = ? "
        "ORDER BY start_id", (conversation_id, condensation_id))]


def said(uid: str) -> MessageEvent:
    """A user message with a given external id."""
    return f.user().model_copy(update={"id": uid})


def hidden_of(store: EventStore, conversation_id: str, condensation_id: int) -> list[tuple[int, int]]:
    """The runs hidden right after condensation ``condensation_id``."""
    return hidden.at(SqliteSession(store.db), conversation_id, condensation_id)


# --- conversations ------------------------------------------------------------------------


def test_create_with_given_id(store):
    conv = store.create_conversation("alpha", metadata={"task": "fix bug", "n": 3})
    assert conv.id == "alpha"
    assert "alpha" in store
    assert store.has_conversation("alpha")
    assert store.conversation("alpha").metadata == {"task": "fix bug", "n": 3}
    assert conv.metadata == {"task": "fix bug", "n": 3}


def test_create_with_generated_id(store):
    a = store.create_conversation()
    b = store.create_conversation()
    assert a.id != b.id
    uuid.UUID(a.id)  # a UUID string
    assert {c.id for c in store.conversations()} == {a.id, b.id}
    assert a.metadata == {}


def test_create_twice_is_refused(store):
    store.create_conversation("dup", metadata={"first": True})
    with pytest.raises(ConversationExists, match="dup"):
        store.create_conversation("dup", metadata={"first": False})
    assert store.conversation("dup").metadata == {"first": True}
    assert count_rows(store, "conversation") == 1


def test_list_conversations(store):
    for cid in ("c", "a", "b"):
        store.create_conversation(cid, metadata={"name": cid})
    infos = store.conversations()
    assert sorted(i.id for i in infos) == ["a", "b", "c"]
    assert [i.id for i in infos] == ["c", "a", "b"]  # creation order
    for info in infos:
        assert info.metadata == {"name": info.id}
        assert info.created_at.endswith("+00:00")


def test_unknown_conversation(store):
    with pytest.raises(ConversationNotFound, match="ghost"):
        store.conversation("ghost")
    with pytest.raises(ConversationNotFound, match="ghost"):
        store.delete_conversation("ghost")
    assert "ghost" not in store
    assert 42 not in store


def test_delete_removes_everything(store):
    keep = store.create_conversation("keep")
    keep.append(f.user())
    conv = store.create_conversation("gone")
    conv.append_many([f.user(), f.action("r", "c1"), f.observation("c1")])
    conv.append(f.condensation(ranges=[(0, 1)], summary="s", offset=0))
    store.delete_conversation("gone")
    assert "gone" not in store
    for table in ("event", "condensation", "forgotten_range"):
        assert count_rows(store, table, "gone") == 0
    assert count_rows(store, "event", "keep") == 1
    with pytest.raises(ConversationNotFound):
        store.conversation("gone")
    with pytest.raises(ConversationNotFound):
        store.delete_conversation("gone")


def test_append_to_deleted_conversation_writes_nothing(store):
    conv = store.create_conversation("gone")
    conv.append(f.user())
    store.delete_conversation("gone")
    before = count_rows(store, "event")
    with pytest.raises(ConversationNotFound, match="gone"):
        conv.append(f.user())
    with pytest.raises(ConversationNotFound):
        conv.append_many([f.user(), f.agent_says()])
    with pytest.raises(ConversationNotFound):
        conv.append(f.condensation(ranges=[(0, 0)]))
    assert count_rows(store, "event") == before
    assert count_rows(store, "event", "gone") == 0
    assert count_rows(store, "conversation") == 0
    with pytest.raises(ConversationNotFound):
        conv.metadata


# --- appending ----------------------------------------------------------------------------


def test_append_returns_gap_free_ids(conv):
    assert [conv.append(f.user(str(i))) for i in range(5)] == [0, 1, 2, 3, 4]
    assert conv.append_many([f.user("a"), f.user("b")]) == [5, 6]
    assert conv.append_many([]) == []
    assert conv.append(f.user("c")) == 7
    assert len(conv) == 8


def test_append_sets_seq_on_the_event(conv):
    e = f.user()
    assert e.seq is None
    conv.append(e)
    assert e.seq == 0


def test_ids_are_per_conversation(store):
    a = store.create_conversation("a")
    b = store.create_conversation("b")
    assert a.append(f.user()) == 0
    assert b.append(f.user()) == 0
    assert a.append(f.user()) == 1
    assert len(a) == 2 and len(b) == 1


def test_same_external_id_in_two_conversations_is_fine(store):
    a = store.create_conversation("a")
    b = store.create_conversation("b")
    e = PauseEvent(id="shared")
    a.append(e)
    b.append(PauseEvent(id="shared"))
    assert a.get(0).id == b.get(0).id == "shared"


def test_append_rejects_non_events(conv):
    with pytest.raises(MalformedEvent):
        conv.append_many([f.user(), {"kind": "PauseEvent"}])  # type: ignore[list-item]
    assert len(conv) == 0


def test_duplicate_inside_batch_stores_nothing(store, conv):
    conv.append_many([f.user("first"), f.user("second")])
    batch = [PauseEvent(id="p-1"), f.user("x"), PauseEvent(id="p-2"), PauseEvent(id="p-1")]
    with pytest.raises(DuplicateEventId, match="p-1") as info:
        conv.append_many(batch)
    assert info.value.uid == "p-1"
    assert len(conv) == 2
    assert count_rows(store, "event", conv.id) == 2
    # ids stay gap-free afterwards
    assert conv.append(PauseEvent(id="p-1")) == 2
    assert all_ids(store, conv.id) == [0, 1, 2]


def test_duplicate_against_stored_stores_nothing(store, conv):
    conv.append(PauseEvent(id="already"))
    batch = [f.user("a"), f.user("b"), PauseEvent(id="already"), f.user("c")]
    with pytest.raises(DuplicateEventId, match="already") as info:
        conv.append_many(batch)
    assert info.value.uid == "already"
    assert len(conv) == 1
    with pytest.raises(DuplicateEventId, match="already"):
        conv.append(PauseEvent(id="already"))
    assert conv.append_many([f.user("a"), f.user("b")]) == [1, 2]
    assert all_ids(store, conv.id) == [0, 1, 2]


def test_duplicate_condensation_batch_leaves_no_condensation_rows(store, conv):
    conv.append_many([f.user(), f.user(), PauseEvent(id="x")])
    batch = [f.condensation(ranges=[(0, 1)], summary="s", offset=0), PauseEvent(id="x")]
    with pytest.raises(DuplicateEventId):
        conv.append_many(batch)
    assert count_rows(store, "condensation") == 0
    assert count_rows(store, "forgotten_range") == 0
    assert len(conv) == 3


# --- reading ------------------------------------------------------------------------------


def test_get(conv):
    events = [f.system(), f.user("task"), f.action("r1", "c1", thought="look"), f.observation("c1")]
    conv.append_many(events)
    for i, e in enumerate(events):
        back = conv.get(i)
        assert back.seq == i
        assert back.to_json_dict() == e.to_json_dict()
        assert conv[i] == e
    with pytest.raises(EventNotFound):
        conv.get(4)
    with pytest.raises(EventNotFound):
        conv.get(-1)


def test_len_of_empty_conversation(conv):
    assert len(conv) == 0
    assert list(conv.events()) == []
    assert list(conv) == []


def _mixed(n: int) -> list:
    out = []
    for i in range(n):
        if i % 3 == 0:
            out.append(f.user(f"u{i}"))
        elif i % 3 == 1:
            out.append(f.action(f"r{i}", f"c{i}"))
        else:
            out.append(f.observation(f"c{i - 1}"))
    return out


def test_events_paging(conv):
    events = _mixed(50)
    conv.append_many(events)
    got = list(conv.events(page=7))
    assert [e.seq for e in got] == list(range(50))
    assert [e.id for e in got] == [e.id for e in events]
    # windows that start and stop inside and on page boundaries
    for start, stop in [(0, 7), (0, 14), (3, 30), (7, 8), (13, 50), (49, 50), (10, 10), (20, 5), (45, 999)]:
        got = [e.seq for e in conv.events(start, stop, page=7)]
        assert got == list(range(start, min(stop, 50))), (start, stop)
    assert [e.seq for e in conv.events(44, page=7)] == list(range(44, 50))


def test_events_by_kind_across_pages(conv):
    conv.append_many(_mixed(60))
    actions = list(conv.events(kinds=["ActionEvent"], page=7))
    assert [e.seq for e in actions] == list(range(1, 60, 3))
    assert all(e.kind == "ActionEvent" for e in actions)
    both = [e.seq for e in conv.events(5, 40, kinds={"ActionEvent", "ObservationEvent"}, page=7)]
    assert both == [i for i in range(5, 40) if i % 3 != 0]
    assert list(conv.events(kinds=["PauseEvent"], page=7)) == []
    assert list(conv.events(kinds=[], page=7)) == []


def test_events_is_lazy(conv):
    conv.append_many(_mixed(30))
    it = conv.events(page=7)
    first = [next(it) for _ in range(3)]
    assert [e.seq for e in first] == [0, 1, 2]
    # appends made while iterating are seen by later pages: each page is its own read
    conv.append(f.user("late"))
    assert [e.seq for e in it][-1] == 30


def test_reopen_keeps_everything(db_path):
    with EventStore(db_path) as store:
        conv = store.create_conversation("c", metadata={"k": [1, 2]})
        events = _mixed(20) + [f.condensation(ranges=[(2, 5)], summary="s", offset=1)]
        conv.append_many(events)
        store.create_conversation("other")
    with EventStore(db_path) as store:
        assert sorted(c.id for c in store.conversations()) == ["c", "other"]
        conv = store.conversation("c")
        assert conv.metadata == {"k": [1, 2]}
        assert len(conv) == 21
        assert [e.to_json_dict() for e in conv.events()] == [e.to_json_dict() for e in events]
        assert ranges_of(store, "c", 20) == [(2, 5)]
        assert conv.append(f.user()) == 21


def test_reopen_without_create(tmp_path):
    with pytest.raises(FileNotFoundError):
        EventStore(tmp_path / "missing.db", create=False)
    assert not (tmp_path / "missing.db").exists()


# --- SQLite settings ----------------------------------------------------------------------


def test_sqlite_settings_in_force(store):
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert store.db.execute("PRAGMA busy_timeout").fetchone()[0] > 0
    assert store.db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    # the file itself is in WAL mode: a plain connection sees it
    plain = sqlite3.connect(store.location.path)
    try:
        assert plain.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        plain.close()


def test_full_durability(db_path):
    with EventStore(db_path, durability="full") as store:
        assert store.db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_foreign_keys_enforced(store):
    with pytest.raises(IntegrityViolation):
        with store.writing() as db:
            db.execute(
                "INSERT INTO event (conversation_id, id, kind, source, timestamp, has_thinking, "
                "llm_visible, payload) VALUES ('nobody', 0, 'PauseEvent', 'user', 't', 0, 0, '{}')")
    assert count_rows(store, "event") == 0


# --- condensations ------------------------------------------------------------------------


def test_forgotten_event_ids_become_maximal_runs(store, conv):
    events = [said(f"e{i}") for i in range(12)]
    conv.append_many(events)
    forget = ["e1", "e2", "e3", "e5", "e7", "e8", "e11", "e0-summary", "never-stored"]
    cond = Condensation(id="cond", forgotten_event_ids=forget, summary="s", summary_offset=1)
    seq = conv.append(cond)
    assert seq == 12
    assert ranges_of(store, conv.id, seq) == [(1, 3), (5, 5), (7, 8), (11, 11)]
    assert hidden_of(store, conv.id, seq) == [(1, 3), (5, 5), (7, 8), (11, 11)]
    row = store.db.execute(
        "SELECT summary, summary_offset FROM condensation WHERE conversation_id = ? AND id = ?",
        (conv.id, seq)).fetchone()
    assert row == ("s", 1)
    back = conv.get(seq)
    assert back.forgotten_event_ids == forget  # the event itself is stored as given


def test_forgotten_ids_and_ranges_together(store, conv):
    conv.append_many([PauseEvent(id=f"e{i}") for i in range(10)])
    seq = conv.append(Condensation(forgotten_event_ids=["e4", "e6"], forgotten_ranges=[(0, 2), (5, 5)]))
    assert ranges_of(store, conv.id, seq) == [(0, 2), (4, 6)]


def test_condensation_with_only_unknown_ids(store, conv):
    conv.append_many([f.user(), f.user()])
    seq = conv.append(Condensation(id="c2", forgotten_event_ids=["c1-summary"]))
    assert ranges_of(store, conv.id, seq) == []
    assert hidden_of(store, conv.id, seq) == []


def test_hidden_runs_bridge_rows_the_model_never_sees(store, conv):
    """Forgotten runs separated only by invisible rows (Condensations, pauses) are one run;
    a visible row between them keeps them apart."""
    conv.append_many([said(f"u{i}") for i in range(4)] + [PauseEvent(id="p4")]
                     + [said(f"u{i}") for i in range(5, 8)])
    first = conv.append(Condensation(id="c1", forgotten_event_ids=["u1", "u2", "u3"]))  # 8
    assert hidden_of(store, conv.id, first) == [(1, 3)]
    conv.append_many([said("u9"), said("u10")])
    second = conv.append(Condensation(id="c2", forgotten_event_ids=["u5", "u6", "u7", "u9"]))
    # 4 is a pause and 8 the first Condensation: both bridged; 10 is visible and stays.
    assert ranges_of(store, conv.id, second) == [(5, 7), (9, 9)]
    assert hidden_of(store, conv.id, second) == [(1, 9)]
    assert hidden_of(store, conv.id, first) == [(1, 3)]  # the past is kept
    assert [e.seq for e in conv.view()] == [0, 10]


def test_hidden_bookkeeping_grows_with_changes_not_condensations_squared(store, conv):
    """Each condensation writes only the runs it changes, never the union so far."""
    for k in range(30):
        conv.append_many([said(f"a{k}"), said(f"b{k}")])
        conv.append(Condensation(id=f"c{k}", forgotten_event_ids=[f"a{k}"]))
    rows = store.db.execute("SELECT COUNT(*) FROM hidden_run").fetchone()[0]
    live = hidden.live(SqliteSession(store.db), conv.id)
    assert len(live) == 30  # each b{k} is visible and keeps the runs apart
    assert rows == 30  # one new run per condensation, none rewritten


def test_condensation_cannot_forget_itself_or_later_events(store, conv):
    conv.append_many([PauseEvent(id=f"e{i}") for i in range(3)])
    later = PauseEvent(id="later")
    cond = Condensation(forgotten_event_ids=["e0", "later"])
    seqs = conv.append_many([cond, later])
    assert ranges_of(store, conv.id, seqs[0]) == [(0, 0)]


@pytest.mark.parametrize("bad", [[(0, 5)], [(-1, 2)], [(3, 3)], [(1, 2), (2, 99)]])
def test_forgotten_ranges_out_of_bounds(store, conv, bad):
    conv.append_many([f.user() for _ in range(3)])
    with pytest.raises(MalformedEvent, match="forgotten_ranges"):
        conv.append(Condensation(forgotten_ranges=bad, summary="s", summary_offset=0))
    with pytest.raises(MalformedEvent):
        conv.append_many([f.user(), Condensation(forgotten_ranges=[(0, 99)])])
    assert len(conv) == 3
    assert count_rows(store, "condensation") == 0
    assert count_rows(store, "forgotten_range") == 0
    assert conv.append(f.user()) == 3


def test_reversed_range_forgets_nothing(store, conv):
    conv.append_many([f.user() for _ in range(3)])
    seq = conv.append(Condensation(forgotten_ranges=[(2, 1)]))
    assert ranges_of(store, conv.id, seq) == []


def test_hidden_accumulates_the_union(store, conv):
    conv.append_many([said(f"e{i}") for i in range(10)])
    c1 = conv.append(Condensation(forgotten_ranges=[(1, 3)]))
    conv.append_many([said(f"e{i}") for i in range(11, 20)])
    c2 = conv.append(Condensation(forgotten_event_ids=["e5", "e6", "e4"]))
    c3 = conv.append(Condensation(forgotten_ranges=[(12, 14), (2, 8)]))
    assert hidden_of(store, conv.id, c1) == [(1, 3)]
    assert ranges_of(store, conv.id, c2) == [(4, 6)]
    assert hidden_of(store, conv.id, c2) == [(1, 6)]
    assert ranges_of(store, conv.id, c3) == [(2, 8), (12, 14)]
    assert hidden_of(store, conv.id, c3) == [(1, 8), (12, 14)]


def test_condensations_in_one_batch_accumulate(store, conv):
    conv.append_many([f.user() for _ in range(6)])
    seqs = conv.append_many([Condensation(forgotten_ranges=[(0, 1)]), Condensation(forgotten_ranges=[(3, 4)])])
    assert hidden_of(store, conv.id, seqs[1]) == [(0, 1), (3, 4)]


def test_condensation_note_is_recorded(store, conv):
    conv.append_many([f.user() for _ in range(4)])
    note = CondensationNote(strategy="RecentEvents", reason="max_events", config={"keep_first": 1},
                            tokens_before=100, tokens_after=40)
    seq = conv.append(Condensation(forgotten_ranges=[(1, 2)]).with_note(note))
    row = store.db.execute(
        "SELECT strategy, reason, config, tokens_before, tokens_after FROM condensation "
        "WHERE conversation_id = ? AND id = ?", (conv.id, seq)).fetchone()
    assert row[:2] == ("RecentEvents", "max_events")
    assert json.loads(row[2]) == {"keep_first": 1}
    assert row[3:] == (100, 40)
    assert "strategy" not in conv.get(seq).to_json_dict()  # the note lives beside the event, not in it


# --- two processes, one conversation ------------------------------------------------------

PER_PROCESS = 1000
OVERLAP = 10  # each writer's append after which the other must have begun


def _append_worker(path: str, conversation_id: str, tag: str, n: int, start) -> None:
    from openhands_memory.events import Message, MessageEvent, TextContent
    from openhands_memory.conversation import EventStore

    with EventStore(path) as store:
        conv = store.conversation(conversation_id)
        start.wait(timeout=30)  # start together so that the appends interleave
        for i in range(n):
            if i == OVERLAP:
                # On a loaded machine one process may run its whole loop before the other
                # is scheduled: whoever gets here first waits for the other's first append,
                # so the two runs overlap (at least two switches of writer) by construction.
                deadline = time.monotonic() + 30
                while len(conv) <= OVERLAP and time.monotonic() < deadline:
                    time.sleep(0.001)
            conv.append(MessageEvent(
                source="user", sender=tag,
                llm_message=Message(role="user", content=[TextContent(text=f"{tag}:{i}")]),
            ))


def test_two_processes_append_without_gaps(db_path):
    with EventStore(db_path) as store:
        store.create_conversation("shared")
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(2)
    procs = [
        ctx.Process(target=_append_worker, args=(str(db_path), "shared", tag, PER_PROCESS, start))
        for tag in ("p1", "p2")
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    for p in procs:
        if p.is_alive():
            p.kill()
    assert [p.exitcode for p in procs] == [0, 0]

    with EventStore(db_path) as store:
        conv = store.conversation("shared")
        assert all_ids(store, "shared") == list(range(2 * PER_PROCESS))
        assert len(conv) == 2 * PER_PROCESS
        seen: dict[str, list[int]] = {"p1": [], "p2": []}
        order = []
        for e in conv.events():
            assert isinstance(e, MessageEvent)
            tag, i = e.llm_message.content[0].text.split(":")
            assert e.sender == tag
            seen[tag].append(int(i))
            order.append(tag)
    # every payload present, each process's events in its own order
    assert seen["p1"] == list(range(PER_PROCESS))
    assert seen["p2"] == list(range(PER_PROCESS))
    switches = sum(a != b for a, b in zip(order, order[1:]))
    assert switches >= 2, "the two writers did not overlap; the test proved nothing"


def test_the_writing_context_commits_and_updates_the_cached_view_together(db_path):
    with EventStore(db_path) as store:
        conv = store.create_conversation("c")
        conv.append_many([f.system(), f.user("a"), f.user("b")])
        cached = conv.view()
        with pytest.raises(RuntimeError):
            with conv.writing() as w:
                w.append([f.user("lost")])
                raise RuntimeError("the block failed")
        assert len(conv) == 3 and conv.view().seqs == cached.seqs  # nothing stored, nothing cached
        with conv.writing() as w:
            first = w.append([f.user("c")])
            second = w.append([f.user("d")])
            cond = Condensation(forgotten_ranges=[(1, 2)])
            assert w.condensation(cond, view=cached) == 5
        assert first + second == [3, 4] and cond.seq == 5
        assert conv.view().seqs == [0, 3, 4]
        with EventStore(db_path) as other:  # the cache equals a fresh read
            assert other.conversation("c").view().seqs == [0, 3, 4]


# A child process: its peak RSS (VmHWM) before and after deleting a conversation, then after
# switching the search index off.
_PEAKS = """
import sys
from openhands_memory.conversation import EventStore

def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024

with EventStore(sys.argv[1], create=False) as store:
    store.conversation("big").view()
    before = peak()
    store.delete_conversation("big")
    deleted = peak()
    store.set_search_index(False)
    print(before, deleted, peak())
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmHWM from /proc")
def test_deleting_a_large_conversation_or_index_holds_no_copy_of_it_in_memory(tmp_path):
    """SQLite journals every page a statement frees; kept in memory (where appends want their
    journals), deleting a 1M-event conversation peaked at 2.7 GB. 48 MB of events (and their
    search index) come and go within a fraction of that (24 MB more, journaled in memory)."""
    path = tmp_path / "big.db"
    with EventStore(path) as store:
        conv = store.create_conversation("big")
        noise = "".join(f"line {i}: {uuid.uuid4().hex}\n" for i in range(600))  # ~24 KB, incompressible
        for lo in range(0, 2_000, 500):
            conv.append_many([f.observation(f"c{i}", noise + str(i)) for i in range(lo, lo + 500)])
        store.create_conversation("kept").append(f.user())
    out = subprocess.run([sys.executable, "-c", _PEAKS, str(path)], capture_output=True, text=True, check=True)
    before, deleted, dropped = (int(x) for x in out.stdout.split())
    assert deleted - before < 12 and dropped - before < 12, (before, deleted, dropped)
    with EventStore(path) as store:
        assert [c.id for c in store.conversations()] == ["kept"] and not store.search_index
