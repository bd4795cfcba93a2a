"""The hot queries keep their plans: every statement a view, a step, an append or a
condensation issues seeks an index with more than the conversation id, and none scans.

SQLite's planner once chose ``ux_event_uid (conversation_id=?)`` for the batch counts, which
reads every row of a conversation: the view of 1M events took 1.7 s instead of 2 ms. These
tests record the statements the library really issues (their SQL and parameters) on a file
with several conversations and SDK-shaped histories, and run ``EXPLAIN QUERY PLAN`` on each,
both as the file comes and after ``ANALYZE`` (statistics change plans). They also check the
cost directly: SQLite's virtual-machine steps for a view do not grow with the history.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any, Callable

import pytest

from openhands_memory.view import query as view_query
from openhands_memory.condensers import LLMSummarizingCondenser
from openhands_memory.events import Condensation, ConversationStateUpdateEvent, MessageEvent
from openhands_memory.schema import LOOP_EDGE_WHERE
from openhands_memory.storage import session
from openhands_memory.storage.codec import EVENT_COLUMNS
from openhands_memory.storage.sqlite import SqliteSession
from openhands_memory.conversation import EventStore

from . import factories as f
from .sdk_shape import sdk_history

TABLES = ("event", "condensation", "hidden_run", "forgotten_range", "conversation", "llm_call", "llm_reply",
          "search_state", "ingest_pending")


class Recorder:
    """Stands in for a store's connection (sqlite3 or psycopg) and records what is executed
    through it."""

    def __init__(self, db: sqlite3.Connection):
        self._db = db
        self.statements: list[tuple[str, tuple]] = []

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        self.statements.append((sql, tuple(params)))
        return self._db.execute(sql, params)

    def executemany(self, sql: str, rows: Any) -> sqlite3.Cursor:
        rows = list(rows)
        if rows:
            self.statements.append((sql, tuple(rows[0])))
        return self._db.executemany(sql, rows)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


def build(path: Path, steps: int) -> None:
    with EventStore(path) as store:
        store.create_conversation("before").append_many([f.system(), f.user()])
        store.create_conversation("sdk").append_many(list(sdk_history(steps, seed=1)))
        store.create_conversation("thinking").append_many(list(sdk_history(steps // 2, seed=2, thinking=True)))
        store.create_conversation("after").append_many(list(sdk_history(40, seed=3)))


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """A realistic file, and a copy with planner statistics (ANALYZE)."""
    work = tmp_path_factory.mktemp("plans")
    plain = work / "plain.db"
    build(plain, 1_500)
    analyzed = work / "analyzed.db"
    shutil.copy(plain, analyzed)
    with sqlite3.connect(analyzed) as db:
        db.execute("ANALYZE")
    return {"plain": plain, "analyzed": analyzed}


def record(path: Path, work: Callable[[EventStore], None], tmp_path: Path) -> list[tuple[str, tuple]]:
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    store = EventStore(copy)
    sqlite_session = store.recorder.session()
    recorder = Recorder(sqlite_session.conn)
    sqlite_session.conn = recorder  # type: ignore[assignment]
    try:
        work(store)
    finally:
        sqlite_session.conn = recorder._db
        store.close()
    return recorder.statements


def plan(path: Path, sql: str, params: tuple) -> list[str]:
    with sqlite3.connect(path) as db:
        return [row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {sql}", params)]


ONE_ROW_SEEK = re.compile(r"\bMAX\(|ORDER BY (\w+\.)?id DESC LIMIT 1", re.I)
# Partial indexes that hold a conversation's few live rows, not its history; and the agent
# server's events waiting for their parents (a batch or two, released as the parents come).
FEW_ROWS = ("ix_hidden_run_live", "ix_event_jump", "ix_event_pin", "sqlite_autoindex_ingest_pending_1",
            "ingest_pending_pkey")
# Tables keyed by the conversation alone: one row each.
ONE_PER_CONVERSATION = ("SEARCH search_state USING PRIMARY KEY",)


def bad_lines(sql: str, lines: list[str]) -> list[str]:
    """Plan lines that read a table whole, or a conversation's rows by its id alone."""
    bad = []
    for line in lines:
        if line.startswith("BLOOM FILTER"):  # built from rows another line reads: no read itself
            continue
        scan = re.match(r"SCAN (\w+)", line)
        if scan and scan.group(1) in TABLES:
            bad.append(line)
        # "(conversation_id=?)" alone reads every row of the conversation, unless the
        # statement asks for one row at an end of the index (MAX, or ORDER BY id DESC LIMIT 1).
        few = any(f"INDEX {name} " in line for name in FEW_ROWS) or line.startswith(ONE_PER_CONVERSATION)
        if re.search(r"\(conversation_id=\?\)$", line) and not (few or ONE_ROW_SEEK.search(sql)):
            bad.append(line)
    return bad


