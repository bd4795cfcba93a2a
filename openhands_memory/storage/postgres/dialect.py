"""PostgreSQL's dialect of the library's SQL: the transaction and lock statements, the
one-round-trip append's INSERT, the transactions' settings, ``?`` placeholders as psycopg's."""

from __future__ import annotations

import functools
import re

from ..codec import EVENT_COLUMNS

#: Writes run at READ COMMITTED whatever the database's default: each statement after the
#: lock then sees what the lock's previous holder committed (MAX(id) above all).
BEGIN_WRITE = "BEGIN ISOLATION LEVEL READ COMMITTED"
BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
LOCK = "UPDATE conversation SET version = version + 1 WHERE id = %s RETURNING version"
LAST_ID = "SELECT MAX(id) FROM event WHERE conversation_id = %s"
#: Appends of up to this many events take the one-round-trip path; longer ones COPY.
APPEND_ROWS = 64
#: The columns an append sends per row (EVENT_COLUMNS without conversation_id and id), and
#: their SQL types (the VALUES list needs them: parameters arrive untyped).
APPEND_COLUMNS = EVENT_COLUMNS[2:]
APPEND_TYPES = ("VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR",
                "BOOLEAN", "BOOLEAN", "INTEGER", "TEXT")


#: Set inside every transaction the recorder begins (``set_config(..., true)`` is ``SET
#: LOCAL``: the settings end with the transaction, so that a pooler in transaction mode never
#: hands them to its next client, nor ours a client's before): no JIT, since the library's
#: statements are short index reads, but the planner prices each interval of a view at ~10k,
#: so a view of a dozen intervals passed jit_above_cost (100k) and spent ~10 ms compiling a
#: query that runs in one (measured on the 1M-event SDK history); no parallel workers either,
#: for the same reason: a search of the events waiting above the watermark (a few rows,
#: whose count the planner cannot know) was given two, and their start-up took 6 ms of a
#: 6 ms statement. One statement, pipelined with BEGIN: no round trip of its own.
TRANSACTION_SETTINGS = ("SELECT set_config('jit', 'off', true), "
                        "set_config('max_parallel_workers_per_gather', '0', true)")


def begin_write(readonly: bool) -> str:
    """A write transaction's BEGIN; a read-only store's writes are refused by the server."""
    return BEGIN_WRITE + " READ ONLY" if readonly else BEGIN_WRITE


def lock_not_available(error: BaseException) -> bool:
    """Whether the server stopped a statement at lock_timeout (SQLSTATE 55P03)."""
    return getattr(getattr(error, "diag", None), "sqlstate", None) == "55P03"


@functools.lru_cache(maxsize=APPEND_ROWS)
def append_sql(n: int) -> str:
    """An INSERT of ``n`` rows numbered from the conversation's MAX(id) + 1, returning the ids.

    The subquery is uncorrelated, so it runs once (an InitPlan: one seek of the primary key
    from its end). It must run in a statement of its own after the lock's: a statement's
    snapshot is taken when it starts, and one taken before the lock was granted would miss
    the previous holder's rows."""
    row = "(" + ", ".join(["CAST(%s AS INTEGER)"] + [f"CAST(%s AS {t})" for t in APPEND_TYPES]) + ")"
    names = ", ".join(APPEND_COLUMNS)
    return (
        f"INSERT INTO event ({', '.join(EVENT_COLUMNS)}) "
        f"SELECT %s, n.next + v.k, {', '.join('v.' + c for c in APPEND_COLUMNS)} "
        "FROM (SELECT COALESCE(MAX(id), -1) + 1 AS next FROM event WHERE conversation_id = %s) n "
        f"CROSS JOIN (VALUES {', '.join([row] * n)}) AS v(k, {names}) "
        # Nothing when the rows need parents of their own (Datastore.append, Session.append_point):
        # HEAD was moved back, or the first row names a parent that is not the newest row.
        "WHERE (SELECT head FROM conversation WHERE id = %s) IS NULL AND (CAST(%s AS TEXT) IS NULL "
        "OR (SELECT uid FROM event WHERE conversation_id = %s AND id = n.next - 1) = CAST(%s AS TEXT)) "
        "RETURNING id"
    )


@functools.lru_cache(maxsize=512)
def pyformat(text: str) -> str:
    """``?`` placeholders as psycopg's ``%s`` (the library's SQL has no ``%`` of its own and
    no ``?`` inside string literals)."""
    return re.sub(r"\?", "%s", text.replace("%", "%%"))


def first_line(error: Exception) -> str:
    """A driver error's first line, for a one-line message."""
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


#: What PgBouncer says when the server connection under a client's transaction ended (a
#: terminated backend, a server restart): an error answer, after which it closes the client's
#: connection too. The session is gone, as when the server says so itself.
POOLER_LOST_SIGN = "server conn crashed?"
