"""Storage: every statement the library runs, behind one recorder interface.

``open_recorder`` judges what a path or URL holds (refusing anything that is not ours before
a byte changes), creates it at the head revision when it is new, and returns the recorder for
its backend: ``sqlite.SqliteRecorder`` for a file, ``postgres.PostgresRecorder`` for a
``postgresql://`` URL. ``read_only_query`` runs one statement that cannot write, on either.
"""

from __future__ import annotations

from pathlib import Path

from ..database import Durability, Location, open_location, psycopg_module
from .recorder import Datastore, QueryResult, Recorder
from .session import END, IntegrityViolation, Session


def open_recorder(
    path_or_url: str | Path, *, durability: Durability = "normal", create: bool = True,
    readonly: bool = False, statement_timeout: float | None = None,
) -> Datastore:
    """``readonly``: never create or change anything (reading commands, inspection).
    ``statement_timeout``: seconds after which PostgreSQL stops a statement of a read (a
    local SQLite file has no server to hold)."""
    location = open_location(path_or_url, create=create and not readonly)
    if location.is_sqlite:
        from .sqlite import SqliteRecorder

        assert location.path is not None
        return SqliteRecorder(location.path, durability=durability, readonly=readonly)
    from .postgres import PostgresRecorder

    return PostgresRecorder(location, create=create, readonly=readonly, statement_timeout=statement_timeout)


def read_only_query(path_or_url: str | Path, query: str, *, timeout: float, max_rows: int) -> QueryResult:
    """One statement that cannot write, on the backend ``path_or_url`` names (see
    ``QueryResult`` for what each backend promises). The database is not judged here: a
    caller that wants a clear refusal of a file that is not ours judges it first."""
    location = Location.parse(path_or_url)
    if location.is_sqlite:
        from .sqlite import read_only_query as run

        assert location.path is not None
        return run(location.path, query, timeout=timeout, max_rows=max_rows)
    psycopg_module(location)
    from .postgres import read_only_query as run_on_server

    return run_on_server(location, query, timeout=timeout, max_rows=max_rows)


__all__ = [
    "Datastore", "END", "IntegrityViolation", "Location", "QueryResult", "Recorder", "Session", "open_recorder",
    "read_only_query",
]
