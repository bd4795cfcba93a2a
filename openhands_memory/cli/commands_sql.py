"""``sql``: read-only queries, read-only by construction.

Two locks, each enough on its own for the common cases: ``PRAGMA query_only=ON`` on the
connection (``database.connect_readonly``); and an authorizer that SQLite consults while it
compiles each statement denies every action that writes, ATTACH/DETACH, and any PRAGMA other
than the read-only ones listed below (and those only without a value).
"""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from dataclasses import dataclass
from typing import Any

import click

from ..errors import ReadOnlyViolation
from . import output_format
from .opening import is_url, open_readonly
from .output import Column, Table, echo_csv, echo_json, note

# Pragmas that only report, whatever their argument (a table or index name, a row limit).
REPORT_PRAGMAS = frozenset({
    "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
    "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check", "database_list",
    "collation_list", "function_list", "module_list", "pragma_list", "compile_options",
    "data_version", "page_count", "freelist_count",
})
# Pragmas that report when read and change the file when given a value: read only.
SETTING_PRAGMAS = frozenset({
    "user_version", "schema_version", "application_id", "page_size", "encoding", "journal_mode",
    "query_only", "foreign_keys",
})

_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
_NAMES = {
    getattr(sqlite3, name): name.removeprefix("SQLITE_").replace("_", " ")
    for name in dir(sqlite3)
    if name.startswith("SQLITE_") and name not in ("SQLITE_OK", "SQLITE_DENY", "SQLITE_IGNORE")
    and isinstance(getattr(sqlite3, name), int) and getattr(sqlite3, name) < 100
}
_NAMES.update({
    sqlite3.SQLITE_INSERT: "INSERT", sqlite3.SQLITE_UPDATE: "UPDATE", sqlite3.SQLITE_DELETE: "DELETE",
    sqlite3.SQLITE_CREATE_TABLE: "CREATE TABLE", sqlite3.SQLITE_DROP_TABLE: "DROP TABLE",
    sqlite3.SQLITE_ATTACH: "ATTACH", sqlite3.SQLITE_DETACH: "DETACH",
    sqlite3.SQLITE_TRANSACTION: "a transaction statement", sqlite3.SQLITE_SAVEPOINT: "SAVEPOINT",
})


_WRITES = {"INSERT", "REPLACE", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER", "ATTACH", "DETACH", "VACUUM",
           "REINDEX", "ANALYZE", "BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE", "PRAGMA"}


def statement_name(query: str) -> str | None:
    """What a statement does, from its first words: ``DROP TABLE``, ``PRAGMA user_version=3``."""
    words = query.strip().rstrip(";").split()
    if not words or words[0].upper() not in _WRITES:
        return None
    head = words[0].upper()
    if head in ("CREATE", "DROP", "ALTER"):
        kinds = [w.upper() for w in words[1:4]]
        noun = next((w for w in kinds if w in ("TABLE", "INDEX", "VIEW", "TRIGGER")), "")
        return f"{head} {noun}".strip()
    if head == "PRAGMA":
        return "PRAGMA " + "".join(words[1:])
    return head


_SCHEMA_TABLES = ("sqlite_master", "sqlite_schema")


