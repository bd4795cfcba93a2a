"""Opening a database for a command: read-only for reading commands, the store for writing ones.

A database is a file path or a ``postgresql://`` URL. Reading commands never create or
change anything: a missing file is an error, not a new database, and they read through a
read-only store (a query-only connection for SQLite, read-only transactions for
PostgreSQL). Every opening judges the database first (not ours, an old or unknown schema
revision), with the library's messages.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import click

from ..errors import NotOurDatabase

if TYPE_CHECKING:
    from ..conversation import Conversation, EventStore


def is_url(db: str) -> bool:
    """A server URL (PostgreSQL), not a file path."""
    return "://" in db and not db.startswith("sqlite://")


def shown(db: str) -> str:
    """``db`` as messages show it: a server URL without its password."""
    if not is_url(db):
        return db
    from ..database import without_password

    return without_password(db)


def judge(db: str, *, must_exist: bool = True) -> Path:
    """The path of ``db`` once judged: ours, at the current revision (or absent, if allowed).
    A server URL is judged when the store connects (its Path is only a label here)."""
    from ..database import check_revision, inspect_sqlite_file

    if is_url(db):
        return Path(db)
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
    from ..conversation import EventStore

    return _closed_at_exit(EventStore(db if is_url(db) else Path(db).expanduser(), create=create))


def open_reader(db: str) -> "EventStore":
    """A read-only store: it creates nothing and writes nothing."""
    judge(db)
    from ..conversation import EventStore

    return _closed_at_exit(EventStore(db if is_url(db) else Path(db).expanduser(), create=False, readonly=True))


@contextmanager
def writing_store(db: str, *, create: bool = False) -> Iterator["EventStore"]:
    """The store, closed at the end. When ``create`` makes a new file, it is built beside
    ``db`` and put in place only if the block succeeds (``database.building``): a failed or
    killed command leaves no file at all, never an empty database."""
    from ..database import building
    from ..conversation import EventStore

    if is_url(db):
        store = EventStore(db, create=create)
        try:
            yield store
        finally:
            close_reporting(store)
        return
    path = judge(db, must_exist=not create)
    if not path.parent.is_dir():
        raise click.ClickException(f"{db}: folder {path.parent} does not exist")
    if not (create and not path.exists()):
        store = EventStore(path, create=create)
        try:
            yield store
        finally:
            close_reporting(store)
        return
    try:
        with building(path) as build:
            # No one opens the file before it is published: "build" writes each page once.
            store = EventStore(build.path, create=True, durability="build")
            try:
                yield store
                build.written_by(store.db)
            finally:
                store.close()
    except FileExistsError:
        raise click.ClickException(
            f"{db} was created by another process meanwhile; nothing was written (run again)"
        ) from None


def close_reporting(store: "EventStore") -> None:
    """Close ``store``. A write that committed, but whose copy from the WAL into the file then
    failed (a full disk), is said as a warning when the command ends, after its own output:
    the write landed, so the command succeeded (an error would make a script retry it)."""
    from ..errors import StorageFault

    try:
        store.close()
    except StorageFault as e:
        ctx = click.get_current_context(silent=True)
        if not e.committed or ctx is None:
            raise
        warning = f"Warning: {' '.join(str(e).split())}"
        ctx.call_on_close(lambda: click.echo(warning, err=True))


def conversation(store: "EventStore", name: str) -> "Conversation":
    """The conversation ``name`` names: its id, or a unique prefix of it."""
    return store.conversation(store.find_conversation(name))
