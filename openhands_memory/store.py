"""The library's front door: an event store in one database file, and its conversations."""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

from . import rows
from .database import Durability, open_database
from .errors import (
    ConversationExists,
    ConversationNotFound,
    DuplicateEventId,
    EventNotFound,
    MalformedEvent,
)
from .events import Condensation, Event

if TYPE_CHECKING:
    from .condensers.base import Condenser
    from .view import View

DEFAULT_PATH = "openhands-memory.db"


@dataclass(frozen=True)
class ConversationInfo:
    id: str
    created_at: str
    metadata: dict[str, Any]


class EventStore:
    """One database: open or create it, then work with its conversations.

    A store holds a single SQLite connection, guarded by a lock, so that it can tell its own
    writes from other processes' (``data_version``) and so that a step pays for no pool
    checkout. Use one store per thread or process for parallel work.
    """

    def __init__(
        self,
        path_or_url: str | Path = DEFAULT_PATH,
        *,
        durability: Durability = "normal",
        create: bool = True,
    ):
        self.db, self.location = open_database(path_or_url, durability=durability, create=create)
        self._lock = threading.RLock()

    # --- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self.db.close()

    def __enter__(self) -> "EventStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EventStore({self.location.label!r})"

    # --- transactions ----------------------------------------------------------------

    @contextmanager
    def writing(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that holds the write lock from its start (BEGIN IMMEDIATE)."""
        with self._lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: one consistent snapshot, released at the end."""
        with self._lock:
            self.db.execute("BEGIN")
            try:
                yield self.db
            finally:
                self.db.execute("COMMIT")

    def data_version(self) -> int:
        """Changes whenever another connection commits to the file."""
        with self._lock:
            return self.db.execute("PRAGMA data_version").fetchone()[0]

    # --- conversations ---------------------------------------------------------------

    def create_conversation(
        self, id: str | None = None, *, metadata: dict[str, Any] | None = None
    ) -> "Conversation":
        cid = id or str(uuid.uuid4())
        now = datetime.now(timezone.utc).isoformat()
        try:
            with self.writing() as db:
                db.execute(
                    "INSERT INTO conversation (id, created_at, metadata) VALUES (?, ?, ?)",
                    (cid, now, json.dumps(metadata or {})),
                )
        except sqlite3.IntegrityError:
            raise ConversationExists(cid) from None
        return Conversation(self, cid)

    def conversation(self, id: str) -> "Conversation":
        if not self.has_conversation(id):
            raise ConversationNotFound(id)
        return Conversation(self, id)

    def has_conversation(self, id: str) -> bool:
        with self.reading() as db:
            return db.execute("SELECT 1 FROM conversation WHERE id = ?", (id,)).fetchone() is not None

    def __contains__(self, id: object) -> bool:
        return isinstance(id, str) and self.has_conversation(id)

    def conversations(self) -> list[ConversationInfo]:
        with self.reading() as db:
            result = db.execute(
                "SELECT id, created_at, metadata FROM conversation ORDER BY created_at, id"
            ).fetchall()
        return [ConversationInfo(i, c, json.loads(m)) for i, c, m in result]

    def delete_conversation(self, id: str) -> None:
        with self.writing() as db:
            if db.execute("DELETE FROM conversation WHERE id = ?", (id,)).rowcount == 0:
                raise ConversationNotFound(id)


class Conversation:
    """One conversation's events. Ids are 0, 1, 2, ... assigned inside the write transaction."""

    def __init__(self, store: EventStore, id: str):
        self.store = store
        self.id = id
        self._view_cache: Any = None  # set by the view module when a view is first asked for

    def __repr__(self) -> str:
        return f"Conversation({self.id!r})"

    # --- writing ---------------------------------------------------------------------

    def append(self, event: Event) -> int:
        """Store one event; returns its id."""
        return self.append_many([event])[0]

    def append_many(self, events: Sequence[Event]) -> list[int]:
        """Store events in one transaction; returns their ids. All are stored, or none."""
        events = list(events)
        for e in events:
            if not isinstance(e, Event):
                raise MalformedEvent(f"expected an Event, got {type(e).__name__}")
        if not events:
            return []
        with self.store.writing() as db:
            seqs = self.insert(db, events)
        self._after_append(events, seqs)
        return seqs

    def insert(self, db: sqlite3.Connection, events: list[Event]) -> list[int]:
        """Insert inside the caller's write transaction; returns the ids given."""
        first = self._next_id(db)
        seqs = list(range(first, first + len(events)))
        try:
            db.executemany(
                rows.INSERT_EVENT, [rows.event_row(self.id, s, e) for s, e in zip(seqs, events)]
            )
        except sqlite3.IntegrityError as e:
            self._explain_integrity_error(db, events, e, first)
        for seq, event in zip(seqs, events):
            if isinstance(event, Condensation):
                rows.record_condensation(db, self.id, seq, event)
        return seqs

    def _next_id(self, db: sqlite3.Connection) -> int:
        last = db.execute(
            "SELECT MAX(id) FROM event WHERE conversation_id = ?", (self.id,)
        ).fetchone()[0]
        if last is None and not self._exists(db):
            raise ConversationNotFound(self.id)
        return 0 if last is None else last + 1

    def _exists(self, db: sqlite3.Connection) -> bool:
        return db.execute("SELECT 1 FROM conversation WHERE id = ?", (self.id,)).fetchone() is not None

    def _explain_integrity_error(
        self, db: sqlite3.Connection, events: list[Event], error: sqlite3.IntegrityError, first: int
    ) -> None:
        if not self._exists(db):
            raise ConversationNotFound(self.id) from None
        dup = rows.duplicate_uid(db, self.id, events, before=first)
        if dup is not None:
            raise DuplicateEventId(self.id, dup) from None
        raise error

    def _after_append(self, events: list[Event], seqs: list[int]) -> None:
        for e, s in zip(events, seqs):
            e.with_seq(s)
        if self._view_cache is not None:
            self._view_cache.extend(events)

    # --- reading ---------------------------------------------------------------------

    def __len__(self) -> int:
        with self.store.reading() as db:
            last = db.execute(
                "SELECT MAX(id) FROM event WHERE conversation_id = ?", (self.id,)
            ).fetchone()[0]
        return 0 if last is None else last + 1

    def get(self, id: int) -> Event:
        with self.store.reading() as db:
            row = db.execute(
                "SELECT kind, payload FROM event WHERE conversation_id = ? AND id = ?",
                (self.id, id),
            ).fetchone()
        if row is None:
            raise EventNotFound(self.id, id)
        return rows.decode(row[0], row[1], id)

    def __getitem__(self, id: int) -> Event:
        return self.get(id)

    def events(
        self,
        start: int = 0,
        stop: int | None = None,
        *,
        kinds: Iterable[str] | None = None,
        page: int = 512,
    ) -> Iterator[Event]:
        """Events with ids in ``[start, stop)``, oldest first, read a page at a time.

        Each page is its own short read, so iterating a long history never holds a snapshot
        open while the caller works.
        """
        kind_list = sorted(set(kinds)) if kinds is not None else None
        where = "conversation_id = ? AND id >= ? AND id < ?"
        if kind_list is not None:
            where += f" AND kind IN ({', '.join('?' for _ in kind_list)})"
        sql = f"SELECT id, kind, payload FROM event WHERE {where} ORDER BY id LIMIT {int(page)}"
        cursor = start
        end = stop if stop is not None else 2**62
        while True:
            with self.store.reading() as db:
                batch = db.execute(sql, (self.id, cursor, end, *(kind_list or ()))).fetchall()
            for seq, kind, payload in batch:
                yield rows.decode(kind, payload, seq)
            if len(batch) < page:
                return
            cursor = batch[-1][0] + 1

    def __iter__(self) -> Iterator[Event]:
        return self.events()

    # --- condensing (see condense.py) -----------------------------------------------

    def condense(self, condenser: "Condenser", *, dry_run: bool = False) -> "View | Condensation":
        """Run ``condenser`` on the current view; a Condensation is stored unless ``dry_run``."""
        from .condense import condense

        return condense(self, condenser, dry_run=dry_run)

    def step(self, condenser: "Condenser") -> "View":
        """Condense if needed, store it, and return the view to send to the model."""
        from .condense import step

        return step(self, condenser)

    def request_condensation(self) -> int:
        """Append a CondensationRequest: the next step must condense."""
        from .condense import request_condensation

        return request_condensation(self)

    def view(self, at: int | None = None) -> "View":
        """What the agent sees now, or saw right after event ``at``."""
        from .view import view_of

        return view_of(self, at)

    @property
    def metadata(self) -> dict[str, Any]:
        with self.store.reading() as db:
            row = db.execute("SELECT metadata FROM conversation WHERE id = ?", (self.id,)).fetchone()
        if row is None:
            raise ConversationNotFound(self.id)
        return json.loads(row[0])
