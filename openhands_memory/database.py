"""Opening a database: judging the file before touching it, SQLite settings, transactions.

SQLite is set up for an agent's life: WAL (readers never block the writer), a busy timeout
(a second process waits instead of failing), foreign keys on, and every write in a
``BEGIN IMMEDIATE`` transaction (the write lock is taken up front, so a read-then-write such
as "next id = max + 1" can never race another process).
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Literal

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine

from . import migrate
from .errors import NotOurDatabase, SchemaTooNew, SchemaTooOld

Durability = Literal["normal", "full"]
SQLITE_MAGIC = b"SQLite format 3\x00"
OUR_TABLES = frozenset({"conversation", "event", "condensation", "forgotten_range"})
BUSY_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class Location:
    """Where a database lives: a SQLAlchemy URL, and the file path when it is SQLite."""

    url: str
    path: Path | None

    @property
    def label(self) -> str:
        return str(self.path) if self.path is not None else self.url

    @classmethod
    def parse(cls, path_or_url: str | Path) -> "Location":
        text = str(path_or_url)
        if "://" not in text:
            path = Path(text).expanduser()
            return cls(f"sqlite:///{path}", path)
        if text.startswith("sqlite:///") and text != "sqlite:///:memory:":
            return cls(text, Path(text.removeprefix("sqlite:///")))
        return cls(text, None)

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite")


@dataclass(frozen=True)
class FileState:
    """What a file holds before we open it for writing."""

    exists: bool
    revision: str | None  # None: no schema yet (a new or empty file)


def inspect_sqlite_file(path: Path) -> FileState:
    """Judge a file read-only. Refuse anything that is not ours without changing a byte."""
    if path.is_dir():  # before the size test: some file systems report 0 for a folder
        raise NotOurDatabase(str(path), "it is a directory")
    if not path.exists() or path.stat().st_size == 0:
        return FileState(exists=path.exists(), revision=None)
    with path.open("rb") as f:
        header = f.read(20)
    if header[:16] != SQLITE_MAGIC:
        raise NotOurDatabase(str(path), "it is not an SQLite file")
    # Opening a WAL-mode file even read-only creates -wal and -shm beside it. When there is no
    # -wal, no other connection has the file open, so it can be read as immutable instead.
    wal_mode = header[18:20] == b"\x02\x02"
    no_wal = not Path(f"{path}-wal").exists()
    flags = "immutable=1" if wal_mode and no_wal else "mode=ro"
    conn = sqlite3.connect(f"file:{path}?{flags}", uri=True)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            return FileState(exists=True, revision=None)
        if "alembic_version" not in tables or not OUR_TABLES <= tables:
            listed = ", ".join(sorted(tables)[:5])
            raise NotOurDatabase(str(path), f"it holds other tables: {listed}")
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        if row is None:
            raise NotOurDatabase(str(path), "it has our tables but no schema revision")
    except sqlite3.DatabaseError as e:
        raise NotOurDatabase(str(path), f"SQLite cannot read it: {e}") from None
    finally:
        conn.close()
    return FileState(exists=True, revision=row[0])


def check_revision(label: str, revision: str | None) -> None:
    if revision == migrate.HEAD:
        return
    if revision in migrate.REVISIONS:
        raise SchemaTooOld(label, revision, migrate.HEAD)
    if revision is None:
        raise NotOurDatabase(label, "it has our tables but no schema revision")
    raise SchemaTooNew(label, revision)


def _install_sqlite_settings(engine: Engine, durability: Durability) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:
        # Hand transaction control to us: pysqlite's own BEGIN handling would defer the
        # write lock and break BEGIN IMMEDIATE.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")


def make_engine(location: Location, durability: Durability = "normal") -> Engine:
    if location.is_sqlite:
        # A store guards its one connection with a lock, so any thread may use it.
        engine = create_engine(location.url, connect_args={"check_same_thread": False})
        _install_sqlite_settings(engine, durability)
        return engine
    return create_engine(location.url)


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """One write transaction; on SQLite it holds the write lock from its first statement."""
    with engine.connect() as conn:
        conn.execution_options(sqlite_begin="IMMEDIATE")
        with conn.begin():
            yield conn


@contextmanager
def read_transaction(engine: Engine) -> Iterator[Connection]:
    """One consistent snapshot for several reads."""
    with engine.connect() as conn:
        with conn.begin():
            yield conn


def current_revision(conn: Connection) -> str | None:
    from sqlalchemy import inspect

    if "alembic_version" not in inspect(conn).get_table_names():
        return None
    return conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()


def open_engine(
    path_or_url: str | Path, *, durability: Durability = "normal", create: bool = True
) -> tuple[Engine, Location]:
    """Open a database at the head revision, creating it if it is new.

    Files at another revision are refused (``SchemaTooOld`` says to run ``migrate``), and so is
    any file that is not ours, before anything is written to it.
    """
    location = Location.parse(path_or_url)
    if location.is_sqlite and location.path is not None:
        state = inspect_sqlite_file(location.path)
        if state.revision is not None:
            check_revision(location.label, state.revision)
            return make_engine(location, durability), location  # the common case: no writes
        if not create and not state.exists:
            raise FileNotFoundError(f"{location.label}: no such database file")
        if not location.path.parent.exists():
            raise FileNotFoundError(f"{location.label}: folder {location.path.parent} does not exist")
    engine = make_engine(location, durability)
    with write_transaction(engine) as conn:
        revision = current_revision(conn)
        if revision is None:
            migrate.upgrade(conn, "head")
        else:
            check_revision(location.label, revision)
    return engine, location
