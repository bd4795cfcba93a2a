"""The library's front door: an event store (one database), and its conversations."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

from .database import Durability, Location
from .errors import (
    AmbiguousConversation,
    ConversationExists,
    ConversationNotFound,
    DuplicateEventId,
    EventNotFound,
    MalformedEvent,
)
from .events import Condensation, CondensationRequest, Event
from .storage import END, IntegrityViolation, Recorder, Session, condensations, open_recorder
from .storage.codec import decode, event_row
from .tokens import RowTokens, TokenCounter
from .view import View, ViewCache

if TYPE_CHECKING:
    import sqlite3

    from .condensers.base import Condenser

DEFAULT_PATH = "openhands-memory.db"


@dataclass(frozen=True)
class ConversationInfo:
    id: str
    created_at: str
    metadata: dict[str, Any]


class EventStore:
    """One database: open or create it, then work with its conversations.

    ``path_or_url``: an SQLite file path, or a ``postgresql://`` URL. ``readonly``: open an
    existing database for reading only (nothing is created or written). A store holds one
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
    ):
        self.recorder: Recorder = open_recorder(
            path_or_url, durability=durability, create=create, readonly=readonly
        )
        self.location = Location.parse(path_or_url)

    @property
    def db(self) -> "sqlite3.Connection":
        """The SQLite connection (for tests and tools that inspect a file directly)."""
        return self.recorder.conn  # type: ignore[attr-defined]

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

    def writing(self, conversation_id: str | None = None) -> "AbstractContextManager[Session]":
        """A write transaction; with a conversation id, it holds that conversation's id lock."""
        return self.recorder.writing(conversation_id)

    def reading(self, *, snapshot: bool = True) -> "AbstractContextManager[Session]":
        """A read transaction: one consistent snapshot, released at the end (``snapshot=False``:
        for a single statement, no transaction around it)."""
        return self.recorder.reading(snapshot=snapshot)

    def version(self, conversation_id: str) -> Any:
        """Changes whenever another connection commits a write (see ``Recorder.version``)."""
        return self.recorder.version(conversation_id)

    # --- conversations ---------------------------------------------------------------

    def create_conversation(
        self, id: str | None = None, *, metadata: dict[str, Any] | None = None
    ) -> "Conversation":
        cid = id or str(uuid.uuid4())
        now = datetime.now(timezone.utc).isoformat()
        try:
            with self.writing() as db:
                db.insert_conversation(cid, now, metadata or {})
        except IntegrityViolation:
            raise ConversationExists(cid) from None
        return Conversation(self, cid)

    def conversation(self, id: str) -> "Conversation":
        if not self.has_conversation(id):
            raise ConversationNotFound(id)
        return Conversation(self, id)

    def find_conversation(self, name: str) -> str:
        """The id ``name`` names: itself, or the one id it is a prefix of."""
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
        with self.reading(snapshot=False) as db:  # one statement: its own snapshot
            return db.conversation_exists(id)

    def __contains__(self, id: object) -> bool:
        return isinstance(id, str) and self.has_conversation(id)

    def conversations(self) -> list[ConversationInfo]:
        with self.reading() as db:
            return [ConversationInfo(*row) for row in db.conversations()]

    def delete_conversation(self, id: str) -> None:
        with self.writing(id) as db:
            if not db.delete_conversation(id):
                raise ConversationNotFound(id)