class Guard:
    """The authorizer; remembers the first thing it refused, for the message."""

    def __init__(self) -> None:
        self.refused: str | None = None
        self.first: int | None = None  # the statement's first action: SELECT for a query

    def __call__(self, action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
        if self.first is None:
            self.first = action
        if action in _ALLOWED:
            return sqlite3.SQLITE_OK
        # The first use of an eponymous virtual table (pragma_table_info('event'), dbstat,
        # pragma_user_version) makes SQLite check an UPDATE of the schema table's columns
        # while it compiles the SELECT; nothing is written (and query_only would stop it).
        if action == sqlite3.SQLITE_UPDATE and self.first == sqlite3.SQLITE_SELECT and arg1 in _SCHEMA_TABLES:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA:
            name = (arg1 or "").lower()
            if name in REPORT_PRAGMAS or (name in SETTING_PRAGMAS and arg2 is None):
                return sqlite3.SQLITE_OK
        if self.refused is None:
            if action == sqlite3.SQLITE_PRAGMA:
                self.refused = f"PRAGMA {arg1}" + (f"={arg2}" if arg2 is not None else "")
            else:
                self.refused = _NAMES.get(action, f"action {action}")
        return sqlite3.SQLITE_DENY


DEFAULT_TIMEOUT = 30.0  # seconds
DEFAULT_MAX_ROWS = 10_000
MAX_VALUE_BYTES = 100_000_000  # SQLITE_LIMIT_LENGTH: no string or blob may grow past this
_PROGRESS_STEPS = 10_000  # virtual-machine steps between two looks at the clock


@dataclass
class QueryResult:
    header: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool  # more rows than max_rows were available


def run_query(db: str, query: str, *, timeout: float = DEFAULT_TIMEOUT,
              max_rows: int = DEFAULT_MAX_ROWS) -> QueryResult:
    """Run one read-only statement; at most ``max_rows`` rows are kept.

    The statement stops after ``timeout`` seconds, and at Ctrl-C: a progress handler looks at
    the clock and at a pending interrupt every few thousand steps of SQLite's virtual machine.
    No string or blob may grow past ``MAX_VALUE_BYTES`` (``printf('%.*c', 1e9, 'x')``).
    """
    if is_url(db):
        return _server_query(db, query, timeout=timeout, max_rows=max_rows)
    conn = open_readonly(db)
    guard = Guard()
    conn.set_authorizer(guard)
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    deadline = time.monotonic() + timeout
    stop: list[str] = []

    def progress() -> int:
        if not stop and time.monotonic() > deadline:
            stop.append("timeout")
        return 1 if stop else 0

    def on_sigint(_signum: int, _frame: Any) -> None:
        stop.append("interrupt")
        conn.interrupt()

    conn.set_progress_handler(progress, _PROGRESS_STEPS)
    previous = _install_sigint(on_sigint)
    try:
        cursor = conn.execute(query)
        rows = cursor.fetchmany(max_rows + 1)
    except (sqlite3.Warning, sqlite3.ProgrammingError) as e:  # more than one statement
        raise click.UsageError(f"give one SQL statement at a time ({e})") from None
    except sqlite3.DatabaseError as e:
        if stop and stop[0] == "interrupt":  # Ctrl-C: as the shell expects, status 130
            click.echo("interrupted", err=True)
            raise click.exceptions.Exit(130) from None
        if stop:
            raise click.ClickException(
                f"the query ran past its time limit of {timeout:g} s and was stopped (--timeout SECONDS)"
            ) from None
        if guard.refused is not None or statement_name(query) is not None:
            # (SQLite refuses some writes itself before asking the authorizer, e.g. to
            # sqlite_master: named the same way.)
            what = statement_name(query) or guard.refused
            raise ReadOnlyViolation(f"sql is read-only: {what} is not allowed") from None
        if "too big" in str(e):
            raise click.ClickException(
                f"SQL error: {e} (a value may hold at most {MAX_VALUE_BYTES:,} bytes)"
            ) from None
        raise click.ClickException(f"SQL error: {e}") from None
    finally:
        _install_sigint(previous)
        conn.close()
    header = [d[0] for d in cursor.description or []]
    return QueryResult(header, rows[:max_rows], len(rows) > max_rows)


def _server_query(db: str, query: str, *, timeout: float, max_rows: int) -> QueryResult:
    """The same on a PostgreSQL server (see ``storage.postgres.read_only_query``)."""
    import psycopg

    from ..database import Location
    from ..storage.postgres import read_only_query

    try:
        header, rows, truncated = read_only_query(Location.parse(db), query, timeout=timeout, max_rows=max_rows)
    except TimeoutError as e:
        raise click.ClickException(f"{e} (--timeout SECONDS)") from None
    except psycopg.Error as e:
        raise click.ClickException(f"SQL error: {str(e).strip().splitlines()[0]}") from None
    return QueryResult(header, rows, truncated)


def _install_sigint(handler: Any) -> Any:
    """Set the SIGINT handler (main thread only; elsewhere Ctrl-C is not ours to catch)."""
    if handler is None or threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, handler)


@click.command()
@click.argument("db")
@click.argument("query")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_TIMEOUT,
              show_default=True, metavar="SECONDS", help="Stop the query after this long.")
@click.option("--max-rows", type=click.IntRange(min=1), default=DEFAULT_MAX_ROWS, show_default=True,
              metavar="N", help="Print at most N rows (a note says when there were more).")
@output_format("table", "csv", "json")
def sql(db: str, query: str, timeout: float, max_rows: int, fmt: str) -> None:
    """Run the SELECT statement QUERY on DB, which it can never change.

    Reads only: writes, ATTACH and pragmas that set something are refused, naming what was
    refused; table-valued pragmas (pragma_table_info('event')) and dbstat are reads. A query
    stops at its time limit or at Ctrl-C.

    \b
    Tables: conversation, event, condensation, forgotten_range, llm_call.
    Example:
      openhands-memory sql agent.db "SELECT kind, COUNT(*) FROM event GROUP BY 1"
      openhands-memory sql agent.db "SELECT name FROM pragma_table_info('event')"
    """
    result = run_query(db, query, timeout=timeout, max_rows=max_rows)
    header, rows = result.header, result.rows
    if fmt == "json":
        echo_json([dict(zip(header, row)) for row in rows])
    elif fmt == "csv":
        echo_csv(header, rows)
    else:
        if not header:
            click.echo("(no result)")
            return
        table = Table([Column(h, ">" if rows and isinstance(rows[0][i], (int, float)) else "<", flex=True)
                       for i, h in enumerate(header)])
        for row in rows:
            table.add(["NULL" if v is None else str(v) for v in row])
        table.echo()
        click.echo(f"({len(rows):,} row{'s' if len(rows) != 1 else ''})", err=True)
    if result.truncated:
        note(f"note: only the first {max_rows:,} rows are shown (--max-rows N for more)")
