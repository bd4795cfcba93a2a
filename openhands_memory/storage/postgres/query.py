"""The ``sql`` command's runner on PostgreSQL: one statement that cannot write."""

from __future__ import annotations

import itertools

from ...database import Location, connect_server
from ...errors import ConnectionLost, MultipleStatements, QueryError, QueryTimeout, ReadOnlyViolation, \
    StatementCancelled
from ..recorder import QueryResult
from .dialect import POOLER_LOST_SIGN, first_line


def read_only_query(location: Location, query: str, *, timeout: float, max_rows: int) -> QueryResult:
    """Run one statement that cannot write on the server (see ``QueryResult``).

    Read-only by construction: the statement runs inside ``BEGIN READ ONLY`` (which nothing
    in the statement can turn back: PostgreSQL refuses to change a transaction's mode after
    its first query), the extended protocol takes a single statement, and the transaction is
    rolled back. A statement timeout
    stops it; Ctrl-C cancels it on the server (psycopg sends the cancel). A connection lost
    under it is a read like any other: it runs once more on a new connection, then
    ``ConnectionLost``.
    """
    try:
        return _read_only_query(location, query, timeout=timeout, max_rows=max_rows)
    except _Lost:
        pass
    try:
        return _read_only_query(location, query, timeout=timeout, max_rows=max_rows)
    except _Lost as e:
        raise ConnectionLost(location.label, str(e), writing=False) from None


class _Lost(Exception):
    """The connection ended under ``read_only_query``'s statement (the reason)."""


def _read_only_query(location: Location, query: str, *, timeout: float, max_rows: int) -> QueryResult:
    import psycopg

    with connect_server(location) as conn:
        try:
            with conn.pipeline():  # one round trip; nothing set outlives the transaction
                conn.execute("BEGIN READ ONLY")
                conn.execute(f"SET LOCAL statement_timeout = {max(1, int(timeout * 1000))}")
            # stream(): the extended protocol, which takes one statement, through an unnamed
            # statement (a named one would outlive the transaction in the server's session,
            # which a pooler hands to its next client). psycopg would send a query without
            # parameters by the simple protocol, which runs every statement in the string:
            # "COMMIT; BEGIN READ WRITE; DELETE ..." wrote. The rows come one at a time, and
            # no more are read than are shown (closing the stream cancels the rest).
            cursor = conn.cursor()
            stream = cursor.stream(query)
            try:
                rows = list(itertools.islice(stream, max_rows + 1))
                header = [d.name for d in cursor.description or []]
            finally:
                stream.close()
        except psycopg.errors.ReadOnlySqlTransaction as e:
            raise ReadOnlyViolation(f"sql is read-only: {first_line(e)}") from None
        except psycopg.errors.QueryCanceled as e:
            if "statement timeout" in str(e):
                raise QueryTimeout(timeout) from None
            raise StatementCancelled(location.label, first_line(e), writing=False) from None
        except psycopg.errors.SyntaxError as e:
            if "multiple commands" in str(e):  # the extended protocol takes one statement
                raise MultipleStatements(f"give one SQL statement at a time ({first_line(e)})") from None
            raise QueryError(f"SQL error: {first_line(e)}") from None
        except psycopg.Error as e:
            if (conn.closed or isinstance(e, (psycopg.errors.AdminShutdown, psycopg.errors.CrashShutdown))
                    or POOLER_LOST_SIGN in str(e)):
                raise _Lost(first_line(e).removeprefix("consuming input failed: ")) from None
            raise QueryError(f"SQL error: {first_line(e)}") from None
        finally:
            if not conn.closed and conn.info.transaction_status != 0:  # not idle: end it
                try:
                    conn.execute("ROLLBACK")
                except psycopg.Error:  # it ends with the connection, which closes next
                    pass
    return QueryResult(header, [tuple(r) for r in rows[:max_rows]], len(rows) > max_rows)
