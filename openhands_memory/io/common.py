"""What every importer shares: the error, fast event parsing, checks, and the one transaction."""

from __future__ import annotations

import os
import re
import stat
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Iterable, Iterator, Union

from .. import limits, ranges
from ..allocation import collector_paused
from ..conversation import Conversation, duplicate_uid
from ..errors import ConversationExists, ConversationNotFound, MalformedEvent, OpenHandsMemoryError, shown
from ..events import EVENT_CLASSES, Condensation, Event, event_from_dict
from ..storage import IntegrityViolation
# MAX_EVENT_BYTES: one event (an event file, a JSON Lines line), the bound every write keeps.
from ..storage.codec import MAX_EVENT_BYTES, identifier_with_nul

if TYPE_CHECKING:
    from ..conversation import EventStore, Writer

Progress = Callable[[int], None]  # called with the number of events just written


class ImportFailed(OpenHandsMemoryError):
    """A file to import is unreadable or malformed. Nothing was imported."""

    def __init__(self, where: object, what: str):
        self.where, self.what = str(where), what
        super().__init__(f"{where}: {what}")


@dataclass
class ImportResult:
    conversation_id: str
    format: str  # "openhands", "legacy", "jsonl" or "json"
    source: str
    events: int = 0
    condensations: int = 0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "conversation": self.conversation_id,
            "format": self.format,
            "source": self.source,
            "events": self.events,
            "condensations": self.condensations,
            "notes": self.notes,
        }


# --- parsing -------------------------------------------------------------------------------

_adapter: Any = None


def _event_adapter() -> Any:
    """One pydantic validator for every kind, dispatching on ``kind`` inside pydantic-core.

    ``validate_json`` parses and validates in one Rust call, which is what makes bulk imports
    fast; errors are re-derived through ``event_from_json`` for the library's wording.
    """
    global _adapter
    if _adapter is None:
        from typing import Annotated

        from pydantic import Field, TypeAdapter

        union = Annotated[Union[tuple(EVENT_CLASSES.values())], Field(discriminator="kind")]  # type: ignore[valid-type]
        _adapter = TypeAdapter(union)
    return _adapter


def parse_event_json(text: str | bytes, where: object) -> Event:
    """The event one JSON document holds; ``ImportFailed`` naming ``where`` if it is bad."""
    raw = text.encode("utf-8", errors="surrogatepass") if isinstance(text, str) else text
    # pydantic reads NaN and Infinity, which are not JSON (SQLite's json functions refuse a
    # payload holding them): such text takes the strict path below.
    if b"NaN" not in raw and b"Infinity" not in raw:
        try:
            event = _event_adapter().validate_json(raw)
        except Exception:  # pydantic's ValidationError; explained below in our own words
            pass
        else:
            return storable(event, where)
    return parse_event_dict(load_json(raw, where), where)


def parse_event_dict(data: Any, where: object) -> Event:
    try:
        return storable(_event_adapter().validate_python(data), where)
    except ImportFailed:
        raise
    except Exception:
        pass
    try:
        return storable(event_from_dict(data), where)
    except MalformedEvent as e:
        raise ImportFailed(where, str(e)) from None


def storable(event: Event, where: object) -> Event:
    """``event``, unless one of its identifiers holds a NUL, which no stored event's may
    (``codec.IDENTIFIERS``): then ``ImportFailed`` naming ``where``, as the store would refuse
    it without naming the file or line."""
    found = identifier_with_nul(event)
    if found is not None:
        raise ImportFailed(where, f"the event's {found[0]} {shown(found[1])} holds a NUL character (U+0000), "
                                  "which no identifier may hold")
    return event


def load_json(text: str | bytes, where: object) -> Any:
    """Parse JSON with the bounds every input is read with (see ``MAX_DEPTH``).

    pydantic-core's parser is used rather than the ``json`` module: it is strict about UTF-8
    and about lone surrogates (which SQLite cannot store), it refuses numbers of more than
    4,300 digits, and it stops at ``MAX_DEPTH`` levels of nesting with an error instead of
    exhausting the stack.
    """
    from pydantic_core import from_json

    if isinstance(text, str):
        try:
            text = text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ImportFailed(where, f"not valid text: {e.reason} at character {e.start}") from None
    try:
        return from_json(text, allow_inf_nan=False)
    except ValueError as e:
        problem, line, column = json_problem(str(e))
        raise ImportFailed(_at(where, line, column), problem) from None


