"""Events as text for a summarizer: lossless, except that each event is cut to a maximum length
keeping its head and tail (the SDK sends 500-character previews without tool arguments,
which makes summaries forget what was done; see its issue #2744)."""

from __future__ import annotations

import json

from ..events import (
    ActionEvent,
    AgentErrorEvent,
    CondensationSummaryEvent,
    Event,
    MessageEvent,
    ObservationEvent,
    RecallAction,
    RecallObservation,
    SystemPromptEvent,
    TextContent,
    UserRejectObservation,
)
from .messages import observation_text


def clip(text: str, limit: int | None) -> str:
    """``text`` cut to ``limit`` characters, keeping the head and the tail."""
    if limit is None or len(text) <= limit:
        return text
    marker = f"\n[... {len(text) - limit} characters left out ...]\n"
    keep = max(limit - len(marker), 0)
    head = (keep + 1) // 2
    return text[:head] + marker + text[len(text) - (keep - head):] if keep else text[:limit]


def _texts(parts) -> str:
    return "\n".join(p.text for p in parts if isinstance(p, TextContent))


def _args(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False, indent=1)
    except (ValueError, TypeError):
        return arguments


def describe(e: Event) -> str:
    """One event in full, as a summarizer reads it."""
    ref = f"#{e.seq}" if e.seq is not None else e.id
    if isinstance(e, MessageEvent):
        return f"{ref} {e.source} wrote:\n{_texts(list(e.llm_message.content) + list(e.extended_content))}"
    if isinstance(e, ActionEvent):
        thought = _texts(e.thought)
        lines = [f"{ref} agent called {e.tool_name} (call {e.tool_call_id}) with:", _args(e.tool_call.arguments)]
        if thought:
            lines.insert(0, f"{ref} agent thought: {thought}")
        if e.reasoning_content:
            lines.append(f"reasoning: {e.reasoning_content}")
        return "\n".join(lines)
    if isinstance(e, ObservationEvent):
        body = "\n".join(p.get("text", "[image]") for p in observation_text(e))
        return f"{ref} result of {e.tool_name} (call {e.tool_call_id}):\n{body}"
    if isinstance(e, AgentErrorEvent):
        return f"{ref} error from {e.tool_name} (call {e.tool_call_id}):\n{e.error}"
    if isinstance(e, UserRejectObservation):
        return f"{ref} {e.rejection_source} refused the {e.tool_name} call {e.tool_call_id}: {e.rejection_reason}"
    if isinstance(e, CondensationSummaryEvent):
        return f"{ref} earlier summary:\n{e.summary}"
    if isinstance(e, SystemPromptEvent):
        return f"{ref} system prompt:\n{e.system_prompt.text}"
    if isinstance(e, RecallAction):
        return f"{ref} agent looked up knowledge for: {e.query}"
    if isinstance(e, RecallObservation):
        return f"{ref} knowledge found:\n{e.content}"
    return f"{ref} {e.kind}: {e.model_dump_json(exclude_none=True)}"  # type: ignore[attr-defined]


def render(events: list[Event], max_event_length: int | None) -> str:
    return "\n\n".join(clip(describe(e), max_event_length) for e in events)
