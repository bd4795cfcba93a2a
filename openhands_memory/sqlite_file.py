"""The SQLite file on disk: what the file system refused, said plainly; a built file made
whole, verified and put in place durably; a backup that is complete or absent.

SQLite hides two faults that lose data unless someone looks: closing a connection runs a
checkpoint (copying the WAL into the file) and ignores its failure, and a full disk makes that
checkpoint fail after every commit succeeded. The WAL then holds what was committed; SQLite
keeps it, and so must we: a built file is published only once the WAL is empty and the file
alone holds what was committed (``seal``).
"""

from __future__ import annotations

import errno
import functools
import os
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from urllib.parse import quote

from .errors import DiskFull, OpenHandsMemoryError, ReadOnlyPlace, StorageFault, TemporaryFolderFull

#: SQLite's smallest page: a database that holds anything is at least one page long.
MIN_PAGE_SIZE = 512
# SQLite's primary result codes (an extended code keeps its primary one in the low byte).
SQLITE_READONLY = 8
SQLITE_IOERR = 10
SQLITE_CORRUPT = 11
SQLITE_FULL = 13
SQLITE_CANTOPEN = 14
SQLITE_NOTADB = 26
_SEAL_BUSY_MS = 5_000  # a built file has no other connection; this only bounds a surprise


