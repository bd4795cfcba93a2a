"""The inspector's statements keep their plans, on SQLite and PostgreSQL: every statement its
pages run (recorded while the page builders read a realistic file) seeks an index by more than
the conversation's id and none scans a table, save the per-conversation aggregates named
below, whose rows are one per condensation or summarizer call, never one per event."""

from __future__ import annotations

import re

import pytest

from openhands_memory.conversation import EventStore
from openhands_memory.web import pages
from openhands_memory.web.call_page import call_page
from openhands_memory.web.timeline import Timelines

from ..test_query_plans import Recorder, bad_lines, build, pg_bad_nodes, plan, record

#: Reads over one conversation's condensations or ledger (a row per condensation or summarizer
#: call, not per event): the conversation page's totals, and a page of condensations' ledger
#: rows (llm_call has no index by condensation: its conversation's rows are read by the key
#: (conversation_id, id) and filtered).
PER_CONVERSATION = (
    "SELECT COUNT(*) FROM condensation WHERE conversation_id = ?",
    "SELECT COALESCE(SUM(cost_usd), 0) FROM llm_call WHERE conversation_id = ?",
    "SELECT COALESCE(SUM(cost_usd), 0) FROM llm_call WHERE conversation_id = ? AND condensation_id < ?",
    "SELECT condensation_id, strategy, purpose, model, prompt_tokens, completion_tokens, cost_usd, latency_s, "
    "outcome, error, attempts FROM llm_call WHERE conversation_id = ? AND condensation_id IN",
)


def per_conversation(sql: str) -> bool:
    sql = sql.strip().replace("%s", "?")
    return any(sql == known or (known.endswith(" IN") and sql.startswith(known)) for known in PER_CONVERSATION)


def crawl(store: EventStore) -> None:
    timelines = Timelines()
    pages.index_page(store, timelines)
    info = pages.conversation_page(store, timelines, "sdk")
    assert info.calls > 100 and info.condensations
    for n in (1, info.calls // 2, info.calls):
        call_page(store, timelines, "sdk", n)
    pages.event_page(store, timelines, "sdk", 700)
    pages.condensation_page(store, timelines, "sdk", info.condensations[0].seq)
    pages.events_page(store, timelines, "sdk", 600)
    pages.search_page(store, timelines, "error", "sdk", "all")


def recorded(location) -> list[tuple[str, tuple]]:
    """The distinct statements the pages run on PostgreSQL (``record`` is SQLite's)."""
    store = EventStore(location)
    session = store.recorder.session()
    recorder = Recorder(session.conn)
    session.conn = recorder  # type: ignore[assignment]
    try:
        crawl(store)
    finally:
        session.conn = recorder._db
        store.close()
    return [(sql, params) for sql, params in {(s, repr(p)): (s, p) for s, p in recorder.statements}.values()
            if not re.match(r"\s*(BEGIN|COMMIT|ROLLBACK|PRAGMA|SET LOCAL)\b", sql, re.I)]


@pytest.fixture(scope="module")
def sqlite_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("web-plans") / "plans.db"
    build(path, 1_500)
    return path


def test_sqlite_plans_of_the_pages_seek_and_never_scan(sqlite_file, tmp_path):
    statements = dict.fromkeys(record(sqlite_file, crawl, tmp_path))
    assert len(statements) > 20
    for sql, params in statements:
        if per_conversation(sql) or re.match(r"\s*(BEGIN|COMMIT|ROLLBACK|PRAGMA)\b", sql, re.I):
            continue
        lines = plan(tmp_path / sqlite_file.name, sql, params)
        assert not bad_lines(sql, lines), f"{sql}\n  plan: {lines}"


def test_postgres_plans_of_the_pages_use_indexes(postgres_database_factory):
    import psycopg

    url = postgres_database_factory()
    build(url, 1_500)  # type: ignore[arg-type]
    statements = recorded(url)
    assert len(statements) > 20
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")
        for sql, params in statements:
            if per_conversation(sql):
                continue
            conn.execute("BEGIN")
            try:
                conn.execute("SET LOCAL enable_seqscan = off")  # the plan an index allows at scale
                (found,) = conn.execute(f"EXPLAIN (FORMAT JSON) {sql}", params).fetchone()[0]
            finally:
                conn.execute("ROLLBACK")
            assert not pg_bad_nodes(sql, found["Plan"]), f"{sql}\n  plan: {found['Plan']}"
