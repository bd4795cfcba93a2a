"""Events to rows and rows back to events: the one place that knows both shapes."""

from __future__ import annotations

from typing import Any

from ..errors import EventTooLarge, UnstorableIdentifier, shown
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

#: An event's identifiers: its external id, its tool call's id, the tool's name and the model
#: response's id (columns of its row, which lookups compare: a result with its call, a
#: response's batch, a Condensation's or a pin's external ids) and its parent's id (looked up
#: by value when it is appended). None may hold a NUL (U+0000), on either backend: PostgreSQL
#: cannot keep one in a text column (it stored ``ter\0m`` as ``ter`` while the JSON kept it
#: whole, and then failed every lookup by the JSON's value), and SQLite can, so that the two
#: would disagree. Such an event is refused whole, with nothing written, rather than its
#: columns mapped to something else: no model provider or agent makes an identifier with a
#: NUL, a mapping could make two ids one (or need every stored id rewritten to stay
#: reversible), and the JSON, which is kept byte for byte, would still say otherwise. Every
#: row is built by ``event_row`` (or ``io/quick_rows.py``, which leaves such an event to it),
#: so an append, a batch (PostgreSQL's COPY), ``Conversation.writing``, an import and the
#: SDK's store all refuse it. A NUL elsewhere (in a message's text, a tool's output) is
#: stored whole: the JSON escapes it, and the search index reads it as a space.
IDENTIFIERS = ("id", "tool_call_id", "tool_name", "llm_response_id", "parent_id")


def identifier_with_nul(event: Event) -> tuple[str, str] | None:
    """(field, value) of the first of ``event``'s identifiers holding a NUL; None if none does."""
    fields = event.__dict__
    if "\x00" not in f"{event.id}{fields.get('tool_call_id')}{fields.get('tool_name')}" \
            f"{fields.get('llm_response_id')}{event.parent_id}":  # one test for all (every row asks)
        return None
    for name in IDENTIFIERS:
        value = fields.get(name)
        if value is not None and "\x00" in value:
            return name, value
    return None


def check_identifiers(event: Event, done: str = "nothing was written") -> None:
    """``UnstorableIdentifier`` when one of ``event``'s identifiers holds a NUL (``IDENTIFIERS``)."""
    found = identifier_with_nul(event)
    if found is not None:
        raise UnstorableIdentifier(f"event {shown(event.id)} ({event.__dict__['kind']})", *found, done)


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
    check_identifiers(event)
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
