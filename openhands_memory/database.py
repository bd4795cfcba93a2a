"""Opening a database: judging the file before touching it, creating it, SQLite settings.

SQLite is set up for an agent's life: WAL (readers never block the writer), a busy timeout
(a second process waits instead of failing), foreign keys on, and every write in a
``BEGIN IMMEDIATE`` transaction (the write lock is taken up front, so a read-then-write such
as "next id = max + 1" can never race another process).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from . import migrate
from .errors import NotOurDatabase, SchemaTooNew, SchemaTooOld

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

Durability = Literal["normal", "full"]
SQLITE_MAGIC = b"SQLite format 3\x00"
OUR_TABLES = frozenset({"conversation", "event", "condensation", "forgotten_range"})
BUSY_TIMEOUT_MS = 30_000
PAGE_SIZE = 16_384
CACHE_KIB = 65_536


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

    @property
    def is_postgres(self) -> bool:
        return self.url.split("://", 1)[0].split("+")[0] in ("postgresql", "postgres")

    @property
    def sqlalchemy_url(self) -> str:
        """The URL for SQLAlchemy: PostgreSQL through psycopg 3."""
        if self.is_postgres:
            return "postgresql+psycopg://" + self.url.split("://", 1)[1]
        return self.url

    @property
    def driver_url(self) -> str:
        """The URL as the driver itself (psycopg) takes it: no SQLAlchemy dialect suffix."""
        scheme, rest = self.url.split("://", 1)
        return f"{scheme.split('+')[0]}://{rest}"


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


def connect(path: Path, durability: Durability = "normal") -> sqlite3.Connection:
    """A connection set up for an agent's life. Transactions are ours to begin (BEGIN IMMEDIATE
    for writes): pysqlite's implicit BEGIN would defer the write lock."""
    db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
    db.execute("PRAGMA foreign_keys=ON")
    # 64 MB of page cache (SQLite's default is 2 MB): the uid and batch indexes take random
    # keys, and re-reading their pages from the OS on every insert halves batched appends.
    db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
    return db


def make_engine(location: Location) -> "Engine":
    """A SQLAlchemy engine, for migrations (alembic speaks SQLAlchemy)."""
    from sqlalchemy import create_engine

    return create_engine(location.sqlalchemy_url)


def create_schema(location: Location) -> None:
    """Bring a new, empty database to the head revision, in one transaction."""
    from . import migrate

    engine = make_engine(location)
    try:
        with engine.begin() as conn:
            if location.is_sqlite:
                # Events average over 1 KB: 16 KB pages waste less space at the end of each
                # page and keep indexes shallower. Only a new file can still choose its size.
                conn.exec_driver_sql(f"PRAGMA page_size={PAGE_SIZE}")
            if current_revision(conn) is None:
                migrate.upgrade(conn, "head")
    finally:
        engine.dispose()


def current_revision(conn: "Connection") -> str | None:
    from sqlalchemy import inspect

    if "alembic_version" not in inspect(conn).get_table_names():
        return None
    return conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()


def open_location(path_or_url: str | Path, *, create: bool = True) -> Location:
    """Make sure a database is ours and at the head revision, creating it if it is new.

    Files at another revision are refused (``SchemaTooOld`` says to run ``migrate``), and so is
    any file that is not ours, before anything is written to it.
    """
    location = Location.parse(path_or_url)
    if not location.is_sqlite:
        if not location.is_postgres:
            raise NotOurDatabase(location.label, "only SQLite files and postgresql:// URLs are supported")
        return location  # judged on the recorder's own connection (judge_server)
    if location.path is None:
        raise NotOurDatabase(location.label, "give a file path or a postgresql:// URL")
    state = inspect_sqlite_file(location.path)
    if state.revision is not None:
        check_revision(location.label, state.revision)
    else:
        if not create and not state.exists:
            raise FileNotFoundError(f"{location.label}: no such database file")
        if not location.path.parent.exists():
            raise FileNotFoundError(f"{location.label}: folder {location.path.parent} does not exist")
        create_schema(location)
    return location


def judge_server(location: Location, conn: Any, *, create: bool = True) -> None:
    """Make sure a PostgreSQL database is ours and at the head revision, creating the schema
    in an empty one. ``conn``: an open psycopg connection (autocommit), used read-only."""
    row = conn.execute(
        "SELECT to_regclass('alembic_version') IS NOT NULL, "
        "ARRAY(SELECT table_name::text FROM information_schema.tables "
        "WHERE table_schema = current_schema() ORDER BY 1 LIMIT 6)"
    ).fetchone()
    has_revision, tables = row[0], list(row[1])
    if has_revision:
        found = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        check_revision(location.label, found[0] if found else None)
        return
    if tables:
        if OUR_TABLES & set(tables):
            raise NotOurDatabase(location.label, "it has our tables but no schema revision")
        raise NotOurDatabase(location.label, f"it holds other tables: {', '.join(tables[:5])}")
    if not create:
        raise FileNotFoundError(f"{location.label}: the database holds no openhands-memory schema")
    create_schema(location)