def sqlite_code(error: BaseException) -> int | None:
    """SQLite's primary result code behind ``error`` (SQLAlchemy's wrapper included)."""
    error = getattr(error, "orig", None) or error
    code = getattr(error, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def is_disk_full(error: BaseException, path: Path | str | None = None) -> bool:
    """``error`` came from a full disk. SQLite says so (SQLITE_FULL) for its own files, but
    only "disk I/O error" when the -shm index it maps cannot get its pages: with ``path``,
    such an error counts when the file system has less than ``LOW_SPACE`` free."""
    if isinstance(error, OSError):
        return error.errno in (errno.ENOSPC, errno.EDQUOT)
    code = sqlite_code(error)
    return code == SQLITE_FULL or (code == SQLITE_IOERR and path is not None and low_on_space(Path(path)))


LOW_SPACE = 1 << 20


def low_on_space(path: Path) -> bool:
    try:
        st = os.statvfs(path.parent)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < LOW_SPACE


def temp_folder() -> Path:
    """Where SQLite puts its temporary files on Unix (``unixTempFileDir``): the first of
    these that is a folder it may write to."""
    for candidate in (os.environ.get("SQLITE_TMPDIR"), os.environ.get("TMPDIR"), "/var/tmp", "/usr/tmp", "/tmp"):
        if candidate and os.path.isdir(candidate) and os.access(candidate, os.W_OK | os.X_OK):
            return Path(candidate)
    return Path(".")


def fault(error: BaseException, path: Path | str, outcome: str) -> StorageFault | None:
    """The library's error for a file-system fault behind ``error`` (None: not one).
    ``outcome`` says what became of the write: "nothing was written", ..."""
    if isinstance(error, TemporaryFolderFull):  # said again with this caller's outcome
        return TemporaryFolderFull(error.folder, str(path), outcome)
    if isinstance(error, DiskFull):
        return DiskFull(str(path), outcome)
    if is_disk_full(error, path):
        # The file's own disk has room (its files still hold what they took): what filled up
        # is where SQLite keeps a large write's journal or a bulk load's sorts, which it has
        # removed by now.
        temp = temp_folder()
        if not low_on_space(Path(path)) and not _same_device(temp, Path(path).parent):
            return TemporaryFolderFull(str(temp), str(path), outcome)
        return DiskFull(str(path), outcome)
    code = sqlite_code(error)
    refused = isinstance(error, OSError) and error.errno in (errno.EROFS, errno.EACCES, errno.EPERM)
    if isinstance(error, ReadOnlyPlace) or refused or code in (SQLITE_READONLY, SQLITE_CANTOPEN):
        reason = read_only_reason(Path(path))
        if reason is None and code == SQLITE_CANTOPEN:
            return None  # not a read-only place: SQLite's own words say more
        return ReadOnlyPlace(str(path), reason or "SQLite could not write to it", outcome)
    return None


def _same_device(a: Path, b: Path) -> bool:
    try:
        return os.stat(a).st_dev == os.stat(b).st_dev
    except OSError:
        return True  # cannot tell: blame the file's own disk, as before


def folder_writable(path: Path) -> bool:
    """New files can be made beside ``path`` (the folder's permissions and its mount)."""
    return os.access(path.parent, os.W_OK)


def read_only_reason(path: Path) -> str | None:
    """Why ``path`` cannot be written, as far as the file system says (None: it can)."""
    folder = path.parent
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return f"it is on a read-only file system ({folder})"
    except OSError:
        pass
    if path.exists() and not os.access(path, os.W_OK):
        return "the file is read-only"
    if not os.access(folder, os.W_OK):
        return f"the folder {folder} is read-only"
    return None


def broken_link(path: Path) -> str | None:
    """What is wrong with ``path`` as a symbolic link that leads to no file (None: it is not
    one): a loop (a self-link included), or a link to a missing target."""
    try:
        os.stat(path)
        return None
    except FileNotFoundError:
        if not path.is_symlink():
            return None  # a plain missing path: a new database, maybe
        return f"a dangling symbolic link to {os.readlink(path)}, which does not exist"
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "a symbolic link loop" + (f" (it points to {os.readlink(path)})" if path.is_symlink() else "")
        return None  # other errors are told where the file is opened


def has_sqlite_header(path: Path) -> bool:
    """Whether the non-empty file ``path`` starts with SQLite's header, read by SQLite itself.

    Never through a descriptor of our own: on POSIX, closing *any* descriptor of a file drops
    every lock the process holds on it, the shared lock by which SQLite's open connections
    tell other processes that the WAL is in use among them; the next process to close the
    file would then delete a WAL still being written (SQLite's "How To Corrupt An SQLite
    Database File", 2.2). SQLite's own descriptors know of each other: one closed while
    another connection of the process holds a lock is kept open until that lock goes.
    ``immutable``: no lock, no journal or WAL is read or rolled back (a foreign file beside a
    stray -journal is never written to). A file shorter than SQLite's smallest page is no
    database, and SQLite would take it for an empty one, so it is judged by its size.
    Raises ``sqlite3.Error`` for what stops SQLite from reading the file at all."""
    if path.stat().st_size < MIN_PAGE_SIZE:
        return False
    conn = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1", uri=True)
    try:
        conn.execute("PRAGMA schema_version").fetchone()  # reads the header (page 1)
    except sqlite3.DatabaseError as e:
        if sqlite_code(e) == SQLITE_NOTADB:
            return False
        # SQLite checks the magic first; what it then finds amiss may be mended by a WAL
        # the immutable read ignores (a page count past the file's end after a checkpoint
        # that ran out of space): judging the database whole is the caller's next step.
        if sqlite_code(e) != SQLITE_CORRUPT:
            raise
    finally:
        conn.close()
    return True


def wal_of(path: Path) -> Path:
    return Path(f"{path}-wal")


def shm_of(path: Path) -> Path:
    return Path(f"{path}-shm")


def checkpoint(conn: sqlite3.Connection, path: Path) -> None:
    """Copy what the WAL holds into the file, and raise if that fails (``DiskFull``, with
    ``committed`` set: the WAL, which SQLite keeps, holds what was committed), where
    ``close()`` would swallow the failure. PASSIVE does not wait: frames a reader still needs
    are left for a later checkpoint, which is no fault."""
    try:
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    except sqlite3.Error as e:
        found = fault(e, path, f"every write this command made was committed and is safe in {wal_of(path)}, "
                               f"but could not be copied into {path}; any later command on it finishes "
                               "the copy once there is space")
        if found is None:
            raise
        found.committed = True
        raise found from None


@dataclass(frozen=True)
class Contents:
    """What a database holds, counted: a built file must hold exactly this once sealed."""

    conversations: int
    events: int


def count(conn: sqlite3.Connection) -> Contents:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "event" not in tables:
        return Contents(0, 0)
    conversations = conn.execute("SELECT COUNT(*) FROM conversation").fetchone()[0]
    return Contents(conversations, conn.execute("SELECT COUNT(*) FROM event").fetchone()[0])


def seal(built: Path, label: Path, expected: Contents | None = None) -> None:
    """Make the file ``built`` whole on its own and prove it, before it is published.

    Its WAL is checkpointed into it and emptied (TRUNCATE, with a check of the result), the
    connection closed, and then the file alone, read ``immutable`` so that no WAL can stand
    in for it, must start with SQLite's header, pass ``quick_check`` and hold what was
    committed: ``expected`` (what the writer counted) and what the WAL held. Last, the file is
    fsynced. Any shortfall raises (``DiskFull`` or ``StorageFault``, naming ``label``, the
    path the file was for) and nothing is published.
    """
    nothing = f"nothing was written ({label} was not created)"
    try:
        conn = sqlite3.connect(str(built), isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout={_SEAL_BUSY_MS}")
            held = count(conn)
            # A file built with a rollback journal (durability "build") is published in WAL
            # mode, as every other file is (the mode is kept in the file).
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                if conn.execute("PRAGMA journal_mode=WAL").fetchone()[0] != "wal":
                    raise StorageFault(f"{label}: the new file could not be put in WAL mode; {nothing}")
            else:
                busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                if busy:
                    raise StorageFault(f"{label}: another connection holds the new file; {nothing}")
        finally:
            conn.close()
        wal = wal_of(built)
        if wal.exists() and wal.stat().st_size:
            raise StorageFault(f"{label}: the new file's WAL could not be emptied into it; {nothing}")
        if not has_sqlite_header(built):
            raise StorageFault(f"{label}: the new file has no SQLite header; {nothing}")
        alone = sqlite3.connect(f"file:{quote(str(built.resolve()))}?immutable=1", uri=True)
        try:
            found = [r[0] for r in alone.execute("PRAGMA quick_check")]
            on_disk = count(alone)
        finally:
            alone.close()
        if found != ["ok"]:
            raise StorageFault(f"{label}: the new file failed SQLite's check ({'; '.join(found[:3])}); {nothing}")
        for want in (held, expected):
            if want is not None and on_disk != want:
                raise StorageFault(
                    f"{label}: the new file holds {on_disk.conversations} conversation(s) and {on_disk.events} "
                    f"event(s), not the {want.conversations} and {want.events} written; {nothing}")
        fsync(built)
    except OpenHandsMemoryError:
        raise
    except (sqlite3.Error, OSError) as e:
        raise (fault(e, label, nothing) or StorageFault(f"{label}: {' '.join(str(e).split())}; {nothing}")) from None


#: ``sync_file_range``'s flag that starts writing a range's dirty pages and does not wait.
_SYNC_FILE_RANGE_WRITE = 2


@functools.cache  # ctypes is loaded on the first call, not with the package
def _sync_file_range() -> "Callable[[int, int, int, int], int] | None":
    """libc's ``sync_file_range`` (Linux), which Python's ``os`` does not offer; None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        call = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    call.argtypes = (ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint)
    call.restype = ctypes.c_int
    return call


class Writeback:
    """Asks the kernel to start writing a file's dirty pages to the disk, without waiting for
    them or dropping them from the page cache; a no-op where that cannot be asked.

    A file being built is written far faster than the kernel writes it back on its own: it
    starts only once some 10 % of the machine's memory is dirty, and from then on each page
    SQLite writes cost it about twice the CPU (1.8M SDK rows into a new file: 5.9 us a row
    until 2 GB were dirty, 10.8 after; handed to the disk every 256 MB, 5.9 throughout).
    Advice only: nothing is promised durable by it (``seal`` syncs the file).

    One descriptor, opened at the first ``start`` and closed by ``close`` once the SQLite
    connection on the file is closed: closing a descriptor while SQLite holds a lock on the
    file would drop the lock (``has_sqlite_header``)."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    def start(self) -> None:
        call = _sync_file_range()
        if call is None:
            return
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDONLY)
            except OSError:
                return
        call(self._fd, 0, 0, _SYNC_FILE_RANGE_WRITE)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_folder(folder: Path) -> None:
    """Make a new name in ``folder`` durable (a link or rename lives in the folder's data)."""
    try:
        fsync(folder)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.EBADF, errno.EACCES):  # no fsync on folders there
            raise


