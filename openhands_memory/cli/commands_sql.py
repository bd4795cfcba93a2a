"""``sql``: read-only queries, read-only by construction.

Three locks, each enough on its own for the common cases: the file is opened with
``mode=ro``; ``PRAGMA query_only=ON``; and an authorizer that SQLite consults while it
compiles each statement denies every action that writes, ATTACH/DETACH, and any PRAGMA other
than the read-only ones listed below (and those only without a value).
"""

from __future__ import annotations

import sqlite3
from typing import Any

import click

from ..errors import ReadOnlyViolation
from . import output_format
from .opening import open_readonly
from .output import Column, Table, echo_csv, echo_json

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


class Guard:
    """The authorizer; remembers the first thing it refused, for the message."""

    def __init__(self) -> None:
        self.refused: str | None = None

    def __call__(self, action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
        if action in _ALLOWED:
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


def run_query(db: str, query: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    conn = open_readonly(db)
    guard = Guard()
    conn.set_authorizer(guard)
    try:
        cursor = conn.execute(query)
        rows = cursor.fetchall()
    except (sqlite3.Warning, sqlite3.ProgrammingError) as e:  # more than one statement
        raise click.UsageError(f"give one SQL statement at a time ({e})") from None
    except sqlite3.DatabaseError as e:
        if guard.refused is not None:
            what = statement_name(query) or guard.refused
            raise ReadOnlyViolation(f"sql is read-only: {what} is not allowed") from None
        raise click.ClickException(f"SQL error: {e}") from None
    finally:
        conn.close()
    header = [d[0] for d in cursor.description or []]
    return header, rows


@click.command()
@click.argument("db")
@click.argument("query")
@output_format("table", "csv", "json")
def sql(db: str, query: str, fmt: str) -> None:
    """Run the SELECT statement QUERY on DB, which it can never change.

    \b
    Tables: conversation, event, condensation, forgotten_range, llm_call.
    Example:
      openhands-memory sql agent.db "SELECT kind, COUNT(*) FROM event GROUP BY 1"
    """
    header, rows = run_query(db, query)
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
        click.echo(f"({len(rows)} row{'s' if len(rows) != 1 else ''})", err=True)
