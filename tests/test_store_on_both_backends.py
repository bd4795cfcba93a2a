"""What every backend must do, through the library (``EventStore``), on SQLite and PostgreSQL.

Each test gets a fresh, empty database of its backend (``database_url``): a file for SQLite,
a new database on the suite's throwaway PostgreSQL server for PostgreSQL.
"""

from __future__ import annotations

import multiprocessing
import re

import pytest

from openhands_memory.condensers import LLMSummarizingCondenser
from openhands_memory.errors import (
    ConcurrentCondensation,
    ConversationExists,
    ConversationNotFound,
    DuplicateEventId,
    EventNotFound,
)
from openhands_memory.events import Condensation
from openhands_memory.conversation import EventStore
from openhands_memory.view import View

from . import factories as f
from .sdk_shape import sdk_history


def ids(view: View) -> list[int | None]:
    return [e.seq for e in view.events]


def test_ids_are_gap_free_and_events_round_trip(database_url):
    with EventStore(database_url) as store:
        conv = store.create_conversation("c", metadata={"agent": "x"})
        events = [f.system(), f.user(), f.action("r1", "c1"), f.observation("c1")]
        assert conv.append_many(events) == [0, 1, 2, 3]
        assert conv.append(f.user("again")) == 4
        assert len(conv) == 5
        assert [e.to_json() for e in conv.events(0, 4)] == [e.to_json() for e in events]
        assert conv.get(4).llm_message.content[0].text == "again"
        assert [e.seq for e in conv.events(kinds=["ActionEvent", "ObservationEvent"])] == [2, 3]
        assert conv.metadata == {"agent": "x"}
        with pytest.raises(EventNotFound):
            conv.get(99)


def test_conversations_are_created_listed_and_deleted(database_url):
    with EventStore(database_url) as store:
        store.create_conversation("a")
        store.create_conversation("b").append(f.user())
        with pytest.raises(ConversationExists):
            store.create_conversation("a")
        assert [c.id for c in store.conversations()] == ["a", "b"]
        store.delete_conversation("b")
        assert "b" not in store and "a" in store
        with pytest.raises(ConversationNotFound):
            store.conversation("b")
        with pytest.raises(ConversationNotFound):
            store.delete_conversation("b")


def test_a_duplicate_uid_writes_nothing(database_url):
    with EventStore(database_url) as store:
        conv = store.create_conversation("c")
        first = f.user()
        conv.append(first)
        with pytest.raises(DuplicateEventId):
            conv.append_many([f.user(), first.model_copy()])
        assert len(conv) == 1
        assert conv.append(f.user()) == 1  # the failed batch took no ids


def test_an_sdk_history_gives_the_same_view_as_the_in_memory_fold(database_url):
    events = list(sdk_history(600, seed=11, thinking=True))
    with EventStore(database_url) as store:
        conv = store.create_conversation("c")
        conv.append_many(events)
        fresh = EventStore(database_url)
        try:
            stored = fresh.conversation("c").view()
        finally:
            fresh.close()
        expected = View.from_events(events)
        assert [e.id for e in stored.events] == [e.id for e in expected.events]
        assert stored.unhandled_condensation_request == expected.unhandled_condensation_request
        half = len(conv) // 2
        assert [e.id for e in conv.view(at=half).events] == [e.id for e in View.from_events(events[: half + 1]).events]


def test_the_cached_view_sees_another_connections_writes(database_url):
    with EventStore(database_url) as one, EventStore(database_url) as two:
        mine = one.create_conversation("c")
        mine.append_many([f.system(), f.user()])
        assert ids(mine.view()) == [0, 1]
        two.conversation("c").append_many([f.action("r", "k"), f.observation("k")])
        assert ids(mine.view()) == [0, 1, 2, 3]
        two.conversation("c").append(Condensation(forgotten_ranges=[(1, 1)]))
        assert ids(mine.view()) == [0, 2, 3]
        mine.append(f.user())
        assert ids(mine.view()) == [0, 2, 3, 5]


def test_a_write_between_the_lookup_and_the_first_view_is_seen_then_and_after(database_url):
    # ``store.conversation`` reads the version the first view takes (one statement on
    # PostgreSQL): a write landing in between must neither be missed nor hide the next ones.
    with EventStore(database_url) as one, EventStore(database_url) as two:
        one.create_conversation("c").append_many([f.system(), f.user()])
        looked_up = two.conversation("c")
        one.conversation("c").append(f.user())
        assert ids(looked_up.view()) == [0, 1, 2]
        one.conversation("c").append(f.user())
        assert ids(looked_up.view()) == [0, 1, 2, 3]
        later = two.conversation("c")
        later.append(f.user())  # its own write before its first view
        one.conversation("c").append(f.user())
        assert ids(later.view()) == [0, 1, 2, 3, 4, 5]
        one.conversation("c").append(f.user())
        assert ids(later.view()) == ids(looked_up.view()) == [0, 1, 2, 3, 4, 5, 6]


def test_a_condensation_refuses_when_another_landed(database_url):
    with EventStore(database_url) as one, EventStore(database_url) as two:
        conv = one.create_conversation("c")
        conv.append_many(list(sdk_history(80, seed=3)))
        stale = conv.view()
        condenser = LLMSummarizingCondenser(max_size=20, keep_first=2)
        two.conversation("c").step(condenser)
        result = condenser.condense(stale)
        assert isinstance(result, Condensation)
        before = len(conv)
        with pytest.raises(ConcurrentCondensation):
            with conv.writing() as w:
                w.condensation(result, view=stale)
        assert len(conv) == before


