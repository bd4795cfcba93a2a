"""Events to rows and rows back to events: the one place that knows both shapes."""

from __future__ import annotations

from typing import Any

from ..events import EVENT_CLASSES, Event

EVENT_COLUMNS = (
    "conversation_id", "id", "kind", "source", "timestamp", "uid", "tool_call_id", "tool_name",
    "llm_response_id", "has_thinking", "llm_visible", "token_count", "payload",
)


def event_row(
    conversation_id: str, seq: int, event: Event, payload: str | None = None, tokens: int | None = None
) -> tuple[Any, ...]:
    """Values in ``EVENT_COLUMNS`` order. ``payload``: the event's JSON when the caller has it
    already (an import keeps the bytes it read); ``tokens``: its count, when one is kept."""
    # Field values live in __dict__; reading them there skips pydantic's __getattr__, which
    # raises (slowly) for the kinds that lack a field.
    fields = event.__dict__
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
        payload if payload is not None else event.model_dump_json(exclude_none=True),
    )


def decode(kind: str, payload: str, seq: int) -> Event:
    cls = EVENT_CLASSES.get(kind)
    if cls is None:  # written by a newer version that knows more kinds
        from ..events import event_from_json

        return event_from_json(payload).with_seq(seq)
    return cls.model_validate_json(payload).with_seq(seq)