def assert_plans(path: Path, statements: list[tuple[str, tuple]]) -> int:
    checked = 0
    for sql, params in dict.fromkeys(statements):
        if re.match(r"\s*(BEGIN|COMMIT|ROLLBACK|PRAGMA)\b", sql, re.I):
            continue
        lines = plan(path, sql, params)
        assert not bad_lines(sql, lines), f"{sql}\n  plan: {lines}"
        checked += 1
    return checked


def first_view(store: EventStore) -> None:
    store.conversation("sdk").view().to_messages()


def view_at(store: EventStore) -> None:
    conv = store.conversation("sdk")
    conv.view(at=len(conv) // 2)


def cached_steps(store: EventStore) -> None:
    conv = store.conversation("thinking")
    conv.view()
    for i in range(3):
        conv.append(f.action(f"plan-r{i}", f"plan-c{i}", think=True))
        conv.append(f.observation(f"plan-c{i}"))
        conv.view().to_messages()
    conv.append_many([f.action("plan-rp", "plan-p1"), f.action("plan-rp", "plan-p2")])
    conv.view()


def bulk_appends(store: EventStore) -> None:
    """Appends past PostgreSQL's pipelined limit (64 rows) take the generic path, whose
    one statement (``append_point``) also counts one new response id, or several."""
    conv = store.conversation("sdk")
    conv.view()
    notes = [f.user(f"note {i}") for i in range(70)]
    conv.append_many(notes[:35] + [f.action("bulk-r1", "bulk-c1"), f.observation("bulk-c1")] + notes[35:])
    conv.view()
    conv.append_many([f.user(f"more {i}") for i in range(70)]
                     + [f.action("bulk-r2", "bulk-c2"), f.observation("bulk-c2"),
                        f.action("bulk-r3", "bulk-c3"), f.observation("bulk-c3")])
    conv.view()


def token_trigger_steps(store: EventStore) -> None:
    conv = store.conversation("sdk")
    condenser = LLMSummarizingCondenser(max_size=10_000, max_tokens=1_000_000, keep_first=4, tokenizer="chars/4")
    for i in range(3):
        conv.append(f.action(f"tok-r{i}", f"tok-c{i}"))
        conv.append(f.observation(f"tok-c{i}"))
        conv.step(condenser)


def condensation_written(store: EventStore) -> None:
    conv = store.conversation("sdk")
    uids = [e.id for e in conv.view().events[-12:-4]]
    conv.step(LLMSummarizingCondenser(max_size=20, keep_first=4))
    conv.view()
    assert uids
    conv.append(Condensation(forgotten_event_ids=uids))  # uid lookups
    conv.request_condensation()
    conv.view()


def branch_steps(store: EventStore) -> None:
    """A rewind to the middle of the history, a branch appended and condensed there, and a
    view of the abandoned branch (history trees: storage/tree.py)."""
    conv = store.conversation("sdk")
    n = len(conv)
    conv.navigate(n // 2)
    conv.append(f.user("another way"))
    # a state update, then an event naming the node before it (the update is detached)
    node = conv.get(len(conv) - 1)
    conv.append(ConversationStateUpdateEvent(key="execution_status", value="running"))
    conv.append(MessageEvent.model_validate({**f.user("go on").model_dump(), "parent_id": node.id}))
    for i in range(2):
        conv.append_many([f.action(f"br-r{i}", f"br-c{i}"), f.observation(f"br-c{i}")])
        conv.view().to_messages()
    conv.step(LLMSummarizingCondenser(max_size=20, keep_first=4))
    conv.view()
    conv.view(at=n - 1)


def pinned_steps(store: EventStore) -> None:
    """Pins made, a condensation that carries a keep pin and forgets a reinject pin (shown
    again from its row), the pins listed, an unpin (view/pins.py)."""
    conv = store.conversation("sdk")
    shown = [e.seq for e in conv.view().events if e.seq is not None]
    conv.pin(shown[-12], "keep", budget=1_000_000)
    conv.pin(shown[-10], "reinject", group="plan")
    conv.step(LLMSummarizingCondenser(max_size=20, keep_first=4))
    conv.view().to_messages()
    conv.pins()
    conv.view(at=len(conv) - 2)
    conv.unpin(shown[-10])
    conv.view()


def searches(store: EventStore) -> None:
    """Recall: a word and a fragment in each scope, filtered, and a read (recall.py)."""
    conv = store.conversation("sdk")
    for scope in ("forgotten", "visible", "all"):
        conv.search("error", scope=scope)
        conv.search("plan-c1", scope=scope)
        conv.search("checking", scope=scope)  # a word the texts hold: the words' windows are read
    conv.search("output", kinds=["ObservationEvent"], tools=["terminal"], after="2000-01-01")
    # A fragment read past the newest block: PostgreSQL's statement for the older ones.
    from openhands_memory.storage import search as index

    near, index.PG_GRAMS_NEAR = index.PG_GRAMS_NEAR, 1
    try:
        conv.search("no_such_fragment", scope="all")
    finally:
        index.PG_GRAMS_NEAR = near
    hits = conv.search("output", scope="all")
    if hits:
        conv.read(hits[0].seq)


def kept_replies(store: EventStore) -> None:
    """A replay's model replies, kept and looked up by request hash (llm/cache.py)."""
    with store.writing() as db:
        db.keep_llm_reply("k1", "openai/test-model", "{}", "2026-11-25T00:00:00")
        db.keep_llm_reply("k1", "openai/test-model", "{}", "2026-11-25T00:00:00")  # kept once
    with store.reading() as db:
        assert db.llm_reply("k1") == "{}" and db.llm_reply("k2") is None


def long_view(store: EventStore) -> None:
    """A long view (view/stored.py): its rows streamed past SQLite's page cache, its messages
    built from them, then its events read back from the store by id, a chunk at a time."""
    from unittest.mock import patch

    from openhands_memory.view import query

    conv = store.conversation("sdk")
    with patch.object(query, "KEEP_JSON_UPTO", -1):
        view = conv.view(at=len(conv) - 1)
    view.to_messages()
    assert len(list(view.events)) == len(view)


def agent_server_ingest(store: EventStore) -> None:
    """An agent server's webhook batches (io/agent_server.py): one arrives before the batch
    its first event follows (its events wait in ingest_pending, then are released when that
    batch comes), and one is delivered twice (nothing stored twice)."""
    import uuid

    from openhands_memory.io.agent_server import ingest_events

    from .test_ingest import wire_events

    wire = wire_events(30)
    batches = [wire[k : k + 10] for k in range(0, len(wire), 10)]
    hex_id = uuid.UUID(int=43).hex
    for batch in [batches[0], batches[2], batches[1], *batches[3:], batches[1]]:
        ingest_events(store, hex_id, json.dumps(batch).encode())
    with store.reading() as db:
        assert db.pending_count(str(uuid.UUID(hex_id))) == 0


def chat_window(store: EventStore) -> None:
    """``ChatHistory.messages(limit=N)`` (chat/newest.py): the branch's end read backwards, a
    window that doubles, as ``get_items(limit=N)`` asks at every turn; and a pop."""
    from openhands_memory import ChatHistory

    with ChatHistory(store, "chat-window") as h:
        for n in range(60):
            h.extend([{"role": "assistant", "content": None, "tool_calls": [
                {"id": f"w{n}", "type": "function", "function": {"name": "t", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": f"w{n}", "content": f"out {n}"}])
        assert len(h.messages(condense=False, limit=5)) >= 5
        h.pop()


WORK = [first_view, view_at, cached_steps, bulk_appends, token_trigger_steps, condensation_written, branch_steps,
        pinned_steps, searches, kept_replies, long_view, agent_server_ingest, chat_window]


def test_a_long_view_reads_its_events_back_by_key(files, tmp_path):
    statements = record(files["plain"], long_view, tmp_path)
    back = [(sql, params) for sql, params in statements if "AND id IN (" in sql]
    assert back, "the long view's events were not read back"
    for sql, params in back:
        assert any("(conversation_id=? AND id=?)" in line for line in plan(files["plain"], sql, params)), sql


@pytest.mark.parametrize("which", ["plain", "analyzed"])
@pytest.mark.parametrize("work", WORK, ids=[w.__name__ for w in WORK])
def test_hot_statements_seek_and_never_scan(files, which, work, tmp_path):
    statements = record(files[which], work, tmp_path)
    assert assert_plans(files[which], statements) >= 3


def test_the_view_queries_are_recorded(files, tmp_path):
    """The recorder sees the statements the plan tests are about (or they prove nothing)."""
    seen = " ".join(sql for sql, _ in record(files["plain"], first_view, tmp_path) + record(
        files["plain"], token_trigger_steps, tmp_path))
    for needle in ("llm_response_id IN", "hidden_run", "iv.e + 1", "ev.token_count", "summary IS NOT NULL",
                   "CondensationRequest"):
        assert needle in seen


def test_batch_counts_use_the_response_index_whatever_the_list(files):
    """The plan that read every row came from IN lists of 1 or of 5 and more."""
    for n in (1, 2, 4, 5, 30, 500):
        rids = {f"r{i}" for i in range(n)}
        db = sqlite3.connect(files["analyzed"])
        statements: list[str] = []
        db.set_trace_callback(statements.append)
        SqliteSession(db).batch_sizes("sdk", 10**9, rids)
        db.close()
        for path in files.values():
            chunk = sorted(rids)[:500]
            sql = (
                "SELECT llm_response_id, COUNT(*) FROM event WHERE +conversation_id = ? AND kind = 'ActionEvent' "
                f"AND +id <= ? AND llm_response_id IN ({', '.join('?' for _ in chunk)}) GROUP BY llm_response_id"
            )
            assert plan(path, sql, ("sdk", 10**9, *chunk)) == [
                "SEARCH event USING INDEX ix_event_response (llm_response_id=?)"
            ]


def test_loop_edge_query_matches_its_partial_index():
    """The loop-edge seek can use ix_event_loop_edge only if its predicate is the index's."""
    assert session.LOOP_EDGE == f"({LOOP_EDGE_WHERE})"
    assert LOOP_EDGE_WHERE == (
        "(kind <> 'ActionEvent' AND kind <> 'AgentErrorEvent' AND kind <> 'ObservationEvent' "
        "AND kind <> 'UserRejectObservation') OR has_thinking"
    ), "revision 0014 created the index with this predicate: the query must repeat it"


def test_an_inserted_event_builds_no_table_to_judge_the_partial_indexes(tmp_path):
    """Each row of a bulk insert runs the statement anew: an IN list of more than two values
    in an index's predicate was a table built for every row (a quarter of the insert's cost).
    (Without the search index, whose triggers are programs of their own.)"""
    with EventStore(tmp_path / "plain.db") as store:
        store.set_search_index(False)
    db = sqlite3.connect(tmp_path / "plain.db")
    opcodes = [row[1] for row in db.execute("EXPLAIN " + session.INSERT_EVENT, (None,) * len(EVENT_COLUMNS))]
    db.close()
    assert opcodes.count("IdxInsert") >= 6 and "OpenEphemeral" not in opcodes


def vm_steps(path: Path, cid: str) -> int:
    """SQLite virtual-machine instructions (in thousands) to load a view from scratch."""
    db = sqlite3.connect(path)
    steps = 0

    def tick() -> int:
        nonlocal steps
        steps += 1
        return 0

    db.set_progress_handler(tick, 1000)
    try:
        view_query.load(SqliteSession(db), cid)
    finally:
        db.close()
    return steps


def test_view_cost_follows_the_tail_not_the_history(tmp_path):
    """Same tail, 8x the history: the view costs the same number of SQLite instructions."""
    small, big = tmp_path / "small.db", tmp_path / "big.db"
    with EventStore(small) as store:
        store.create_conversation("c").append_many(list(sdk_history(500, seed=5)))
    with EventStore(big) as store:
        store.create_conversation("c").append_many(list(sdk_history(4_000, seed=5)))
    a, b = vm_steps(small, "c"), vm_steps(big, "c")
    assert b <= 1.3 * a + 5, (a, b)


def test_statements_per_view_are_few_whatever_the_history(files, tmp_path):
    statements = record(files["plain"], first_view, tmp_path)
    assert len(statements) <= 20, [s for s, _ in statements]


# Statements that must use one index in particular: a seek by the primary key would also pass
# the general test, but would walk back through every tool event, or every action, or every
# condensation without a summary.
EXPECTED_INDEX = {
    "iv.e + 1": "ix_event_loop_edge",
    "llm_response_id IN": "ix_event_response",
    "summary IS NOT NULL": "ix_condensation_summary",
    "kind = 'CondensationRequest'": "ix_event_request",
    "until_id IS NULL ORDER BY": "ix_hidden_run_live",
    "SELECT id, uid FROM event WHERE": "ux_event_uid",  # events by external id (seqs_of)
    "parent_seq IS NOT NULL AND id <=": "ix_event_jump",
    "kind = 'PinEvent'": "ix_event_pin",
}
# PostgreSQL's search reads its GIN indexes (SQLite's, its FTS5 tables: no plan to check).
# A fragment may instead be matched against each stored text of a window of ids, read by the
# primary key (LIKE over a few KB of text is cheap): the planner weighs the two. (The events
# above the watermark are matched by the same operators over texts spelled from ``event``,
# read by its primary key: no text of theirs is indexed yet, and pg_bad_nodes checks that.)
PG_EXPECTED_INDEX = {"@@": "ix_event_text_words", "LIKE lower": "ix_event_text_grams or event_text_pkey"}


@pytest.mark.parametrize("which", ["plain", "analyzed"])
def test_view_statements_use_their_index(files, which, tmp_path):
    statements = (record(files[which], first_view, tmp_path) + record(files[which], condensation_written, tmp_path)
                  + record(files[which], branch_steps, tmp_path) + record(files[which], pinned_steps, tmp_path))
    for needle, index in EXPECTED_INDEX.items():
        found = [(sql, params) for sql, params in statements if needle in sql]
        assert found, needle
        for sql, params in found:
            assert any(index in line for line in plan(files[which], sql, params)), (sql, index)


# --- PostgreSQL -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_file(postgres_database_factory) -> str:
    """A realistic PostgreSQL database, with planner statistics."""
    url = postgres_database_factory()
    build(url, 1_500)  # type: ignore[arg-type]
    with EventStore(url) as store:  # a fleet's worth of conversations: a realistic planner
        for i in range(300):
            store.create_conversation(f"fleet-{i:03}").append_many([f.system(), f.user()])
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")
    return url


# The tables whose rows grow with histories. (PostgreSQL rightly scans a conversation table of
# a few hundred rows, a page or two; with a fleet's worth its statistics choose the key.)
PG_HISTORY_TABLES = ("event", "condensation", "hidden_run", "forgotten_range", "llm_call", "llm_reply",
                     "event_text", "ingest_pending")
PG_COLUMNS = {"conversation_id", "id", "uid", "llm_response_id", "kind", "from_id", "start_id", "until_id",
              "condensation_id", "token_count", "llm_visible"}


def pg_bad_nodes(sql: str, plan: dict, parent: str | None = None) -> list[str]:
    """Plan nodes that read a history table whole, or a conversation's rows by its id alone.
    (A Bitmap Index Scan names no table: it reads its parent Bitmap Heap Scan's.)"""
    bad = []
    node_type = plan.get("Node Type", "")
    relation = plan.get("Relation Name") or parent
    if relation in PG_HISTORY_TABLES and node_type == "Seq Scan":
        bad.append(f"{node_type} on {relation}")
    cond = plan.get("Index Cond", "")
    few = plan.get("Index Name") in FEW_ROWS
    columns = {w for w in re.findall(r"[a-z_]+", re.sub(r"'[^']*'|::\w+", "", cond)) if w in PG_COLUMNS}
    if relation in PG_HISTORY_TABLES and columns == {"conversation_id"} and not (few or ONE_ROW_SEEK.search(sql)):
        bad.append(f"{node_type} on {relation} by {cond}")
    for child in plan.get("Plans", []):
        bad += pg_bad_nodes(sql, child, relation if node_type == "Bitmap Heap Scan" else None)
    return bad


PG_WORK = WORK


def index_conds(plan: dict) -> list[str]:
    """The conditions every index of a plan reads (not those rechecked on the rows)."""
    return [plan.get("Index Cond", "")] + [c for child in plan.get("Plans", []) for c in index_conds(child)]


@pytest.mark.parametrize("work", PG_WORK, ids=[w.__name__ for w in PG_WORK])
def test_postgres_hot_statements_use_indexes(pg_file, work, postgres_database_factory):
    import psycopg

    url = postgres_database_factory(template=pg_file)
    store = EventStore(url)
    session = store.recorder.session()
    recorder = Recorder(session.conn)
    session.conn = recorder  # type: ignore[assignment]
    try:
        work(store)
    finally:
        session.conn = recorder._db
        store.close()
    checked, windows, older = 0, set(), False
    with psycopg.connect(url, autocommit=True) as conn:
        # (repr: a search's window passes its blocks as a list, which is not hashable)
        for sql, params in {(sql, repr(params)): (sql, params) for sql, params in recorder.statements}.values():
            if re.match(r"\s*(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|SELECT pg_advisory)", sql, re.I):
                continue
            conn.execute("BEGIN")
            try:
                # A test database is small enough that a sequential scan of a few pages wins;
                # with scans priced out, the plan shows which index the query can use at a
                # production size, and a scan that remains means there is none.
                conn.execute("SET LOCAL enable_seqscan = off")
                (plan,) = conn.execute(f"EXPLAIN (FORMAT JSON) {sql}", params).fetchone()[0]
            finally:
                conn.execute("ROLLBACK")
            assert not pg_bad_nodes(sql, plan["Plan"]), f"{sql}\n  plan: {plan['Plan']}"
            for needle, index in {**EXPECTED_INDEX, **PG_EXPECTED_INDEX}.items():
                if needle in sql and (needle not in PG_EXPECTED_INDEX or "event_text" in sql):
                    assert any(i in json.dumps(plan) for i in index.split(" or ")), (sql, index, plan["Plan"])
            # A search's window of blocks: the words' (a list), or a fragment's (a probe each).
            if "FROM event_text t" in sql and ("BETWEEN" in sql or "LATERAL" in sql):
                # With filtering priced up, the planner reads a GIN index, as it does at scale
                # (a test history is small enough to filter a window's rows): one index must
                # read both the window and the text's terms, never a term's candidates from the
                # whole table.
                conn.execute("BEGIN")
                try:
                    conn.execute("SET LOCAL enable_seqscan = off")
                    conn.execute("SET LOCAL cpu_operator_cost = 10")
                    (gin,) = conn.execute(f"EXPLAIN (FORMAT JSON) {sql}", params).fetchone()[0]
                finally:
                    conn.execute("ROLLBACK")
                conds = [c for c in index_conds(gin["Plan"]) if c]
                window, terms = ("(id >> 10) = ANY", "@@") if "@@" in sql else ("(id >> 10) = n.b", "~~")
                assert any(window in c and terms in c for c in conds), (sql, conds)
                windows.add(terms)
            older = older or "t.id < CAST" in sql
            checked += 1
    assert checked >= 3
    assert work is not searches or windows == {"@@", "~~"}, windows  # both kinds of window were read
    assert work is not searches or older  # and a fragment's older blocks


def test_the_postgres_check_catches_a_read_by_conversation_alone(pg_file):
    import psycopg

    with psycopg.connect(pg_file, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")
        for sql in ("SELECT COUNT(*) FROM event WHERE conversation_id = 'sdk'",
                    "SELECT COUNT(*) FROM event WHERE tool_name = 'terminal'"):
            (plan,) = conn.execute(f"EXPLAIN (FORMAT JSON) {sql}").fetchone()[0]
            assert pg_bad_nodes(sql, plan["Plan"]), plan
