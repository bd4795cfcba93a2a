"""The scratch database a replay keeps (``replay --scratch``): where its strategies run and
the replies a model summarizing for them cost are kept, so that the next replay of the same
history calls no model.

A replay replaces its own conversations in the scratch (``replay:<source>:<k>``), so it may
only be given a database in which it can change nothing of anyone else's:

* a new path: the database is built beside it (without a search index: nothing searches a
  scratch, and indexing would be most of its appends' cost) and appears only once whole;
* an existing database that holds only what replays wrote: every conversation in it is a
  replay's (``replay:`` id, ``replay_of`` in its metadata), which is how scratch databases of
  earlier versions are recognised too; an empty file holds nothing and is taken as well.

Anything else is refused, before anything is written: a database with conversations of its
own (a replay would add to it, and used to switch its search index off), and any name of a
file the replay reads (the source, by a hard or symbolic link, or a file SQLite keeps beside
it: two names of one database file keep two WALs, and each overwrites the other's pages).

When the replay fails, a scratch it created and that keeps nothing worth keeping (no model
reply) is removed with its companions, so that "nothing was kept" is true; otherwise the
message says what is there.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from ..database import building, inspect_sqlite_file
from ..errors import OpenHandsMemoryError, ScratchRefused, StorageFault
from ..files import database_files, refuse_overwrite
from ..sqlite_file import fault, remove_database_files
from .run import MARK, PREFIX

if TYPE_CHECKING:
    from ..conversation import EventStore


@dataclass
class Scratch:
    """An open scratch database: its store, and what this replay has done to it."""

    store: "EventStore"
    path: Path
    created: bool  # by this replay: removed again if the replay fails and it keeps nothing
    replies: int = 0  # model replies this replay kept in it
    warning: str | None = None  # a committed write the close could not copy into the file

    def kept(self) -> str:
        """What the scratch holds once the replay has run: for the message of a failure after
        it (an output that could not be written), which leaves the scratch as it is."""
        replies = f" and the {self.replies} model replies it received" if self.replies else ""
        if self.created:
            return f"{self.path}, which this replay created, keeps its conversations{replies}"
        return f"{self.path} keeps this replay's conversations{replies}"

    def reply(self, key: str) -> str | None:
        """The model reply kept under ``key`` (``llm.ReplyCache``'s ``load``)."""
        with self.store.reading() as db:
            return db.llm_reply(key)

    def keep_reply(self, key: str, model: str, reply: str, when: str) -> None:
        """Keep a model reply (``llm.ReplyCache``'s ``keep``)."""
        with self.store.writing() as db:
            db.keep_llm_reply(key, model, reply, when)
        self.replies += 1


def foreign_conversations(store: "EventStore") -> list[str]:
    """The conversations of ``store`` that no replay wrote."""
    return [c.id for c in store.conversations() if not (c.id.startswith(PREFIX) and MARK in c.metadata)]


def _judge(path: Path, source: "EventStore") -> bool:
    """Whether ``path`` is new (True), or an existing database a replay may use (False);
    raises what refuses it."""
    if source.location.path is not None:
        refuse_overwrite(path, database_files(source.location.path), what="the scratch database")
    state = inspect_sqlite_file(path)  # raises for a link to nothing, a file not ours, another revision
    if not state.exists:
        if not path.parent.is_dir():
            raise ScratchRefused(str(path), f"the folder {path.parent} does not exist")
        return True
    if state.revision is None:
        return False  # an empty file: nothing in it to change
    from ..conversation import EventStore

    with EventStore(path, create=False, readonly=True) as existing:
        foreign = foreign_conversations(existing)
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise ScratchRefused(str(path), f"it holds conversations a replay did not write ({shown}), which a "
                                        "replay must not change")
    return False


def _create(path: Path) -> None:
    """A new scratch database at ``path``, whole or absent (``database.building``)."""
    from ..conversation import EventStore

    with building(path) as build:
        store = EventStore(build.path, create=True, durability="build")
        try:
            store.set_search_index(False)  # this file's own, just made: nothing else is in it
            build.written_by(store.db)
        finally:
            store.close()


@contextmanager
def scratch_database(path: Path, source: "EventStore") -> Iterator[Scratch]:
    """The scratch database at ``path`` for a replay of ``source``, open for the block; see
    the module's docstring for what is refused, and what a failure leaves."""
    from ..conversation import EventStore

    path = path.expanduser()
    new = _judge(path, source)
    if new:
        _create(path)
    try:
        scratch = Scratch(EventStore(path, create=False), path, created=new)
    except BaseException:
        if new:
            remove_database_files(path)
        raise
    try:
        yield scratch
    except BaseException as e:
        outcome = _leave(scratch)
        found = _restated(e, path, outcome)
        if found is None:
            raise
        raise found from None
    try:
        scratch.store.close()
    except StorageFault as e:
        if not e.committed:
            raise
        scratch.warning = " ".join(str(e).split())


def _leave(scratch: Scratch) -> str:
    """Close a scratch whose replay failed, remove it if this replay made it and it keeps no
    model reply, and say what is there now."""
    path = scratch.path
    try:
        scratch.store.close()
    except OpenHandsMemoryError:
        pass  # what it committed is in its WAL, which SQLite keeps; said below
    if scratch.created and not scratch.replies:
        try:
            remove_database_files(path)
        except OSError as e:
            return f"{path}, which this replay created, could not be removed ({e.strerror}): it holds unfinished " \
                   "replay conversations"
        return f"nothing was kept ({path}, which this replay created, was removed)"
    replies = f"the {scratch.replies} model replies received (the next replay reuses them)"
    unfinished = "the conversations this replay had begun to write, left unfinished (the next replay rewrites them)"
    if scratch.created:
        return f"{path}, which this replay created, keeps {replies} and {unfinished}"
    kept = f"what earlier replays wrote and {replies}" if scratch.replies else "what earlier replays wrote"
    return f"{path} keeps {kept}, but for {unfinished}"


def _restated(error: BaseException, path: Path, outcome: str) -> OpenHandsMemoryError | None:
    """``error`` again with ``outcome``, when it is a file-system fault of the scratch's
    (its message said what became of one write, not of the scratch)."""
    if not isinstance(error, StorageFault) or str(path) not in str(error):
        return None
    return fault(error, path, outcome)
