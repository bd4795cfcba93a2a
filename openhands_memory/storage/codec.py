"""Events to rows and rows back to events: the one place that knows both shapes."""

from __future__ import annotations

from typing import Any

from ..errors import EventTooLarge
from ..events import EVENT_CLASSES, Event

#: The most bytes (UTF-8) of JSON one event may hold. Every write builds its row here, so an
#: append, the SDK's store, an import and a condensation all refuse a larger event, and an
#: export never writes a line the import cannot read back (it reads one event, a JSON Lines
#: line or an SDK event file, with this bound, so that a hostile file cannot exhaust memory).
#: 64 MB is far past anything a model is shown (the SDK cuts a tool's output to ~50,000
#: characters) and far below what either database stores in a column (1 GB).
MAX_EVENT_BYTES = 64 << 20


def check_size(payload: str, what: str, done: str = "it was not written") -> None:
    """Refuse ``payload`` if it is larger than ``MAX_EVENT_BYTES``. A UTF-8 character is at
    most 4 bytes, so only a string longer than a quarter of the limit is encoded to measure it."""
    if len(payload) > MAX_EVENT_BYTES // 4:
        size = len(payload.encode("utf-8", errors="surrogatepass"))
        if size > MAX_EVENT_BYTES:
            raise EventTooLarge(what, size, MAX_EVENT_BYTES, done)

EVENT_COLUMNS = (
    "conversation_id", "id", "kind", "source", "timestamp", "uid", "tool_call_id", "tool_name",
    "llm_response_id", "has_thinking", "llm_visible", "token_count", "payload",
)


def event_row(
    conversation_id: str, seq: int, event: Event, payload: str | None = None, tokens: int | None = None,
    checked: bool = True,
) -> tuple[Any, ...]:
    """Values in ``EVENT_COLUMNS`` order. ``payload``: the event's JSON when the caller has it
    already (an import keeps the bytes it read); ``tokens``: its count, when one is kept.
    ``checked=False``: the payload's size is judged later, where the row is written
    (``check_rows``: an import parses in one process and writes in another)."""
    # Field values live in __dict__; reading them there skips pydantic's __getattr__, which
    # raises (slowly) for the kinds that lack a field.
    fields = event.__dict__
    if payload is None:
        payload = event.model_dump_json(exclude_none=True)
    if checked:
        check_size(payload, f"event {event.id} ({fields['kind']})")
    return (
        conversation_id,
        seq,
        fields["kind"],
        event.source,
        event.timestamp,
        event.id,
        fields.get("tool_call_id"),
        fields.get("tool_name"),
        fields.get("llm_response_id"),
        event.has_thinking,
        type(event).llm_visible,
        tokens,
        payload,
    )


def check_rows(rows: list[tuple[Any, ...]]) -> None:
    """``check_size`` for rows made with ``checked=False``."""
    limit = MAX_EVENT_BYTES // 4
    if any(len(row[-1]) > limit for row in rows):
        for row in rows:
            check_size(row[-1], f"event {row[5]} ({row[2]})")


def decode(kind: str, payload: str, seq: int) -> Event:
    cls = EVENT_CLASSES.get(kind)
    if cls is None:  # written by a newer version that knows more kinds
        from ..events import event_from_json

        return event_from_json(payload).with_seq(seq)
    return cls.model_validate_json(payload).with_seq(seq)
