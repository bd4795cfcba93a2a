"""Opening a database: judging the file before touching it, creating it, SQLite settings.

SQLite is set up for an agent's life: WAL (readers never block the writer), a busy timeout
(a second process waits instead of failing), foreign keys on, and every write in a
``BEGIN IMMEDIATE`` transaction (the write lock is taken up front, so a read-then-write such
as "next id = max + 1" can never race another process).
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Literal
from urllib.parse import quote

from . import migrate, sqlite_file
from .location import (  # noqa: F401  (their home was this module: the names stay importable here)
    CONNECT_TIMEOUT,
    KEEPALIVES,
    Location,
    connect_timeout_of,
    connection_params,
    without_password,
)
from .errors import (
    BrokenLink,
    ConnectTimeout,
    DatabaseUnreachable,
    DiskFull,
    NotOurDatabase,
    OpenHandsMemoryError,
    ReadOnlyPlace,
    PostgresUnavailable,
    SchemaTooNew,
    SchemaTooOld,
    SeveralRevisions,
    StorageFault,
    TooManyConnections,
)

if TYPE_CHECKING:
    from types import ModuleType

    from sqlalchemy.engine import Connection, Engine

#: "normal": WAL, synced at checkpoints (a power cut may lose the last commits, never
#: corrupt the file); "full": every commit synced; "scratch": never synced, for a database
#: thrown away after use (a replay's): a power cut may corrupt it; "build": a new file that
#: no other connection opens until it is complete (``building``): a rollback journal instead
#: of the WAL, so that each page is written once, into the file (a WAL writes it twice: into
#: the WAL, then into the file at the checkpoint; a 1M-event import spent 8 s of 22 in its
#: commit), and never synced (``sqlite_file.seal`` syncs the file once, before it is
#: published, and switches it to WAL). A transaction still rolls back as in WAL.
Durability = Literal["normal", "full", "scratch", "build"]
OUR_TABLES = frozenset({"conversation", "event", "condensation", "forgotten_range"})
BUSY_TIMEOUT_MS = 30_000
PAGE_SIZE = 16_384
CACHE_KIB = 65_536


def psycopg_module(location: Location) -> ModuleType:
    """psycopg 3, which a PostgreSQL database needs; without it, one line saying what to
    install (not an ImportError traceback)."""
    try:
        import psycopg
    except ImportError:
        raise PostgresUnavailable(location.label) from None
    return psycopg


def connect_server(location: Location) -> Any:
    """A psycopg connection (autocommit) to a PostgreSQL database, with a connect timeout and
    TCP keepalives (``connection_params``); a server that cannot be reached or does not
    answer in time, or a database that does not exist, is one line naming it and libpq's
    reason.

    Nothing of ours outlives a transaction on it, so that it works through a pooler in
    transaction mode (PgBouncer's, a managed service's), which hands the server's session
    to another client after each transaction: no start-up ``options`` (PgBouncer refuses the
    parameter), no prepared statements (``prepare_threshold=None``: psycopg would otherwise
    prepare a statement run five times, by a name the next client of that server session
    may prepare too) until the recorder knows the session is the server's own. The settings
    a transaction needs are set in it (``SET LOCAL``)."""
    psycopg = psycopg_module(location)
    extra = connection_params(location.driver_url)
    try:
        return psycopg.connect(location.driver_url, autocommit=True, prepare_threshold=None, **extra)
    except psycopg.OperationalError as e:
        if isinstance(e, psycopg.errors.ConnectionTimeout) or str(e).startswith("connection timeout expired"):
            raise ConnectTimeout(location.label, connect_timeout_of(location.driver_url)) from None
        # libpq: 'connection failed: connection to server at "h", port 5432 failed: FATAL:
        # database "x" does not exist', then hints on further lines; the label names the
        # host and port already, so the reason is what follows the last "failed: ".
        first = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
        reason = first.rsplit(" failed: ", 1)[-1].strip().removeprefix("FATAL:").strip()
        if any(sign in reason for sign in TooManyConnections.SIGNS):
            raise TooManyConnections(location.label, reason) from None
        raise DatabaseUnreachable(location.label, reason) from None


@dataclass(frozen=True)
class FileState:
    """What a file holds before we open it for writing."""

    exists: bool
    revision: str | None  # None: no schema yet (a new or empty file)


#: Every row of alembic_version (one, in a database of ours).
REVISION_ROWS = "SELECT version_num FROM alembic_version ORDER BY version_num"
#: The same on a server, each row with the id of the server process that answered.
SERVER_REVISION_ROWS = "SELECT version_num, pg_backend_pid() FROM alembic_version ORDER BY version_num"


@dataclass(frozen=True)
class ServerJudged:
    """What ``judge_server`` found: ``create``, the database is empty and the caller makes
    its schema; ``backend_pid``, the id of the server process that answered (None when no
    row said), which is the one libpq was told at the start (``conn.info.backend_pid``) only
    when the connection is the server's own session, not a pooler's."""

    create: bool
    backend_pid: int | None = None


def the_revision(label: str, rows: list[Any]) -> str | None:
    """The one revision ``alembic_version``'s ``rows`` hold (None: none). Two rows are refused,
    not read as the first: alembic would stamp one and leave the other."""
    if len(rows) > 1:
        raise SeveralRevisions(label, [str(r[0]) for r in rows])
    return rows[0][0] if rows else None


def inspect_sqlite_file(path: Path) -> FileState:
    """Judge a file read-only. Refuse anything that is not ours without changing a byte."""
    broken = sqlite_file.broken_link(path)
    if broken is not None:
        raise BrokenLink(str(path), broken)
    if path.is_dir():  # before the size test: some file systems report 0 for a folder
        raise NotOurDatabase(str(path), "it is a directory")
    if path.exists() and not path.is_file():  # /dev/zero reports 0 bytes, and never ends
        raise NotOurDatabase(str(path), "it is not a regular file")
    if not path.exists() or path.stat().st_size == 0:
        return FileState(exists=path.exists(), revision=None)
    before = sqlite_file.companions(path)
    try:
        # Read by SQLite, never by a descriptor of ours (``has_sqlite_header`` says why).
        if not sqlite_file.has_sqlite_header(path):
            raise NotOurDatabase(str(path), "it is not an SQLite file")
    except sqlite3.Error as e:
        raise opening_fault(e, path) or NotOurDatabase(str(path), f"SQLite cannot read it: {e}") from None
    conn = connect_readonly(path)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            return FileState(exists=True, revision=None)
        if "alembic_version" not in tables or not OUR_TABLES <= tables:
            listed = ", ".join(sorted(tables)[:5])
            raise NotOurDatabase(str(path), f"it holds other tables: {listed}")
        revision = the_revision(str(path), conn.execute(REVISION_ROWS).fetchall())
        if revision is None:
            raise NotOurDatabase(str(path), "it has our tables but no schema revision")
    except sqlite3.DatabaseError as e:
        conn.close()
        found = opening_fault(e, path)
        if isinstance(found, DiskFull):
            sqlite_file.remove_failed_companions(path, before)
        raise found or NotOurDatabase(str(path), f"SQLite cannot read it: {e}") from None
    finally:
        conn.close()
    return FileState(exists=True, revision=revision)


READ_OUTCOME = "nothing was changed"


def opening_fault(error: BaseException, path: Path) -> OpenHandsMemoryError | None:
    """What stopped SQLite from opening a file of ours, when the file is not to blame: a full
    disk (SQLite needs room for the -shm index it keeps beside a WAL file, even to read), or a
    read-only place."""
    if sqlite_file.is_disk_full(error, path):
        return DiskFull(str(path), f"SQLite needs room beside it for its -shm file, even to read it; {READ_OUTCOME}")
    return sqlite_file.fault(error, path, READ_OUTCOME)


def connect_readonly(path: Path) -> sqlite3.Connection:
    """A connection that reads ``path`` and cannot change it, safe beside writers.

    It takes part in SQLite's locking like any reader, so a writer that starts meanwhile
    can neither make it see a torn file ("database disk image is malformed") nor stale
    data; ``immutable=1`` would allow both. Writes are refused by ``query_only``.

    A WAL database needs ``-wal`` and ``-shm`` beside it while it is open, which a reader may
    have to create (SQLite's "WAL read-only" rules). How it opens, by what the place allows:

    * the folder is writable: read-write when the file is (the last connection to close
      removes both files, as SQLite does for any writer), else ``mode=ro`` (SQLite may then
      leave the two files behind if it had to create them);
    * the folder is not writable (or the mount is read-only), both files exist: they are
      used as they are (read-write when all three are writable, else ``mode=ro``): a writer
      may be at work;
    * the folder is not writable and there is no ``-shm``: no writer can be at work (it could
      not create one). With no WAL, or an empty one, the file alone is the database and is
      read ``immutable``. A WAL that holds data needs a ``-shm`` SQLite cannot make there:
      ``ReadOnlyPlace`` says so (reading the file alone would miss what the WAL holds).
    """
    resolved = path.resolve()
    base = f"file:{quote(str(resolved))}"
    wal, shm = sqlite_file.wal_of(resolved), sqlite_file.shm_of(resolved)
    writable = os.access(resolved, os.W_OK)
    if sqlite_file.folder_writable(resolved):
        uri = base if writable else f"{base}?mode=ro"
    elif wal.exists() and shm.exists():
        uri = base if writable and os.access(wal, os.W_OK) and os.access(shm, os.W_OK) else f"{base}?mode=ro"
    elif wal.exists() and wal.stat().st_size > 0:
        raise ReadOnlyPlace(
            str(path), f"{sqlite_file.read_only_reason(path) or 'the folder is read-only'}, and the file's WAL ({path}-wal) holds data "
            "SQLite reads only with a -shm file beside it, which cannot be created there; make the folder "
            "writable, or copy the file and its -wal elsewhere", READ_OUTCOME)
    else:
        uri = f"{base}?immutable=1"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA query_only=ON")
    except BaseException:
        conn.close()
        raise
    return conn


def revision_of(location: Location) -> tuple[bool, str | None]:
    """(whether the database exists, its revision or None when it has no schema)."""
    if location.path is not None:
        state = inspect_sqlite_file(location.path)
        return state.exists, state.revision
    with connect_server(location) as conn:
        if conn.execute("SELECT to_regclass('alembic_version')").fetchone()[0] is None:
            return True, None
        return True, the_revision(location.label, conn.execute(REVISION_ROWS).fetchall())


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
    try:
        db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        db.execute("PRAGMA journal_mode=DELETE" if durability == "build" else "PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={ {'full': 'FULL', 'scratch': 'OFF', 'build': 'OFF'}.get(durability, 'NORMAL') }")
        db.execute("PRAGMA foreign_keys=ON")
        # A statement that fires triggers (the search index's) keeps a statement journal, in a
        # temporary file by default: one file created, written and removed per append, which
        # cost more than the append itself. In memory it costs a few microseconds.
        db.execute("PRAGMA temp_store=MEMORY")
        # 64 MB of page cache (SQLite's default is 2 MB): the uid and batch indexes take random
        # keys, and re-reading their pages from the OS on every insert halves batched appends.
        db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        if not os.access(path, os.W_OK):  # SQLite would open it read-only without a word
            raise ReadOnlyPlace(str(path), sqlite_file.read_only_reason(path) or "it is read-only", "nothing was written")
    except sqlite3.Error as e:
        db.close()
        raise sqlite_file.fault(e, path, "nothing was written") or e from None
    except BaseException:
        db.close()
        raise
    return db


def make_engine(location: Location) -> "Engine":
    """A SQLAlchemy engine, for migrations (alembic speaks SQLAlchemy)."""
    from sqlalchemy import create_engine

    if location.is_postgres:
        psycopg_module(location)  # SQLAlchemy's own error would be a traceback
    return create_engine(location.sqlalchemy_url, connect_args=location.connect_args)


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


@dataclass
class Build:
    """A new database being built at ``path`` (a temporary name beside its final one).
    ``expected``: what the builder committed, counted before it closed its connection; the
    sealed file must hold exactly that (see ``sqlite_file.seal``)."""

    path: Path
    expected: sqlite_file.Contents | None = None

    def written_by(self, conn: sqlite3.Connection) -> None:
        """Count what ``conn`` (the builder's connection, still open) committed."""
        self.expected = sqlite_file.count(conn)


@contextmanager
def building(path: Path) -> Iterator[Build]:
    """A temporary path beside ``path`` to build a new database in; when the block ends
    without an error the file is sealed (its WAL checkpointed into it, verified, fsynced) and
    put at ``path`` whole (``sqlite_file.publish``), otherwise removed with its WAL.

    Whatever happens (an error, a full disk, a kill), ``path`` either does not exist or holds
    the finished database: never an empty, half-made or malformed file. The caller closes its
    connections to the temporary file before the block ends; a close that failed to
    checkpoint has left the WAL, which ``seal`` checkpoints again or refuses.
    """
    from .files import sibling

    tmp = sibling(path, "building")
    nothing = f"nothing was written ({path} was not created)"
    if not sqlite_file.folder_writable(path):
        raise ReadOnlyPlace(str(path), sqlite_file.read_only_reason(path) or "it is read-only", nothing)
    try:
        build = Build(tmp)
        yield build
        sqlite_file.seal(tmp, path, build.expected)
        sqlite_file.publish(tmp, path)
    except Exception as e:  # SQLAlchemy's wrapper too (a schema created in the build)
        # An OSError of the builder's own (an unreadable input) is not about this file.
        foreign = isinstance(e, OSError) and not sqlite_file.is_disk_full(e)
        found = None if foreign else sqlite_file.fault(e, path, nothing)
        if found is None:
            raise
        raise found from None
    finally:
        sqlite_file.remove_database_files(tmp)


def backup(path: Path, revision: str) -> Path:
    """A complete copy of the database at ``path`` (its WAL's content included: SQLite's
    backup API), named ``DB.bak-<revision>-<UTC time>`` beside it, never overwriting an
    earlier backup.

    The copy is made under a temporary name, checked (``quick_check``), fsynced, and only then
    given its final name: a killed or failed backup never leaves a file named like a complete
    one, and a failure removes the partial copy (a full disk is ``DiskFull``).
    """
    from datetime import datetime, timezone

    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    tmp = path.with_name(f".{path.name}.bak-{revision}-{stamp}.{os.getpid()}-{uuid.uuid4().hex[:8]}.partial")
    nothing = "no backup was made and nothing was changed"
    try:
        source = connect_readonly(path)
        try:
            copy = sqlite3.connect(str(tmp), isolation_level=None)
            try:
                source.backup(copy)
                found = [r[0] for r in copy.execute("PRAGMA quick_check")]
            finally:
                copy.close()
        finally:
            source.close()
        if found != ["ok"]:
            raise StorageFault(f"{path}: the backup copy failed SQLite's check ({'; '.join(found[:3])}); {nothing}")
        sqlite_file.fsync(tmp)
        n = 0
        while True:
            target = path.with_name(f"{path.name}.bak-{revision}-{stamp}" + (f"-{n}" if n else ""))
            try:
                os.link(tmp, target)  # never replaces an earlier backup
                break
            except FileExistsError:
                n += 1
        sqlite_file.fsync_folder(path.parent)
        return target
    except (sqlite3.Error, OSError) as e:
        raise (sqlite_file.fault(e, path, nothing) or e) from None
    finally:
        sqlite_file.remove_database_files(tmp)


def open_location(path_or_url: str | Path, *, create: bool = True) -> Location:
    """Make sure a database is ours and at the head revision, creating it if it is new.

    Files at another revision are refused (``SchemaTooOld`` says to run ``migrate``), and so is
    any file that is not ours, before anything is written to it.

    A new file is built beside its path and linked into place once its schema is complete,
    so a process killed while creating it leaves no file at the path, never an empty one. An
    existing empty (0-byte) file, as ``touch`` or ``mktemp`` leave, is taken as a new
    database and its schema created in place, in one transaction.
    """
    location = Location.parse(path_or_url)
    if not location.is_sqlite:
        if not location.is_postgres:
            raise NotOurDatabase(location.label, "only SQLite files and postgresql:// URLs are supported")
        psycopg_module(location)
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
        if state.exists:
            try:
                create_schema(location)
            except Exception as e:  # SQLAlchemy's wrapper of the driver's error
                found = sqlite_file.fault(e, location.path, "the schema was rolled back: nothing was written")
                if found is None:
                    raise
                raise found from None
        else:
            try:
                with building(location.path) as build:
                    create_schema(Location.parse(build.path))
            except FileExistsError:  # another process created it meanwhile: open theirs
                return open_location(path_or_url, create=False)
    return location


def judge_server(location: Location, conn: Any, *, create: bool = True) -> ServerJudged:
    """Make sure a PostgreSQL database is ours and at the head revision; ``create`` when it is
    empty and ``create`` allows making the schema there, which the caller does then
    (``create_schema``: alembic's own connection, so the caller closes ``conn`` first and a
    store never holds two). ``conn``: an open psycopg connection (autocommit), used read-only.

    One statement for a database of ours: reading ``alembic_version`` outright. Asking the
    catalog first (``information_schema.tables``) cost a fresh connection several
    milliseconds, more than the whole view it opens the database for; the catalog is asked
    only when there is no such table (a new, empty or foreign database)."""
    import psycopg

    try:
        found = conn.execute(SERVER_REVISION_ROWS).fetchall()
    except psycopg.errors.UndefinedTable:
        pass  # autocommit: the failed statement left no transaction behind
    else:
        check_revision(location.label, the_revision(location.label, found))
        return ServerJudged(False, found[0][1] if found else None)
    row = conn.execute(
        "SELECT to_regclass('alembic_version') IS NOT NULL, "
        "ARRAY(SELECT table_name::text FROM information_schema.tables "
        "WHERE table_schema = current_schema() ORDER BY 1 LIMIT 6)"
    ).fetchone()
    has_revision, tables = row[0], list(row[1])
    if has_revision:
        found = conn.execute(SERVER_REVISION_ROWS).fetchall()
        check_revision(location.label, the_revision(location.label, found))
        return ServerJudged(False, found[0][1] if found else None)
    if tables:
        if OUR_TABLES & set(tables):
            raise NotOurDatabase(location.label, "it has our tables but no schema revision")
        raise NotOurDatabase(location.label, f"it holds other tables: {', '.join(tables[:5])}")
    if not create:
        raise FileNotFoundError(f"{location.label}: the database holds no openhands-memory schema")
    return ServerJudged(True)
