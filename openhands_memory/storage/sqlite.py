"""The SQLite recorder: one file, WAL, writes in ``BEGIN IMMEDIATE``; and the read-only
query runner behind the ``sql`` command.

``BEGIN IMMEDIATE`` takes the file's write lock up front, so "next id = MAX(id) + 1" cannot
race another process. ``PRAGMA data_version`` changes when another connection commits, which
is how a view cache learns that it must read again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

from .. import database, sqlite_file
from ..errors import LockTimeout, MultipleStatements, QueryError, QueryTimeout, ReadOnlyViolation
from . import search, search_waiting
from .recorder import Datastore, QueryResult, wait_millis
from .session import IntegrityViolation, Session


#: SQLite's page cache while a long view's rows are read (``Session.run_streaming``'s
#: ``once``): read once, in order, they would fill the connection's 64 MB cache (evicting the
#: index pages appends use) and add as much to the process (measured: 402 against 339 MB
#: peak for a 100k-event view).
ONCE_CACHE_KIB = 2048


#: A new file's written pages are handed to the disk each time this many payload bytes have
#: been inserted (``sqlite_file.Writeback``).
WRITEBACK_BYTES = 256 << 20

#: The worker threads, and the page cache (KiB), with which indexes built after a bulk load
#: sort their keys (``SqliteSession.build_indexes``).
SORT_THREADS = min(4, os.cpu_count() or 1)
SORT_CACHE_KIB = 8192


class SqliteSession(Session):
    def __init__(self, conn: sqlite3.Connection, writeback: sqlite_file.Writeback | None = None):
        super().__init__(conn)
        # A file being built (durability "build"): its pages are handed to the disk as rows
        # come in, not left to pile up in the page cache.
        self._writeback = writeback
        self._unwritten = 0

    def insert_events(self, rows: Sequence[tuple[Any, ...]]) -> None:
        super().insert_events(rows)
        if self._writeback is not None:
            self._unwritten += sum(len(row[-1]) for row in rows)
            if self._unwritten >= WRITEBACK_BYTES:
                self._unwritten = 0
                self._writeback.start()

    def build_indexes(self, statements: Sequence[str]) -> None:
        # SQLite sorts an index's keys with worker threads only when its temporary files are
        # files (with temp_store=MEMORY it sorts in one thread), and it cuts them into runs
        # no larger than the page cache, which the threads sort side by side: with the
        # cache at 8 MB, a million SDK events' two deferred indexes took 1.2 s, against 2.7
        # in one 64 MB run (the runs go to sqlite_file.temp_folder(), unlinked as they are
        # opened; a full folder there fails the write, which names it: ``sqlite_file.fault``). The
        # settings are changed inside the load's transaction, which uses no temporary table.
        if not statements:
            return
        try:
            self.conn.execute("PRAGMA temp_store=FILE")
        except sqlite3.OperationalError:  # the temporary database is in use: sort in memory
            super().build_indexes(statements)
            return
        self.conn.execute(f"PRAGMA threads={SORT_THREADS}")
        self.conn.execute(f"PRAGMA cache_size=-{SORT_CACHE_KIB}")
        try:
            super().build_indexes(statements)
        finally:
            self.conn.execute(f"PRAGMA cache_size=-{database.CACHE_KIB}")
            self.conn.execute("PRAGMA threads=0")
            with contextlib.suppress(sqlite3.OperationalError):
                self.conn.execute("PRAGMA temp_store=MEMORY")

    def _stream(self, statements: Sequence[tuple[str, Sequence[Any]]], once: bool) -> Iterator[tuple]:
        if not once:
            yield from super()._stream(statements, once)
            return
        self.conn.execute(f"PRAGMA cache_size=-{ONCE_CACHE_KIB}")
        try:
            yield from super()._stream(statements, once)
        finally:
            self.conn.execute(f"PRAGMA cache_size=-{database.CACHE_KIB}")

    def touch(self, cid: str) -> Any:
        # Our own commit leaves data_version as it is, and while this transaction holds the
        # write lock nobody else can commit: the value now is the value after our commit.
        return self.conn.execute("PRAGMA data_version").fetchone()[0]

    def file_problems(self, full: bool) -> list[str]:
        if not full:
            return []
        found = [r[0] for r in self.conn.execute("PRAGMA integrity_check")]
        problems = [] if found == ["ok"] else ["integrity: " + "; ".join(found[:5])]
        broken = self.conn.execute("PRAGMA foreign_key_check").fetchall()
        if broken:
            tables = ", ".join(sorted({r[0] for r in broken}))
            problems.append(f"foreign keys: {len(broken)} row(s) point at missing rows (tables: {tables})")
        return problems + search.problems(self.conn) + search_waiting.problems(self.execute, "sqlite")

    def translate(self, error: Exception) -> None:
        if isinstance(error, sqlite3.IntegrityError):
            raise IntegrityViolation(str(error)) from None


def _busy(error: sqlite3.OperationalError) -> bool:
    """Whether SQLite gave up waiting for a lock another connection holds (SQLITE_BUSY and
    its extended codes)."""
    return (getattr(error, "sqlite_errorcode", 0) & 0xFF) == sqlite3.SQLITE_BUSY


class SqliteRecorder(Datastore):
    backend = "sqlite"

    def __init__(self, path: Path, *, durability: database.Durability = "normal", readonly: bool = False):
        super().__init__()
        self.label = str(path)
        self.path = path
        self.readonly = readonly
        self._wrote = False  # a write began: close() must see the WAL copied into the file
        self._closed = False
        # Read-only: a query-only connection that is safe beside writers and leaves no files
        # behind (see database.connect_readonly).
        self.conn = database.connect_readonly(path) if readonly else database.connect(path, durability)
        self._writeback = sqlite_file.Writeback(path) if durability == "build" else None
        self._session = SqliteSession(self.conn, self._writeback)

    def session(self) -> Session:
        return self._session

    def _begin_write(self, session: Session, conversation_id: str | None, timeout: float | None = None) -> None:
        self._wrote = True
        if timeout is None:
            try:
                self.conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as e:
                if not _busy(e):
                    raise
                waited = self.conn.execute("PRAGMA busy_timeout").fetchone()[0] / 1000
                raise LockTimeout(self.label, conversation_id, waited) from None
            return
        # The write lock is waited for by SQLite's busy handler, for as long as busy_timeout
        # says: set to this wait for the BEGIN alone, then back to the connection's own
        # (which every other statement keeps), so that a longer wait is not cut short by it
        # and a shorter one does not sit it out.
        configured = self.conn.execute("PRAGMA busy_timeout").fetchone()[0]
        self.conn.execute(f"PRAGMA busy_timeout={wait_millis(timeout)}")
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            if not _busy(e):
                raise
            raise LockTimeout(self.label, conversation_id, timeout) from None
        finally:
            self.conn.execute(f"PRAGMA busy_timeout={configured}")

    @contextlib.contextmanager
    def writing(self, conversation_id: str | None = None, *, large: bool = False,
                timeout: float | None = None) -> Iterator[Session]:
        """As ``Datastore.writing``; a full disk or a read-only place is the library's one-line
        error (the transaction was rolled back: nothing was written)."""
        # The connection keeps statement journals in memory (database.connect), and a
        # statement journals every page it frees: dropping a 1M-event search index held
        # 545 MB. A large write keeps them in a temporary file (set outside the transaction:
        # within one, SQLite keeps the journal where it began).
        if large:
            self.conn.execute("PRAGMA temp_store=FILE")
        try:
            with super().writing(conversation_id, timeout=timeout) as session:
                yield session
        except sqlite3.Error as e:
            found = sqlite_file.fault(e, self.path, "the write was rolled back: nothing was written")
            if found is None:
                raise
            # A COMMIT that failed for lack of space may leave the transaction open.
            with contextlib.suppress(sqlite3.Error):
                self._rollback(self._session)
            raise found from None
        finally:
            if large:
                self.conn.execute("PRAGMA temp_store=MEMORY")

    def _begin_read(self, session: Session) -> None:
        self.conn.execute("BEGIN")

    def _commit(self, session: Session) -> None:
        self.conn.execute("COMMIT")

    def _rollback(self, session: Session) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    def version(self, conversation_id: str) -> Any:
        with self._lock:
            return self.conn.execute("PRAGMA data_version").fetchone()[0]

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the connection; after a write, first copy the WAL into the file and say so if
        that fails (``close()`` alone would swallow the failure; the WAL keeps the data)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._wrote and not self.conn.in_transaction:  # (an open one is rolled back)
                    sqlite_file.checkpoint(self.conn, self.path)
            finally:
                self.conn.close()
                if self._writeback is not None:  # only now: its descriptor's close drops locks
                    self._writeback.close()


# --- read-only queries --------------------------------------------------------------------
# Two locks, each enough on its own for the common cases: ``PRAGMA query_only=ON`` on the
# connection (``database.connect_readonly``); and an authorizer that SQLite consults while it
# compiles each statement denies every action that writes, ATTACH/DETACH, and any PRAGMA other
# than the read-only ones listed below (and those only without a value).

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


MAX_VALUE_BYTES = 100_000_000  # SQLITE_LIMIT_LENGTH: no string or blob may grow past this
_PROGRESS_STEPS = 10_000  # virtual-machine steps between two looks at the clock


def read_only_query(path: Path, query: str, *, timeout: float, max_rows: int) -> QueryResult:
    """Run one statement that cannot write on the file at ``path`` (see ``QueryResult``).

    The statement stops after ``timeout`` seconds, and at Ctrl-C: a progress handler looks at
    the clock and at a pending interrupt every few thousand steps of SQLite's virtual machine.
    No string or blob may grow past ``MAX_VALUE_BYTES`` (``printf('%.*c', 1e9, 'x')``).
    """
    conn = database.connect_readonly(path)
    guard = Guard()
    conn.set_authorizer(guard)
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    deadline = time.monotonic() + timeout
    stop: list[str] = []

    def progress() -> int:
        if not stop and time.monotonic() > deadline:
            stop.append("timeout")
        return 1 if stop else 0

    # Python raises KeyboardInterrupt only between bytecodes, and one raised inside the
    # progress handler is swallowed by sqlite3: the handler interrupts the statement instead.
    def on_sigint(_signum: int, _frame: Any) -> None:
        stop.append("interrupt")
        conn.interrupt()

    conn.set_progress_handler(progress, _PROGRESS_STEPS)
    previous = _install_sigint(on_sigint)
    try:
        cursor = conn.execute(query)
        rows = cursor.fetchmany(max_rows + 1)
    except (sqlite3.Warning, sqlite3.ProgrammingError) as e:  # more than one statement
        raise MultipleStatements(f"give one SQL statement at a time ({e})") from None
    except sqlite3.DatabaseError as e:
        if stop and stop[0] == "interrupt":
            raise KeyboardInterrupt from None
        if stop:
            raise QueryTimeout(timeout) from None
        if guard.refused is not None or statement_name(query) is not None:
            # (SQLite refuses some writes itself before asking the authorizer, e.g. to
            # sqlite_master: named the same way.)
            what = statement_name(query) or guard.refused
            raise ReadOnlyViolation(f"sql is read-only: {what} is not allowed") from None
        if "too big" in str(e):
            raise QueryError(f"SQL error: {e} (a value may hold at most {MAX_VALUE_BYTES:,} bytes)") from None
        raise QueryError(f"SQL error: {e}") from None
    finally:
        _install_sigint(previous)
        conn.close()
    header = [d[0] for d in cursor.description or []]
    return QueryResult(header, rows[:max_rows], len(rows) > max_rows)


def _install_sigint(handler: Any) -> Any:
    """Set the SIGINT handler (main thread only; elsewhere Ctrl-C is not ours to catch)."""
    if handler is None or threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, handler)