_POSITION = re.compile(r"\s*at line (\d+) column (\d+)$")
_LINE_LABEL = re.compile(r":\d+$")


def json_problem(message: str) -> tuple[str, int | None, int | None]:
    """pydantic-core's parse error in our words, and the line and column it names."""
    found = _POSITION.search(message)
    line, column = (int(found.group(1)), int(found.group(2))) if found else (None, None)
    text = message[: found.start()] if found else message
    if text.startswith("recursion limit exceeded"):
        return f"JSON nested deeper than {MAX_DEPTH} levels", line, column
    if text.startswith("number out of range"):
        return f"a number of more than {MAX_DIGITS:,} digits", line, column
    if "unicode" in text.lower() or "utf-8" in text.lower():
        return "not valid UTF-8 text", line, column
    return f"not valid JSON: {text}", line, column


def _at(where: object, line: int | None, column: int | None) -> str:
    """``where`` with the position inside it: ``file:line:column``, or ``file:N:column`` for
    line N of a JSON Lines file (whose text is one line)."""
    label = str(where)
    if line is None:
        return label
    if _LINE_LABEL.search(label) and line == 1:
        return f"{label}:{column}"
    return f"{label}:{line}:{column}"


# --- bounded reading -------------------------------------------------------------------------

MAX_DEPTH = 200  # pydantic-core's parser refuses JSON nested deeper than this
MAX_DIGITS = 4300  # and numbers of more digits than this (whatever sys.set_int_max_str_digits says)
MAX_DOCUMENT_BYTES = 1 << 30  # a whole JSON document: a legacy trajectory, a JSON list


def _size(n: int) -> str:
    return f"{n >> 20:,} MB" if n >= 1 << 20 else f"{n:,} bytes"


def open_regular(path: str | Path, *, name: str | None = None, dir_fd: int | None = None) -> int:
    """A descriptor of ``path``, refused unless it is a regular file (a FIFO, a device such as
    ``/dev/zero`` or a socket could be read forever). ``name`` and ``dir_fd``: opened as
    ``name`` in the folder ``dir_fd`` holds open (``path`` then only names it in errors),
    which spares the system the walk down ``path``."""
    fd = open_nonblocking(path, name=name, dir_fd=dir_fd)
    try:
        refuse_irregular(fd, path)
    except ImportFailed:
        os.close(fd)
        raise
    return fd


def open_nonblocking(path: str | Path, *, name: str | None = None, dir_fd: int | None = None) -> int:
    """A descriptor of ``path`` (see ``open_regular``) that no read can block on: a FIFO
    without a writer reads as empty. The caller judges what it is (``refuse_irregular``)."""
    try:
        return os.open(path if name is None else name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0), dir_fd=dir_fd)
    except OSError as e:
        raise ImportFailed(path, f"cannot read it: {e.strerror}") from None


def refuse_irregular(fd: int, path: str | Path) -> None:
    """``ImportFailed`` naming ``path`` unless ``fd`` is a regular file."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError as e:
        raise ImportFailed(path, f"cannot read it: {e.strerror}") from None
    if not stat.S_ISREG(mode):
        what = "a folder" if stat.S_ISDIR(mode) else "a device, pipe or socket"
        raise ImportFailed(path, f"not a regular file (it is {what})")


def read_bounded(path: str | Path, limit: int = MAX_DOCUMENT_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; ``ImportFailed`` otherwise."""
    fd = open_regular(path)
    try:
        parts: list[bytes] = []
        total = 0
        while chunk := os.read(fd, min(1 << 20, limit + 1 - total)):
            parts.append(chunk)
            total += len(chunk)
            if total > limit:
                raise ImportFailed(path, f"larger than the {_size(limit)} a file may hold here")
    except OSError as e:
        raise ImportFailed(path, f"cannot read it: {e.strerror}") from None
    finally:
        os.close(fd)
    return b"".join(parts)


