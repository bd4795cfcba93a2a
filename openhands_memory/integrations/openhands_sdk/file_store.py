"""``DatabaseFileStore``: the OpenHands SDK's ``FileStore`` over this library's tables.

The SDK persists a conversation through a file store rooted at the conversation (see
``paths.py`` for the files). This one maps them onto rows of one conversation whose id is the
SDK's conversation id:

* ``events/event-NNNNN-<id>.json`` is event row NNNNN: the file's JSON is the payload, byte
  for byte, the id (the event's UUID, or whatever id its caller gave it) its uid. A write must be the next id (the log is append-only; a gap, a
  rewrite or a mismatched UUID is refused). Condensations get their bookkeeping rows in the
  same transaction, so the library's view and the CLI see the conversation live.
* ``base_state.json`` is a column of the conversation. HEAD (``conversation.head``) follows
  its ``leaf_event_id`` and ``head_is_empty`` in the same transaction, so that the library's
  view is the path the SDK's ``navigate_to`` chose (``storage/tree.py``); deleting the file
  leaves HEAD where it is.
* the length marker is answered from the rows (so it is never stale), and writing or deleting
  it does nothing;
* any other file is a row of ``conversation_file``, one transaction per write.

``lock(path)`` is a write transaction on the conversation: SQLite's ``BEGIN IMMEDIATE`` or
PostgreSQL's lock on the conversation row, held until the block ends. The SDK appends events
under that lock, so its check-then-append is serialized across processes, and whatever it
writes inside the block commits at once, or not at all. Its ``timeout`` bounds the wait for
that lock on both backends (``TimeoutError`` after it, as the SDK's own stores raise).
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path

from openhands.sdk.io import FileStore

from ...conversation import Conversation, EventStore, Writer
from ...errors import LockTimeout
from ...events import Condensation, event_from_json
from ...storage import Session, tree
from ...storage.recorder import left, wait_seconds
from . import handoff, paths
from .paths import (
    BaseState,
    EventFile,
    EventsDir,
    LengthMarker,
    LockFile,
    OtherFile,
    Root,
)

BLOCK = 256  # events read per statement when the SDK reads the log one file at a time
BLOCKS_KEPT = 8


class DatabaseFileStore(FileStore):
    """An SDK conversation's files, kept as rows of ``path_or_url`` (an SQLite file, created at
    the current schema if missing, or a ``postgresql://`` URL).

    ``conversation_id``: the SDK's conversation id (``LocalConversation(conversation_id=...)``),
    a UUID or its string. The conversation is created by the SDK's first write.
    """

    def __init__(self, path_or_url: str | Path, conversation_id: uuid.UUID | str, *, store: EventStore | None = None):
        self.store = store if store is not None else EventStore(path_or_url)
        self.conversation_id = str(uuid.UUID(str(conversation_id)))
        self.conversation = Conversation(self.store, self.conversation_id)
        self._guard = threading.RLock()  # one thread at a time; lock() holds it for its block
        self._held: Writer | None = None  # the write transaction lock() holds
        self._blocks: OrderedDict[int, dict[int, tuple[str, str]]] = OrderedDict()
        self._exists = False  # the conversation is known to exist (set on first write)

    def close(self) -> None:
        self.store.close()

    def __repr__(self) -> str:
        return f"DatabaseFileStore({self.store.location.label!r}, {self.conversation_id!r})"

    # --- transactions ------------------------------------------------------------------

    @contextmanager
    def _transaction(self, timeout: float | None = None) -> Iterator[Writer]:
        """A write transaction on the conversation, which the SDK's first write creates (the
        conversation's writing context: the cached view learns the events once it commits).
        ``timeout``: the most seconds to wait for its lock (``LockTimeout``)."""
        try:
            with self.conversation.writing(timeout=timeout) as w:
                self._ensure_conversation(w.db)
                yield w
        except BaseException:
            self._exists = False  # rolled back: forget what it did
            raise

    @contextmanager
    def _writing(self) -> Iterator[Writer]:
        """The held lock's transaction, else a transaction of its own."""
        with self._guard:
            if self._held is not None:
                yield self._held
                return
            with self._transaction() as w:
                yield w

    def _ensure_conversation(self, db: Session) -> None:
        if self._exists:  # conversations are deleted only by this store's delete("")
            return
        if not db.conversation_exists(self.conversation_id):
            now = datetime.now(UTC).isoformat()
            db.insert_conversation(self.conversation_id, now, {"created_by": "openhands-sdk"})
        self._exists = True

    @contextmanager
    def _reading(self) -> Iterator[Session]:
        with self._guard:
            if self._held is not None:
                yield self._held.db
                return
            with self.store.reading() as db:
                yield db

    @contextmanager
    def lock(self, path: str, timeout: float = 30.0) -> Iterator[None]:
        """Hold the conversation's write lock (and this store) until the block ends; what is
        written inside commits when it ends without an error.

        As the SDK's stores do, wait at most ``timeout`` seconds in all (for another thread
        of this store, then for another connection's write), then raise ``TimeoutError``; a
        negative ``timeout`` waits as long as it takes."""
        paths.normalize(path)
        limit = math.inf if timeout < 0 else timeout
        deadline = time.monotonic() + limit
        if not self._guard.acquire(timeout=wait_seconds(limit)):
            raise TimeoutError(f"Lock acquisition timed out: {path} (another thread of this process held it)")
        try:
            if self._held is not None:  # re-entered by the thread that holds it
                yield
                return
            with ExitStack() as held:
                try:
                    w = held.enter_context(self._transaction(left(deadline)))
                except LockTimeout as e:  # the lock's wait alone: not the block's own errors
                    raise TimeoutError(f"Lock acquisition timed out: {path} ({e})") from e
                self._held = w
                try:
                    yield
                finally:
                    self._held = None
        finally:
            self._guard.release()

    # --- FileStore ---------------------------------------------------------------------

    def write(self, path: str, contents: str | bytes) -> None:
        match paths.classify(path):
            case LengthMarker() | LockFile():
                return  # the marker is read from the rows; the lock is a transaction
            case BaseState():
                text = _text(contents, path)
                with self._writing() as w:
                    w.db.set_base_state(self.conversation_id, text)
                    self._head_from(w, text)
            case EventFile(index=index, uid=uid):
                self._write_event(index, uid, _text(contents, path))
            case OtherFile(path=clean):
                data = contents.encode() if isinstance(contents, str) else bytes(contents)
                with self._writing() as w:
                    w.db.put_file(self.conversation_id, clean, data, datetime.now(UTC).isoformat())
            case Root() | EventsDir():
                raise IsADirectoryError(f"{path} is a folder, not a file")

    def _head_from(self, w: Writer, text: str) -> None:
        """HEAD as the SDK's state names it (``leaf_event_id``, ``head_is_empty``: it moves
        there when the SDK navigates, and stays with the newest event as the SDK appends). A
        move makes this conversation's cached view be read again once the transaction commits
        (other connections' caches see the write as any other: the transaction holds the
        conversation's lock, which bumps its version on PostgreSQL)."""
        if tree.head_from_base_state(w.db, self.conversation_id, text):
            w.branched = True

    def _write_event(self, index: int, uid: str, text: str) -> None:
        event = event_from_json(text)
        made = handoff.take(event.id) if isinstance(event, Condensation) else None
        if made is not None and made.note is not None:
            event = event.with_note(made.note)  # type: ignore[union-attr]
        if event.id != uid:
            raise ValueError(f"events/{paths.EVENT_NAME.format(index=index, uid=uid)}: the event's id is {event.id}")
        with self._writing() as w:
            last = w.db.last_seq(self.conversation_id)
            if index <= last:
                raise FileExistsError(
                    f"event {index} of conversation {self.conversation_id} is already stored; the log is append-only"
                )
            if index != last + 1:
                raise ValueError(
                    f"event {index} would leave a gap: conversation {self.conversation_id} has {last + 1} events"
                )
            if isinstance(event, Condensation):
                w.condensation(event, calls=made.calls if made is not None else (), payload=text)
            else:
                w.append([event], [text])
        self._remember(index, uid, text)

    def read(self, path: str) -> str:
        kind = paths.classify(path)
        match kind:
            case BaseState():
                with self._reading() as db:
                    text = db.base_state(self.conversation_id)
                if text is None:
                    raise FileNotFoundError(path)
                return text
            case EventFile(index=index, uid=uid):
                with self._guard:
                    found = self._cached(index)
                    if found is None:
                        with self._reading() as db:
                            found = self._event_text(db, index)
                if found is None or found[0] != uid:
                    raise FileNotFoundError(path)
                return found[1]
            case LengthMarker(length=length):
                with self._reading() as db:
                    if db.last_seq(self.conversation_id) + 1 != length:
                        raise FileNotFoundError(path)
                return ""
            case OtherFile(path=clean):
                with self._reading() as db:
                    data = db.file_content(self.conversation_id, clean)
                if data is None:
                    raise FileNotFoundError(path)
                return data.decode()
            case _:
                raise FileNotFoundError(path)

    def list(self, path: str) -> list[str]:
        kind = paths.classify(path)
        clean = paths.normalize(path)
        with self._reading() as db:
            if isinstance(kind, Root):
                entries = [paths.BASE_STATE] if db.base_state(self.conversation_id) is not None else []
                if db.last_seq(self.conversation_id) >= 0:
                    entries.append(paths.EVENTS_DIR + "/")
                names = _children("", db.file_paths(self.conversation_id, ""))
                return entries + [n for n in names if n not in entries]
            if isinstance(kind, EventsDir):
                rows = db.event_page(self.conversation_id, 0, 2**62, 2**62, columns="id, uid")
                events = [paths.event_path(i, u) for i, u in rows]
                return events + _children(paths.EVENTS_DIR + "/", db.file_paths(self.conversation_id, "events/"))
            if self._exists_in(db, kind):
                return [path]
            return _children(clean + "/", db.file_paths(self.conversation_id, clean + "/"))

    def delete(self, path: str) -> None:
        match paths.classify(path):
            case LengthMarker() | LockFile():
                return
            case BaseState():
                with self._writing() as w:
                    w.db.set_base_state(self.conversation_id, None)
            case EventFile() | EventsDir():
                raise PermissionError(f"{path}: events are append-only; delete the conversation instead")
            case Root():
                with self._guard:
                    with self.store.writing() as db:
                        db.delete_conversation(self.conversation_id)
                    self._blocks.clear()
                    self._exists = False
                    self.conversation.views.clear()
            case OtherFile(path=clean):
                with self._writing() as w:
                    w.db.delete_files(self.conversation_id, clean)

    def exists(self, path: str) -> bool:
        kind = paths.classify(path)
        with self._reading() as db:
            if self._exists_in(db, kind):
                return True
            if isinstance(kind, OtherFile):  # a folder of files
                return bool(db.file_paths(self.conversation_id, kind.path + "/"))
            return False

    def _exists_in(self, db: Session, kind: paths.Kind) -> bool:
        cid = self.conversation_id
        match kind:
            case Root():
                return db.conversation_exists(cid)
            case BaseState():
                return db.base_state(cid) is not None
            case EventsDir():
                return db.last_seq(cid) >= 0
            case EventFile(index=index, uid=uid):
                found = self._event_text(db, index)
                return found is not None and found[0] == uid
            case LengthMarker(length=length):
                return db.last_seq(cid) + 1 == length
            case OtherFile(path=clean):
                return db.file_content(cid, clean) is not None
        return False

    def get_absolute_path(self, path: str) -> str:
        """Where the file lives, for messages: the database, the conversation, the path."""
        return f"{self.store.location.label}#{self.conversation_id}/{paths.normalize(path)}"

    # --- reading the log ---------------------------------------------------------------

    def _cached(self, index: int) -> tuple[str, str] | None:
        block = self._blocks.get(index - index % BLOCK)
        return None if block is None else block.get(index)

    def _event_text(self, db: Session, index: int) -> tuple[str, str] | None:
        """(uid, payload) of event ``index``. The SDK reads its log one file at a time (forward
        when it iterates, backward when it walks a branch to its root), so a miss reads the
        aligned block of ``BLOCK`` events around it: a resume costs one statement per block."""
        start = index - index % BLOCK
        block = self._blocks.get(start)
        if block is None or (index not in block and len(block) < BLOCK):
            rows = db.event_page(self.conversation_id, start, start + BLOCK, BLOCK, columns="id, uid, payload")
            block = {i: (u, p) for i, u, p in rows}
            self._blocks[start] = block
            while len(self._blocks) > BLOCKS_KEPT:
                self._blocks.popitem(last=False)
        self._blocks.move_to_end(start)
        return block.get(index)

    def _remember(self, index: int, uid: str, text: str) -> None:
        block = self._blocks.get(index - index % BLOCK)
        if block is not None:
            block[index] = (uid, text)


def _text(contents: str | bytes, path: str) -> str:
    if isinstance(contents, str):
        return contents
    try:
        return bytes(contents).decode()
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None


def _children(prefix: str, file_paths: list[str]) -> list[str]:
    """The entries directly under ``prefix``: files as paths, folders with a trailing "/"."""
    seen: dict[str, None] = {}
    for p in file_paths:
        head, sep, _ = p[len(prefix):].partition("/")
        seen[prefix + head + sep] = None
    return list(seen)
