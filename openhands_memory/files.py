"""Files a command writes beside the databases it reads: one file by any of its names, and
an output replaced only once its successor is whole.

A path is a name, not a file: a hard link, a symbolic link, ``./x`` and ``x`` can all name
one file. A command that writes one path while it reads another compares them as the file
system knows them (device and inode, symbolic links followed), never by their names: two
names compared as text let a hard link of a database pass for another file.

An output (a page, an export) is written under a temporary name in its folder, synced, and
renamed over its path: a full disk or a kill leaves the old file whole, or no file, never
part of the new one.
"""

from __future__ import annotations

import errno
import os
import uuid
from pathlib import Path
from typing import IO, Callable, Iterable, Mapping, TypeVar

from .errors import DiskFull, OverwritesInput, ReadOnlyPlace, StorageFault
from .sqlite_file import fault, fsync_folder

T = TypeVar("T")

#: The files SQLite keeps beside a database while it is in use: writing over any of them
#: loses what it holds (a WAL holds committed transactions not yet copied into the file).
COMPANIONS = ("-wal", "-shm", "-journal")
#: How a temporary output's name ends: never mistaken for a finished file.
PARTIAL = ".partial"


def same_file(a: Path | str, b: Path | str) -> bool:
    """Whether ``a`` and ``b`` name one file: the same device and inode once symbolic links
    are followed. Where either names no file yet (a new scratch database, the WAL SQLite
    makes beside a database it opens), there is no inode to compare: whether they name one
    place, a write to either landing on the other, decides."""
    try:
        first, second = os.stat(a), os.stat(b)
    except ValueError:  # a NUL in a name, which names nothing
        return False
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def other_names(path: Path) -> list[Path]:
    """The other names (hard links) of the file ``path`` in its own folder; the folder is
    listed only when the file has more than one link."""
    try:
        st = os.stat(path)
    except OSError:
        return []
    if st.st_nlink < 2:
        return []
    named = Path(os.path.realpath(path))
    found = []
    try:
        entries = list(os.scandir(named.parent))
    except OSError:
        return []
    for entry in entries:
        try:
            # Symbolic links are not other names to SQLite, which follows them to the file's.
            other = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if entry.name != named.name and (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            found.append(Path(entry.path))
    return sorted(found)


def database_files(db: Path | str) -> dict[Path, str]:
    """A database file and the companions SQLite keeps beside it, each with what it is.
    SQLite names them after the file a symbolic link leads to, not after the link."""
    db = Path(db).expanduser()
    real = os.path.realpath(db)
    return {db: f"the database {db}",
            **{Path(f"{real}{suffix}"): f"the {suffix[1:]} file of the database {db}" for suffix in COMPANIONS}}


def refuse_overwrite(path: Path | str, reads: Mapping[Path, str], *, what: str = "") -> None:
    """Raise ``OverwritesInput`` when ``path`` is one of the files ``reads`` names (path ->
    what it is), by any of its names. ``what``: how the message names ``path`` (an option)."""
    for read, found in reads.items():
        if same_file(path, read):
            raise OverwritesInput(f"{what} {path}".strip(), found,
                                  other_name=os.path.abspath(path) != os.path.abspath(read))


def target_of(path: Path) -> Path:
    """The file a write to ``path`` is for: the file a symbolic link names (renaming over
    the link would replace the link, not the file it names), else ``path`` itself."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def replace_whole(path: Path, write: Callable[[IO[str]], T], *, done: str = "") -> T:
    """Write ``path`` through ``write(f)``, ``f`` a new text file beside it; only once that
    file is complete and synced is it renamed over ``path`` (a symbolic link's file, if
    ``path`` is one), keeping the old file's permissions. Returns what ``write`` returned.

    A failure (a full disk, a read-only folder, an error of ``write``'s own) removes the
    temporary file and leaves ``path`` as it was; a file-system fault is the library's error
    naming ``path`` (``DiskFull``, ``ReadOnlyPlace``, ``StorageFault``). ``done``: what the
    command wrote before this file, for the message when this one fails."""
    target = target_of(path)
    existing = target.exists()
    outcome = (f"{path} was left as it was" if existing else "nothing was written") + (f" ({done})" if done else "")
    tmp = target.with_name(f".{target.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}{PARTIAL}")
    if existing and not os.access(target, os.W_OK):  # a rename would replace it all the same
        raise ReadOnlyPlace(str(path), "the file is read-only", outcome)
    try:
        mode = (target.stat().st_mode & 0o7777) if existing else None
        # 0o666 less the umask, as any new file of the user's; an old file's mode is kept.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            result = write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
        fsync_folder(target.parent)
        return result
    except OSError as e:
        raise _output_fault(e, path, outcome) from None
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def write_text(path: Path, text: str, *, done: str = "") -> None:
    """``replace_whole`` with ``text`` as the new content."""
    replace_whole(path, lambda f: f.write(text), done=done)


def _output_fault(error: OSError, path: Path, outcome: str) -> StorageFault:
    # The full disk is this file's: what it wrote was removed before the message is made,
    # so SQLite's guess at a full temporary folder (free space found again) does not apply.
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull(str(path), outcome)
    if error.errno == errno.ENOENT and not target_of(path).parent.is_dir():
        return StorageFault(f"{path}: the folder {target_of(path).parent} does not exist; {outcome}")
    return fault(error, path, outcome) or StorageFault(f"{path}: {error.strerror or error}; {outcome}")


def clashes(paths: Iterable[Path | None]) -> tuple[Path, Path] | None:
    """Two of ``paths`` (outputs of one command) that name one file, or None."""
    given = [p for p in paths if p is not None]
    return next(((a, b) for i, a in enumerate(given) for b in given[i + 1:] if same_file(a, b)), None)