def read_stream(stream: BinaryIO, where: str, limit: int = MAX_DOCUMENT_BYTES) -> bytes:
    """At most ``limit`` bytes of a stream (stdin); ``ImportFailed`` when it holds more."""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise ImportFailed(where, f"more than the {_size(limit)} one input may hold")
    return data


def decode_utf8(data: bytes, where: object) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ImportFailed(f"{where}:{line}", f"not valid UTF-8 text (byte {e.start})") from None


# --- checks before anything is written -----------------------------------------------------


class Checker:
    """Checks a stream of events that will get ids 0, 1, 2, …, naming the culprit's place.

    The store would refuse these too, but only after the fact and without saying which file
    or line was at fault. It also remembers each external id's sequence id, so that the
    import can resolve a Condensation's ``forgotten_event_ids`` without asking SQL.
    """

    def __init__(self) -> None:
        self.count = 0
        self.condensations = 0
        self.seq_of: dict[str, int] = {}
        self._where: list[object] = []
        # The ids of this batch and the one before, as ``seq_of`` has them: the events a
        # Condensation forgets are mostly its recent ones, which a small dict finds in the
        # processor's cache; in ``seq_of``, a million ids, each lookup missed it (a million
        # SDK events: 1.1 s of resolving, 0.5 s this way).
        self._newer: dict[str, int] = {}
        self._older: dict[str, int] = {}

    def add(self, event: Event, where: object) -> None:
        first = self.seq_of.get(event.id)
        if first is not None:
            raise ImportFailed(where, f"event id {event.id!r} appears twice (first at {self._where[first]})")
        self.seq_of[event.id] = self.count
        self._where.append(where)
        if isinstance(event, Condensation):
            self.condensations += 1
            for start, end in event.forgotten_ranges or []:
                if start <= end and (start < 0 or end >= self.count):
                    raise ImportFailed(
                        where,
                        f"Condensation: forgotten range [{start}, {end}] must lie within the "
                        f"events before it (0..{self.count - 1})",
                    )
        self.count += 1

    def add_batch(self, batch: list[tuple[Any, ...]]) -> None:
        """``add`` for each ``(event, where, ...)`` of a batch, in order (the same checks; a
        load's loop, without a call per event)."""
        seq_of, wheres, count = self.seq_of, self._where, self.count
        self._older, self._newer = self._newer, {}
        newer = self._newer
        try:
            for item in batch:
                event = item[0]
                uid = event.id
                if uid in seq_of or isinstance(event, Condensation):
                    self.count = count
                    self.add(event, item[1])
                    newer[uid] = count
                    count += 1
                    continue
                seq_of[uid] = newer[uid] = count
                wheres.append(item[1])
                count += 1
        finally:
            self.count = count

    def resolved(self, cond: Condensation, seq: int) -> Condensation:
        """``cond`` with its external ids turned into id ranges, as the store would turn them
        (ids that name no earlier event are ignored), for recording its ranges. Its stored JSON
        is unchanged."""
        ids = cond.forgotten_event_ids
        if not ids:
            return cond
        found = list(map(self._newer.get, ids))
        if None in found:
            older, seq_of = self._older, self.seq_of
            found = [s if s is not None else older[i] if i in older else seq_of.get(i) for s, i in zip(found, ids)]
        seqs = [s for s in found if s is not None and s < seq]
        copy = cond.model_copy(update={
            "forgotten_event_ids": [],
            "forgotten_ranges": list(cond.forgotten_ranges or []) + ranges.runs_of(seqs),
        })
        return copy.with_note(cond.note) if cond.note is not None else copy


# --- writing ---------------------------------------------------------------------------------