def publish(built: Path, path: Path) -> None:
    """Put the sealed file ``built`` at ``path``, which must not exist yet.

    A hard link is atomic and never replaces a file that appeared meanwhile
    (``FileExistsError``); where links are not supported the file is renamed instead. The
    folder is fsynced after, so the new name survives a power cut.
    """
    try:
        os.link(built, path)
    except FileExistsError:
        raise
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.EXDEV):
            raise
        if path.exists():
            raise FileExistsError(errno.EEXIST, "File exists", str(path)) from None
        os.rename(built, path)
    fsync_folder(path.parent)


SHM_REGION = 32_768  # the -shm grows in regions of this size; a live connection maps one whole


def companions(path: Path) -> tuple[bool, bool]:
    """Whether ``path``'s -wal and -shm exist (before a connection that may create them)."""
    return wal_of(path).exists(), shm_of(path).exists()


def remove_failed_companions(path: Path, before: tuple[bool, bool]) -> None:
    """Remove the -wal and -shm a connection that failed for lack of space just created: a
    -shm short of one region and an empty -wal, which no live connection can be using (a
    live one maps a whole region of the -shm), so that a failed read leaves nothing behind."""
    wal, shm = wal_of(path), shm_of(path)
    try:
        if not before[1] and shm.exists() and shm.stat().st_size < SHM_REGION:
            shm.unlink()
            if not before[0] and wal.exists() and wal.stat().st_size == 0:
                wal.unlink()
    except OSError:
        pass  # the message already says the disk is full; these are tidying


def remove_database_files(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.unlink(f"{path}{suffix}")
        except FileNotFoundError:
            pass
