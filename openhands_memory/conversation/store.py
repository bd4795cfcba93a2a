"""The library's front door: an event store (one database), and its conversations."""

from __future__ import annotations

import tempfile
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Callable, Iterator

from .. import limits
from ..database import Durability, Location
from ..errors import AmbiguousConversation, ConversationExists, ConversationNotFound, EventNotFound
from ..storage import IntegrityViolation, Recorder, Session, hidden, open_recorder, tree
from .conversation import Conversation

if TYPE_CHECKING:
    import sqlite3

DEFAULT_PATH = "openhands-memory.db"


@dataclass(frozen=True)
class ConversationInfo:
    id: str
    created_at: str
    metadata: dict[str, Any]


class EventStore:
    """One database: open or create it, then work with its conversations.

    ``path_or_url``: an SQLite file path, or a ``postgresql://`` URL. ``readonly``: open an
    existing database for reading only (nothing is created or written). ``statement_timeout``:
    seconds a read's statement may run on PostgreSQL before the server stops it (a page of
    the web inspector must not hold a server's backend for long). A store holds one
    connection (see ``storage.Recorder``), so that it can tell its own writes from other
    processes' and a step pays for no pool checkout. Use one store per thread or process for
    parallel work.
    """

    def __init__(
        self,
        path_or_url: str | Path = DEFAULT_PATH,
        *,
        durability: Durability = "normal",
        create: bool = True,
        readonly: bool = False,
        statement_timeout: float | None = None,
    ):
        self.recorder: Recorder = open_recorder(
            path_or_url, durability=durability, create=create, readonly=readonly,
            statement_timeout=statement_timeout,
        )
        self.location = Location.parse(path_or_url)

    @property
    def db(self) -> "sqlite3.Connection":
        """The SQLite connection (for tests and tools that inspect a file directly)."""
        return self.recorder.conn  # type: ignore[attr-defined]

    @classmethod
    @contextmanager
    def scratch(cls) -> Iterator["EventStore"]:
        """A throwaway SQLite database (a temporary file, without a search index), removed
        when the block ends: where a replay rebuilds views without touching its source."""
        with tempfile.TemporaryDirectory(prefix="ohm-scratch-") as folder:
            with cls(Path(folder) / "scratch.db", durability="scratch") as store:
                store.set_search_index(False)
                yield store

    # --- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        self.recorder.close()

    def __enter__(self) -> "EventStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EventStore({self.location.label!r})"

    # --- transactions ----------------------------------------------------------------

    def writing(self, conversation_id: str | None = None, *, large: bool = False,
                timeout: float | None = None) -> "AbstractContextManager[Session]":
        """A write transaction; with a conversation id, it holds that conversation's id lock.
        ``large``: it may change more pages than memory should hold. ``timeout``: the most
        seconds to wait for the lock, then ``LockTimeout`` (``Recorder.writing``)."""
        return self.recorder.writing(conversation_id, large=large, timeout=timeout)

    def reading(self, *, snapshot: bool = True) -> "AbstractContextManager[Session]":
        """A read transaction: one consistent snapshot, released at the end (``snapshot=False``:
        for a single statement, no transaction around it)."""
        return self.recorder.reading(snapshot=snapshot)

    def version(self, conversation_id: str) -> Any:
        """Changes whenever another connection commits a write (see ``Recorder.version``)."""
        return self.recorder.version(conversation_id)

    # --- the search index (storage/search.py) ---------------------------------------

    @property
    def search_index(self) -> bool:
        """Whether this database keeps the full-text index that ``Conversation.search`` reads
        (on unless switched off: every append then skips the work of indexing)."""
        with self.reading() as db:
            return db.search_index_on()

    def set_search_index(self, on: bool, progress: Callable[[int, int], None] | None = None) -> bool:
        """Switch the search index on (indexing every stored event, in one transaction, with
        ``progress(done, total)``) or off (dropping it); whether anything changed."""
        with self.writing(large=True) as db:
            return db.set_search_index(on, progress)

    # --- conversations ---------------------------------------------------------------

    def create_conversation(
        self, id: str | None = None, *, metadata: dict[str, Any] | None = None
    ) -> Conversation:
        """A new conversation: ``id`` (None: a new UUID) must keep the rule of new ids
        (``limits.conversation_id``: 1 to 256 characters of one-line text), else
        ``BadConversationId``; an id in use is ``ConversationExists``."""
        cid = str(uuid.uuid4()) if id is None else limits.conversation_id(id)
        now = datetime.now(timezone.utc).isoformat()
        try:
            with self.writing() as db:
                db.insert_conversation(cid, now, metadata or {})
        except IntegrityViolation:
            raise ConversationExists(cid) from None
        return Conversation(self, cid)

    def conversation(self, id: str) -> Conversation:
        self._nameable(id)
        version = self.recorder.existing_version(id)
        if version is None:
            raise ConversationNotFound(id)
        conv = Conversation(self, id)
        conv.views.known_version(version)  # (on PostgreSQL: a round trip less to its first view)
        return conv

    def find_conversation(self, name: str) -> str:
        """The id ``name`` names: itself, or the one id it is a prefix of."""
        self._nameable(name)
        with self.reading() as db:
            if db.conversation_exists(name):
                return name
            found = db.conversation_ids_like(name, 6) if name else []
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise AmbiguousConversation(name, found)
        raise ConversationNotFound(name)

    def has_conversation(self, id: str) -> bool:
        if self._unnameable(id):
            return False
        with self.reading(snapshot=False) as db:  # one statement: its own snapshot
            return db.conversation_exists(id)

    def __contains__(self, id: object) -> bool:
        return isinstance(id, str) and self.has_conversation(id)

    def conversations(self) -> list[ConversationInfo]:
        with self.reading() as db:
            return [ConversationInfo(*row) for row in db.conversations()]

    def fork(self, source: str, at: int | None = None, conversation_id: str | None = None) -> Conversation:
        """A new conversation holding the path from event ``at`` (None: HEAD) of ``source`` to
        the root, renumbered 0, 1, 2, ... (see ``Conversation.fork``); one transaction."""
        self._nameable(source)
        at = None if at is None else limits.event_id(at, source)
        cid = str(uuid.uuid4()) if conversation_id is None else limits.conversation_id(conversation_id)
        now = datetime.now(timezone.utc).isoformat()
        try:
            with self.writing() as db:
                meta = db.metadata(source)
                if meta is None:
                    raise ConversationNotFound(source)
                if at is not None and not 0 <= at <= db.last_seq(source):
                    raise EventNotFound(source, at)
                path = db.path(source, at)
                moves, base = [], 0
                for s, e in path:
                    moves.append((s, e, base - s))
                    base += e - s + 1
                db.insert_conversation(cid, now, {**meta, "forked_from": {
                    "conversation": source, "event": path[-1][1] if path else None}})
                db.copy_path(source, cid, moves)
                rewrites = []
                for seq, payload in list(db.condensation_events(cid)):
                    text = tree.shifted_condensation(payload, moves)
                    if text is not None:
                        rewrites.append((seq, text))
                db.set_payloads(cid, rewrites)
                hidden.rebuild(db, cid)
                db.touch(cid)
        except IntegrityViolation:
            raise ConversationExists(cid) from None
        return Conversation(self, cid)

    def delete_conversation(self, id: str) -> None:
        self._nameable(id)
        # Large: deleting a 1M-event conversation journaled every page it freed, 2.7 GB in memory.
        with self.writing(id, large=True) as db:
            if not db.delete_conversation(id):
                raise ConversationNotFound(id)

    def _unnameable(self, id: object) -> bool:
        """Whether ``id`` can name no conversation here, stored before or now: not text, a
        lone surrogate (which neither database stores), or on PostgreSQL a NUL (which its text
        cannot hold; an SQLite file made before the rule on ids may hold one). Asking for
        such an id is answered as for any id not stored, not with the driver's error."""
        if not isinstance(id, str):
            return True
        try:
            id.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return "\x00" in id and self.location.is_postgres

    def _nameable(self, id: object) -> None:
        """``ConversationNotFound`` when ``id`` can name no conversation (``_unnameable``)."""
        if self._unnameable(id):
            raise ConversationNotFound(id if isinstance(id, str) else repr(id))