def write_conversation(
    store: "EventStore",
    conversation_id: str,
    metadata: dict[str, Any],
    batches: Iterable[list[tuple[Any, ...]]],
    result: ImportResult,
    progress: Progress | None = None,
    finish: "Callable[[Writer], None] | None" = None,
) -> ImportResult:
    """Create ``conversation_id`` and store every batch, all in one write transaction.

    Each batch item is ``(event, where)``, ``(event, where, raw JSON text)``, or, from a
    child process that parsed the input (``io/parallel.py``), ``(event, where, raw JSON text,
    row)``, the event then a ``parallel.Head`` unless its row is None. Events get ids
    0, 1, 2, … in order; each batch is one ``executemany`` through the conversation's writing
    context (``Writer.load``), which records a Condensation's ranges once the events before it
    are in.

    ``batches`` is consumed inside the transaction, so a bad event anywhere (even in the last
    file) rolls everything back: the conversation is not created at all. ``finish`` is called
    with the writing context once every batch is in, still inside the transaction (an SDK
    folder's HEAD).
    """
    checker = Checker()
    now = datetime.now(timezone.utc).isoformat()
    with collector_paused(), Conversation(store, conversation_id).writing() as w:
        try:
            w.db.insert_conversation(conversation_id, now, metadata)
        except IntegrityViolation:
            raise ConversationExists(conversation_id) from None
        # Into an empty event table (a new file), the indexes with random keys (external ids,
        # response ids) are built once the rows are in, still in this transaction; the
        # checker holds every id meanwhile, and nothing in a load counts batches.
        deferred = w.db.defer_event_indexes()
        try:
            _load(w, checker, batches, progress)
        finally:
            close = getattr(batches, "close", None)
            if close is not None:  # a generator's end now, not at its collection (its children)
                close()
        w.db.build_indexes(deferred)
        if finish is not None:
            finish(w)
    result.events = checker.count
    result.condensations = checker.condensations
    return result


def _load(w: "Writer", checker: Checker, batches: Iterable[list[tuple[Any, ...]]], progress: Progress | None) -> None:
    for batch in batches:
        if not batch:
            continue
        checker.add_batch(batch)
        # The file's own JSON text is stored as the payload when there is one: the SDK
        # writes each event as ``model_dump_json(exclude_none=True)``, the form the store
        # keeps, and the text was just validated into the event (a quarter of the
        # import's time is saved, and exporting writes the file back byte for byte).
        w.load([item[0] for item in batch], [item[2] if len(item) > 2 else None for item in batch],
               checker.resolved, checker.seq_of,
               [item[3] for item in batch] if len(batch[0]) > 3 else None)
        if progress is not None:
            progress(len(batch))


# --- appending -------------------------------------------------------------------------------


@dataclass
class AppendResult:
    conversation_id: str
    created: bool
    ids: list[int]


def append_events(
    store: "EventStore", conversation_id: str, events: list[tuple[Event, str]], *, create: bool = False
) -> AppendResult:
    """Append ``(event, where)`` pairs to a conversation in one write transaction; with
    ``create``, start the conversation first when it does not exist, in the same transaction.

    All or nothing: when any event is refused (an external id that repeats, in the input or
    in the conversation) the error names its place, the conversation is not created and
    nothing is appended.
    """
    if limits.conversation_id_problem(conversation_id) is not None and not store.has_conversation(conversation_id):
        # (an id no new conversation may have, asked of the database only as has_conversation
        # asks, which any text can: an older SQLite file may hold such a conversation)
        if create:
            limits.conversation_id(conversation_id)
        raise ConversationNotFound(conversation_id)
    first_at: dict[str, str] = {}
    for event, where in events:
        if event.id in first_at:
            raise ImportFailed(where, f"event id {event.id!r} appears twice (first at {first_at[event.id]})")
        first_at[event.id] = where
    with Conversation(store, conversation_id).writing() as w:
        db = w.db
        created = False
        if not db.conversation_exists(conversation_id):
            if not create:
                raise ConversationNotFound(conversation_id)
            db.insert_conversation(conversation_id, datetime.now(timezone.utc).isoformat(), {})
            created = True
        dup = duplicate_uid(db, conversation_id, [e for e, _ in events])
        if dup is not None:
            raise ImportFailed(
                first_at.get(dup, conversation_id),
                f"event id {dup!r} is already in conversation {conversation_id!r}",
            )
        ids = w.append([e for e, _ in events]) if events else []
    return AppendResult(conversation_id, created, ids)