def test_condensing_steps_keep_the_view_bounded_and_equal_to_a_fresh_read(database_url):
    condenser = LLMSummarizingCondenser(max_size=60, keep_first=4, max_tokens=5_000, tokenizer="chars/4")
    with EventStore(database_url) as store:
        conv = store.create_conversation("c")
        conv.append_many([f.system(), f.user()])
        for i in range(150):
            conv.append_many([f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}")])
            view = conv.step(condenser)
            assert len(view) <= 61
        with EventStore(database_url) as other:
            assert ids(other.conversation("c").view()) == ids(conv.view())
        assert condenser.view_tokens(conv.view(), conv.tokens) <= 5_000


def test_a_batch_cut_by_a_condensation_counts_its_hidden_actions_in_the_cached_view(database_url):
    """An action whose batch has an action in a forgotten range: the cached view (batch size
    read by the append itself) equals a fresh read, appended one event at a time or all at once."""
    with EventStore(database_url) as store:
        for name, one_by_one in (("single", True), ("many", False)):
            conv = store.create_conversation(name)
            first = f.action("r", "c1")
            conv.append_many([f.system(), f.user(), first, f.user("meanwhile")])
            conv.append(f.condensation(forget=[first.id]))
            conv.view()  # the cache holds the hidden run and no batch r
            tail = [f.action("r", "c2"), f.observation("c1"), f.observation("c2"), f.action("s", "c3"),
                    f.observation("c3"), f.agent_says()]
            if one_by_one:
                for e in tail:
                    conv.append(e)
            else:
                conv.append_many(tail)
            cached = ids(conv.view())
            with EventStore(database_url) as other:
                fresh = other.conversation(name).view()
            assert cached == ids(fresh)
            assert conv.views.data is not None and conv.views.data.batch_sizes.get("r") == 2


def _append_many(url: str, worker: int, n: int) -> None:
    with EventStore(url) as store:
        conv = store.conversation("c")
        for i in range(n):
            conv.append(f.user(f"w{worker}-{i}"))


def test_eight_writer_processes_leave_gap_free_ids(database_url):
    with EventStore(database_url) as store:
        store.create_conversation("c")
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_append_many, args=(database_url, w, 40)) for w in range(8)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(120)
        assert p.exitcode == 0
    with EventStore(database_url) as store:
        conv = store.conversation("c")
        events = list(conv.events())
        assert [e.seq for e in events] == list(range(320))
        texts = sorted(e.llm_message.content[0].text for e in events)
        assert texts == sorted(f"w{w}-{i}" for w in range(8) for i in range(40))
        per_worker = [[int(re.search(r"-(\d+)$", t).group(1)) for t in (e.llm_message.content[0].text for e in events)
                       if t.startswith(f"w{w}-")] for w in range(8)]
        assert all(order == list(range(40)) for order in per_worker)  # each writer's order kept


def test_read_only_query_reads_bounds_and_refuses_alike(database_url):
    """``storage.read_only_query``: the same answers and the same errors on both backends."""
    from openhands_memory.errors import (
        MultipleStatements,
        QueryError,
        QueryTimeout,
        ReadOnlyViolation,
    )
    from openhands_memory.storage import read_only_query

    with EventStore(database_url) as store:
        store.create_conversation("c").append_many([f.user(f"m{i}") for i in range(5)])
    result = read_only_query(database_url, "SELECT id FROM event ORDER BY id", timeout=10, max_rows=3)
    assert (result.header, result.rows, result.truncated) == (["id"], [(0,), (1,), (2,)], True)
    with pytest.raises(ReadOnlyViolation, match="^sql is read-only: "):
        read_only_query(database_url, "DELETE FROM event", timeout=10, max_rows=3)
    # PostgreSQL ran every statement of a string through the simple protocol: one could end
    # the read-only transaction and write in the next (these deleted every row).
    with pytest.raises(MultipleStatements, match="^give one SQL statement at a time"):
        read_only_query(database_url, "SELECT 1; SELECT 2", timeout=10, max_rows=3)
    for escape in ("COMMIT; DELETE FROM event",
                   "COMMIT; SET default_transaction_read_only = off; COMMIT; DELETE FROM event",
                   "COMMIT; BEGIN READ WRITE; DELETE FROM event; COMMIT"):
        with pytest.raises((MultipleStatements, ReadOnlyViolation)):  # SQLite refuses the COMMIT first
            read_only_query(database_url, escape, timeout=10, max_rows=3)
    percent = read_only_query(database_url, "SELECT '50%' AS p WHERE 'a%' LIKE 'a%'", timeout=10, max_rows=3)
    assert percent.rows == [("50%",)]  # the query is sent as it is, never read for placeholders
    with pytest.raises(QueryError, match="^SQL error: "):
        read_only_query(database_url, "SELEC 1", timeout=10, max_rows=3)
    runaway = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT COUNT(*) FROM r"
    with pytest.raises(QueryTimeout, match=r"^the query ran past its time limit of 0\.3 s and was stopped$"):
        read_only_query(database_url, runaway, timeout=0.3, max_rows=3)
    with EventStore(database_url) as store:
        assert len(store.conversation("c")) == 5  # the refused DELETE changed nothing


def test_a_summary_quoting_a_nul_is_stored_on_every_backend(database_url):
    """A tool's output may hold U+0000, which PostgreSQL's text cannot: the offline summary
    that quotes it, and the summary column, read it as a space; the event keeps it."""
    with EventStore(database_url) as store:
        conv = store.create_conversation("c")
        events = [f.system(), f.user("run it")]
        for i in range(12):
            events += [f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}", f"Error: bad\x00byte in step {i}")]
        conv.append_many(events)
        view = conv.step(LLMSummarizingCondenser(max_size=10, keep_first=1))
        summary = view.summary_event
        assert summary is not None and "\x00" not in summary.summary
        assert "bad byte" in summary.summary
        assert "\x00" in conv.get(3).observation["content"][0]["text"]  # the event itself is kept