class Conversation:
    """One conversation's events. Ids are 0, 1, 2, ... assigned inside the write transaction.

    A conversation keeps its latest view (``ViewCache``), which its own appends extend.
    """

    def __init__(self, store: EventStore, id: str):
        self.store = store
        self.id = id
        self.views = ViewCache(self)
        self._version: Any = None  # what the last write of ours left (Session.touch)
        self._counts: dict[str, int] | None = None  # batch counts read by that write (ViewCache)
        self._tokens: dict[str, RowTokens] = {}
        self.writes_held = False  # see holding_writes

    # --- token counts ----------------------------------------------------------------

    def tokens(self, counter: TokenCounter) -> RowTokens:
        """Token totals of this conversation's views by ``counter``, from counts cached in
        the rows (one cache per counter, kept with the conversation, not the condenser)."""
        if counter.name not in self._tokens:
            self._tokens[counter.name] = RowTokens(self, counter)
        return self._tokens[counter.name]

    def _counting(self) -> RowTokens | None:
        """The token cache whose counts new rows carry from their insert (saving the write a
        count would take later): the one in use, when it owns the rows' counts."""
        if len(self._tokens) != 1 or self.writes_held:
            return None
        (rows,) = self._tokens.values()
        return rows if rows.owns_rows else None

    @contextmanager
    def holding_writes(self) -> Iterator[None]:
        """Within the block, token counts are kept in memory, not written: a dry run writes
        nothing at all."""
        held, self.writes_held = self.writes_held, True
        try:
            yield
        finally:
            self.writes_held = held

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
        try:
            if any(isinstance(e, Condensation) for e in events):
                with self.store.writing(self.id) as db:
                    seqs = self.insert(db, events)
            else:
                seqs = self._append_rows(events)
        except IntegrityViolation:
            # Explained after the rollback: PostgreSQL refuses further statements in a
            # transaction that failed.
            with self.store.reading() as db:
                self._explain_integrity_error(db, events)
            raise
        self.committed(events, seqs)
        return seqs

    def _append_rows(self, events: list[Event]) -> list[int]:
        """Events without a Condensation among them (nothing to record beside their rows),
        in a transaction of their own: rows made before it begins, the ids given inside."""
        counted = self._counting()
        rows = [event_row(self.id, -1, e, tokens=counted.count_new(e) if counted is not None else None)
                for e in events]
        got = self.store.recorder.append(self.id, rows, self.views.counts_wanted(events))
        if got is None:
            raise ConversationNotFound(self.id)
        first, self._version, self._counts = got
        return list(range(first, first + len(events)))

    def insert(self, db: Session, events: list[Event], payloads: Sequence[str] | None = None) -> list[int]:
        """Insert inside the caller's write transaction (begun with this conversation's id);
        returns the ids given. Call ``committed`` once the transaction has committed.
        ``payloads``: each event's JSON as the caller holds it (kept byte for byte)."""
        first = self._next_id(db)
        seqs = list(range(first, first + len(events)))
        counted = self._counting()
        texts = payloads if payloads is not None else [None] * len(events)
        db.insert_events([
            event_row(self.id, s, e, p, tokens=counted.count_new(e) if counted is not None else None)
            for s, e, p in zip(seqs, events, texts)
        ])
        for seq, event in zip(seqs, events):
            if isinstance(event, Condensation):
                condensations.record(db, self.id, seq, event)
        self._version = db.touch(self.id)
        return seqs

    def _next_id(self, db: Session) -> int:
        last = db.last_id(self.id)
        if last < 0 and not db.conversation_exists(self.id):
            raise ConversationNotFound(self.id)
        return last + 1

    def _explain_integrity_error(self, db: Session, events: list[Event]) -> None:
        """Raise the error a refused insert means, judged on what is committed."""
        if not db.conversation_exists(self.id):
            raise ConversationNotFound(self.id) from None
        dup = duplicate_uid(db, self.id, events)
        if dup is not None:
            raise DuplicateEventId(self.id, dup) from None

    def committed(self, events: list[Event], seqs: list[int]) -> None:
        """Events this conversation's ``insert`` stored, now committed: give them their ids
        and fold them into the cached view."""
        for e, s in zip(events, seqs):
            e.with_seq(s)
        counts, self._counts = self._counts, None
        self.views.extend(events, self._version, counts)

    # --- reading ---------------------------------------------------------------------

    def __len__(self) -> int:
        with self.store.reading() as db:
            return db.last_id(self.id) + 1

    def get(self, id: int) -> Event:
        with self.store.reading() as db:
            row = db.event(self.id, id)
        if row is None:
            raise EventNotFound(self.id, id)
        return decode(row[0], row[1], id)

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
        cursor = start
        end = stop if stop is not None else END
        while True:
            with self.store.reading() as db:
                batch = db.event_page(self.id, cursor, end, page, kind_list)
            for seq, kind, payload in batch:
                yield decode(kind, payload, seq)
            if len(batch) < page:
                return
            cursor = batch[-1][0] + 1

    def __iter__(self) -> Iterator[Event]:
        return self.events()

    # --- condensing ----------------------------------------------------------------
    # The condenser runs itself against this conversation (condense.py, a layer above): the
    # conversation knows nothing of strategies.

    def condense(self, condenser: "Condenser", *, dry_run: bool = False) -> "View | Condensation":
        """Run ``condenser`` on the current view; a Condensation is stored unless ``dry_run``."""
        return condenser.run(self, dry_run=dry_run)

    def step(self, condenser: "Condenser") -> View:
        """Condense if needed, store it, and return the view to send to the model."""
        return condenser.step(self)

    def request_condensation(self) -> int:
        """Append a CondensationRequest: the next step must condense (as a context-window
        error does)."""
        return self.append(CondensationRequest())

    def view(self, at: int | None = None) -> View:
        """What the agent sees now, or saw right after event ``at``."""
        view = self.views.get() if at is None else self.views.at(at)
        view.conversation = self
        return view

    @property
    def metadata(self) -> dict[str, Any]:
        with self.store.reading() as db:
            meta = db.metadata(self.id)
        if meta is None:
            raise ConversationNotFound(self.id)
        return meta


def duplicate_uid(db: Session, cid: str, events: Iterable[Event], before: int | None = None) -> str | None:
    """The first external id in ``events`` that repeats within them or is already stored
    (``before``: only events with smaller ids count as stored)."""
    seen: set[str] = set()
    uids = []
    for e in events:
        if e.id in seen:
            return e.id
        seen.add(e.id)
        uids.append(e.id)
    found = db.ids_of(cid, END if before is None else before, uids)
    return found[0][1] if found else None
