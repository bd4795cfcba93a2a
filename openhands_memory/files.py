"""Files a command writes beside the databases it reads: one file by any of its names, and
an output replaced only once its successor is whole.

A path is a name, not a file: a hard link, a symbolic link, ``./x`` and ``x`` can all name
one file. A command that writes one path while it reads another compares them as the file
system knows them (device and inode, symbolic links followed), never by their names: two
names compared as text let a hard link of a database pass for another file.

An output (a page, an export) is written under a temporary name in its folder, synced, and
renamed over its path: a full disk or a kill leaves the old file whole, or no file, never
part of the new one.

An output's path is judged before the command does anything (``check_output``): a name no
file can have (empty, a folder's, longer than the file system's NAME_MAX or the system's
PATH_MAX), a folder that is missing or cannot be written, a file that is a folder, a device
or read-only. A replay that ran for minutes must not then fail to write its page, leaving
a scratch database it created behind unsaid.
"""

from __future__ import annotations

import errno
import os
import stat
import uuid
from pathlib import Path
from typing import IO, Callable, Iterable, Mapping, TypeVar

from .errors import DiskFull, OverwritesInput, ReadOnlyPlace, StorageFault, UnwritableOutput
from .sqlite_file import fault, fsync_folder, read_only_reason

T = TypeVar("T")

#: The files SQLite keeps beside a database while it is in use: writing over any of them
#: loses what it holds (a WAL holds committed transactions not yet copied into the file).
COMPANIONS = ("-wal", "-shm", "-journal")
#: How a temporary output's name ends: never mistaken for a finished file.
PARTIAL = ".partial"


#: What the system allows when it cannot say (Linux's NAME_MAX and PATH_MAX).
NAME_MAX, PATH_MAX = 255, 4096
#: The longest suffix a file written here gets beside its name: SQLite's ``-journal`` beside
#: a database.
LONGEST_COMPANION = max(len(suffix) for suffix in COMPANIONS)


def _system_limit(place: Path, name: str, default: int) -> int:
    """``os.pathconf``'s ``name`` for the nearest existing folder at or above ``place``."""
    for folder in (place, *place.parents):
        try:
            return os.pathconf(folder, name)
        except (OSError, ValueError):
            continue
    return default


def sibling(path: Path, tag: str) -> Path:
    """A new temporary name in ``path``'s folder: ``.NAME.PID-RANDOM.TAG``, never taken for a
    finished file, and never longer than a name may be, however long ``path``'s own is (the
    name is cut to fit, with room left for SQLite's ``-journal`` beside a database built
    under it: a 250-byte name made a temporary name past NAME_MAX)."""
    limit = _system_limit(path.parent, "PC_NAME_MAX", NAME_MAX)
    tail = f".{os.getpid()}-{uuid.uuid4().hex[:8]}.{tag}"
    room = max(limit - 1 - len(tail.encode()) - LONGEST_COMPANION, 1)
    name = os.fsdecode(os.fsencode(path.name)[:room])
    return path.with_name(f".{name}{tail}")


def check_output(path: str | os.PathLike[str], *, what: str = "", database: bool = False, folder: bool = False,
                 outcome: str = "nothing was written") -> Path:
    """``path`` as a Path, once judged a file a command can write (the file a symbolic link
    names, and the temporary file beside it that ``replace_whole`` renames over it); else
    ``UnwritableOutput`` naming ``path`` (as ``what``: an option) and why. Judged on the text
    given, since ``Path`` makes ``out/`` into ``out`` and 10,000 slashes into ``/``.
    ``database``: the file is a database, whose journal SQLite names ``NAME-journal``.
    ``folder``: what is written is a new folder (an export's), which may exist if empty.
    ``outcome``: what the message says became of the command's writes."""
    text = os.fspath(path)

    def refuse(why: str) -> UnwritableOutput:
        return UnwritableOutput(text, why, what=what, outcome=outcome)

    if text == "":
        raise refuse("it is empty, which names no file")
    if "\x00" in text:
        raise refuse("it holds a NUL character, which no file name can")
    try:
        raw = os.fsencode(text)
    except UnicodeEncodeError as e:
        raise refuse(f"it holds a lone surrogate (character {e.start + 1}), which no file name can") from None
    if not folder and (raw.endswith(b"/") or os.path.basename(text) in (".", "..")):
        raise refuse("it names a folder, not a file")
    given = Path(text)
    name_max = _system_limit(given.parent, "PC_NAME_MAX", NAME_MAX)
    path_max = _system_limit(given.parent, "PC_PATH_MAX", PATH_MAX)
    room = LONGEST_COMPANION if database else 0
    for part in raw.rstrip(b"/").split(b"/"):
        if len(part) + room > name_max:
            shown_part = os.fsdecode(part)
            shown_part = shown_part if len(shown_part) <= 40 else shown_part[:30] + "…"
            extra = f" (and {room} more for SQLite's -journal beside it)" if room else ""
            raise refuse(f"its name {shown_part!r} is {len(part):,} bytes, more than the {name_max} a file name "
                         f"may have here{extra}")
    if len(raw) >= path_max:
        raise refuse(f"it is {len(raw):,} bytes long, more than the {path_max - 1:,} a path may have")
    try:
        target = target_of(given)
    except OSError as e:  # a folder on the way that cannot be searched
        raise refuse(f"it cannot be reached ({e.strerror})") from None
    parent = target.parent
    try:
        found = os.stat(parent)
    except FileNotFoundError:
        raise refuse(f"the folder {parent} does not exist") from None
    except NotADirectoryError:
        raise refuse(f"{parent} is not a folder") from None
    except OSError as e:
        raise refuse(f"the folder {parent} cannot be reached ({e.strerror})") from None
    if not stat.S_ISDIR(found.st_mode):
        raise refuse(f"{parent} is not a folder")
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as e:
        raise refuse(f"it cannot be reached ({e.strerror})") from None
    if mode is not None and stat.S_ISDIR(mode) and not folder:
        raise refuse("it is a folder")
    if mode is not None and not stat.S_ISREG(mode) and not (folder and stat.S_ISDIR(mode)):
        raise refuse("it is not a regular file (a device, pipe or socket), which a new file would replace")
    if len(os.fsencode(str(sibling(target, PARTIAL.lstrip("."))))) >= path_max:
        raise refuse(f"a file beside it would be more than the {path_max - 1:,} bytes a path may have")
    reason = read_only_reason(target) if not folder else read_only_reason(parent / "new")
    if reason is None and not os.access(parent, os.W_OK | os.X_OK):
        reason = f"the folder {parent} cannot be written"
    if reason is not None:
        raise refuse(reason)
    return given


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
    command wrote before this file (or what a scratch database holds), for the message when
    this one fails. A path no file can be written at is ``UnwritableOutput`` (``check_output``)."""
    target = target_of(path)
    existing = target.exists()
    said = f"{path} was left as it was" if existing else f"{path} was not written" if done else "nothing was written"
    outcome = said + (f"; {done}" if done else "")
    check_output(path, outcome=outcome)  # judged again: a library caller may not have
    tmp = sibling(target, PARTIAL.lstrip("."))
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
