"""Opening a database for a command: read-only for reading commands, the store for writing ones.

Reading commands never create or change a file: a missing path is an error, not a new
database, and they read through a query-only connection (``database.connect_readonly``). Every opening judges the file first
(not SQLite, someone else's tables, an old or unknown schema revision), with the library's
messages.
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import click

from ..errors import ConversationNotFound, NotOurDatabase

if TYPE_CHECKING:
    from ..store import Conversation, EventStore


def judge(db: str, *, must_exist: bool = True) -> Path:
    """The path of ``db`` once judged: ours, at the current revision (or absent, if allowed)."""
    from ..database import check_revision, inspect_sqlite_file

    path = Path(db).expanduser()
    state = inspect_sqlite_file(path)
    if not state.exists:
        if must_exist:
            raise click.ClickException(
                f"{db}: no such database file (create one with `openhands-memory init {db}`)"
            )
        return path
    if state.revision is None:
        if must_exist:
            raise NotOurDatabase(db, "it is empty")
        return path
    check_revision(db, state.revision)
    return path


def open_readonly(db: str) -> sqlite3.Connection:
    """A read-only connection to an openhands-memory database at the current schema (see
    ``database.connect_readonly``: safe beside writers, and leaves no files behind)."""
    from ..database import connect_readonly

    return _closed_at_exit(connect_readonly(judge(db)))


def _closed_at_exit(resource: Any) -> Any:
    """Close ``resource`` when the command ends, however it ends: SQLite removes -wal and
    -shm only when the last connection is closed, which the garbage collector might never do."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.call_on_close(resource.close)
    return resource


def open_store(db: str, *, create: bool = False) -> "EventStore":
    """The library's store. Only ``create=True`` commands may make a new file."""
    judge(db, must_exist=not create)
    from ..store import EventStore

    return _closed_at_exit(EventStore(Path(db).expanduser(), create=create))


@contextmanager
def writing_store(db: str, *, create: bool = False) -> Iterator["EventStore"]:
    """The store, closed at the end. When ``create`` makes a new file, it is built beside
    ``db`` and put in place only if the block succeeds (``database.building``): a failed or
    killed command leaves no file at all, never an empty database."""
    from ..database import building
    from ..store import EventStore

    path = judge(db, must_exist=not create)
    if not path.parent.is_dir():
        raise click.ClickException(f"{db}: folder {path.parent} does not exist")
    if not (create and not path.exists()):
        store = EventStore(path, create=create)
        try:
            yield store
        finally:
            store.close()
        return
    try:
        with building(path) as tmp:
            store = EventStore(tmp, create=True)
            try:
                yield store
            finally:
                store.close()
    except FileExistsError:
        raise click.ClickException(
            f"{db} was created by another process meanwhile; nothing was written (run again)"
        ) from None


def resolve(conn: sqlite3.Connection, conversation: str) -> str:
    """The conversation id ``conversation`` names: itself, or the one id it is a prefix of."""
    if conn.execute("SELECT 1 FROM conversation WHERE id = ?", (conversation,)).fetchone():
        return conversation
    pattern = conversation.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    found = [
        r[0]
        for r in conn.execute(
            "SELECT id FROM conversation WHERE id LIKE ? ESCAPE '\\' ORDER BY id LIMIT 6", (pattern,)
        )
        if r[0].startswith(conversation)  # LIKE ignores case; ids do not
    ]
    if len(found) == 1 and conversation:
        return found[0]
    if len(found) > 1:
        shown = ", ".join(found[:5]) + (", …" if len(found) > 5 else "")
        raise click.ClickException(f"{conversation!r} names more than one conversation: {shown}")
    raise ConversationNotFound(conversation)


def conversation(store: "EventStore", name: str) -> "Conversation":
    return store.conversation(resolve(store.db, name))
