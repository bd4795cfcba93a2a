"""What every importer shares: the error, fast event parsing, checks, and the one transaction."""

from __future__ import annotations

import gc
import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Union

from .. import ranges
from ..storage import IntegrityViolation, condensations
from ..storage.codec import event_row
from ..errors import ConversationExists, MalformedEvent, OpenHandsMemoryError
from ..events import EVENT_CLASSES, Condensation, Event, event_from_dict, event_from_json

if TYPE_CHECKING:
    from ..store import EventStore

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
    try:
        return _event_adapter().validate_json(text)
    except Exception:  # pydantic's ValidationError; explained below in our own words
        pass
    try:
        return event_from_json(text)
    except MalformedEvent as e:
        raise ImportFailed(where, str(e)) from None


def parse_event_dict(data: Any, where: object) -> Event:
    try:
        return _event_adapter().validate_python(data)
    except Exception:
        pass
    try:
        return event_from_dict(data)
    except MalformedEvent as e:
        raise ImportFailed(where, str(e)) from None


def load_json(text: str | bytes, where: object) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ImportFailed(where, f"not valid JSON: {e}") from None
    except UnicodeDecodeError as e:
        raise ImportFailed(where, f"not UTF-8 text: {e}") from None


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

    def resolved(self, cond: Condensation, seq: int) -> Condensation:
        """``cond`` with its external ids turned into id ranges, as the store would turn them
        (ids that name no earlier event are ignored), for recording its ranges. Its stored JSON
        is unchanged."""
        if not cond.forgotten_event_ids:
            return cond
        seqs = [s for s in (self.seq_of.get(u) for u in cond.forgotten_event_ids) if s is not None and s < seq]
        copy = cond.model_copy(update={
            "forgotten_event_ids": [],
            "forgotten_ranges": list(cond.forgotten_ranges or []) + ranges.runs_of(seqs),
        })
        return copy.with_note(cond.note) if cond.note is not None else copy


# --- writing ---------------------------------------------------------------------------------


@contextmanager
def no_gc() -> Iterator[None]:
    """Parsing allocates millions of small objects that all die young: collecting them while
    they are alive only costs time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def write_conversation(
    store: "EventStore",
    conversation_id: str,
    metadata: dict[str, Any],
    batches: Iterable[list[tuple[Any, ...]]],
    result: ImportResult,
    progress: Progress | None = None,
) -> ImportResult:
    """Create ``conversation_id`` and store every batch, all in one write transaction.

    Each batch item is ``(event, where)`` or ``(event, where, raw JSON text)``. Events get ids
    0, 1, 2, … in order; each batch is one ``executemany``, and a Condensation's ranges are
    recorded once the events before it are in (as ``Conversation.insert`` does).

    ``batches`` is consumed inside the transaction, so a bad event anywhere (even in the last
    file) rolls everything back: the conversation is not created at all.
    """
    checker = Checker()
    now = datetime.now(timezone.utc).isoformat()
    with no_gc(), store.writing(conversation_id) as db:
        try:
            db.insert_conversation(conversation_id, now, metadata)
        except IntegrityViolation:
            raise ConversationExists(conversation_id) from None
        for batch in batches:
            if not batch:
                continue
            first = checker.count
            for item in batch:
                checker.add(item[0], item[1])
            # The file's own JSON text is stored as the payload when there is one: the SDK
            # writes each event as ``model_dump_json(exclude_none=True)``, the form the store
            # keeps, and the text was just validated into the event (a quarter of the
            # import's time is saved, and exporting writes the file back byte for byte).
            db.insert_events(
                [event_row(conversation_id, first + k, item[0], item[2] if len(item) > 2 else None)
                 for k, item in enumerate(batch)]
            )
            for k, item in enumerate(batch):
                if isinstance(item[0], Condensation):
                    seq = first + k
                    condensations.record(db, conversation_id, seq, checker.resolved(item[0], seq))
            if progress is not None:
                progress(len(batch))
    result.events = checker.count
    result.condensations = checker.condensations
    return result


def chunked(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
