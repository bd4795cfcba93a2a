"""Events to provider messages, in the shape litellm takes.

* the system prompt first (as the view has it);
* one assistant message per parallel batch, with all its tool calls, and the batch's first
  action's thought, thinking blocks and reasoning;
* one tool message per result, placed right after its batch: a provider rejects a tool call
  whose result does not follow it, so results are pulled forward past any event that sits
  between (the SDK sends them in event order and can draw that rejection);
* a summary as a user message; adjacent plain user messages merged into one.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from .events import (
    ActionEvent,
    AgentErrorEvent,
    CondensationSummaryEvent,
    Content,
    Event,
    ImageContent,
    MessageEvent,
    ObservationBase,
    ObservationEvent,
    RecallAction,
    RecallObservation,
    SystemPromptEvent,
    TextContent,
    UserRejectObservation,
)

Msg = dict[str, Any]


def _parts(content: Sequence[Content]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for c in content:
        if isinstance(c, TextContent):
            out.append({"type": "text", "text": c.text})
        elif isinstance(c, ImageContent):
            out.extend({"type": "image_url", "image_url": {"url": u}} for u in c.image_urls)
    return out


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


def observation_text(e: ObservationEvent) -> list[dict[str, Any]]:
    """An observation's content parts; tools that carry no ``content`` are shown as JSON."""
    content = e.observation.get("content")
    parts: list[dict[str, Any]] = []
    if isinstance(content, list):
        for item in content:
            if isinstance(item, dict) and item.get("type", "text") == "text":
                parts.append({"type": "text", "text": str(item.get("text", ""))})
            elif isinstance(item, dict) and item.get("type") == "image":
                parts.extend({"type": "image_url", "image_url": {"url": u}} for u in item.get("image_urls", []))
    elif isinstance(content, str):
        parts.append({"type": "text", "text": content})
    else:
        shown = {k: v for k, v in e.observation.items() if k != "kind"}
        parts.append({"type": "text", "text": json.dumps(shown, ensure_ascii=False)})
    return parts + _parts(e.extended_content)


def result_message(e: ObservationBase) -> Msg:
    if isinstance(e, ObservationEvent):
        content = observation_text(e)
    elif isinstance(e, UserRejectObservation):
        content = _text(f"The user did not allow this action ({e.rejection_source}): {e.rejection_reason}")
    elif isinstance(e, AgentErrorEvent):
        content = _text(e.error)
    else:  # pragma: no cover - every result kind is handled above
        content = _text("")
    return {"role": "tool", "tool_call_id": e.tool_call_id, "name": e.tool_name, "content": content}


def batch_message(batch: Sequence[ActionEvent]) -> Msg:
    first = batch[0]
    msg: Msg = {
        "role": "assistant",
        "content": _parts(first.thought) or None,
        "tool_calls": [
            {
                "id": a.tool_call.id,
                "type": "function",
                "function": {"name": a.tool_call.name, "arguments": a.tool_call.arguments},
            }
            for a in batch
        ],
    }
    if first.thinking_blocks:
        msg["thinking_blocks"] = [b.model_dump(exclude_none=True) for b in first.thinking_blocks]
    if first.reasoning_content:
        msg["reasoning_content"] = first.reasoning_content
    return msg


def single_message(e: Event) -> Msg | None:
    if isinstance(e, SystemPromptEvent):
        parts = _parts([e.system_prompt] + ([e.dynamic_context] if e.dynamic_context else []))
        return {"role": "system", "content": parts}
    if isinstance(e, MessageEvent):
        m = e.llm_message
        msg: Msg = {"role": m.role, "content": _parts(list(m.content) + list(e.extended_content))}
        if m.role == "assistant" and m.thinking_blocks:
            msg["thinking_blocks"] = [b.model_dump(exclude_none=True) for b in m.thinking_blocks]
        if m.role == "assistant" and m.reasoning_content:
            msg["reasoning_content"] = m.reasoning_content
        if m.name:
            msg["name"] = m.name
        return msg
    if isinstance(e, CondensationSummaryEvent):
        return {"role": "user", "content": _text(e.summary)}
    if isinstance(e, RecallObservation):
        return {"role": "user", "content": _text(e.content)}
    if isinstance(e, RecallAction):
        return None  # the legacy agent never showed its recall requests to the model
    return None


def _is_plain_user(m: Msg) -> bool:
    return m["role"] == "user" and not {"tool_calls", "tool_call_id", "name"} & m.keys()


def _add(messages: list[Msg], msg: Msg) -> None:
    if messages and _is_plain_user(messages[-1]) and _is_plain_user(msg):
        messages[-1] = {**messages[-1], "content": messages[-1]["content"] + msg["content"]}
    else:
        messages.append(msg)


def fresh(m: Msg) -> Msg:
    """A copy of a message that shares no mutable part with the original (a caller may add
    cache markers to what it is given without touching the view's memo)."""
    out = dict(m)
    if isinstance(m.get("content"), list):
        out["content"] = [dict(p) for p in m["content"]]
    if "tool_calls" in m:
        out["tool_calls"] = [{**c, "function": dict(c["function"])} for c in m["tool_calls"]]
    if "thinking_blocks" in m:
        out["thinking_blocks"] = [dict(b) for b in m["thinking_blocks"]]
    return out


def events_to_messages(events: Sequence[Event], after: Sequence[Msg] = ()) -> list[Msg]:
    """The messages for ``events``; with ``after``, appended to those (merging at the seam)."""
    results: dict[str, int] = {}
    for i, e in enumerate(events):
        if isinstance(e, ObservationBase):
            results.setdefault(e.tool_call_id, i)
    used: set[int] = set()
    messages: list[Msg] = list(after)
    i = 0
    while i < len(events):
        e = events[i]
        if i in used:
            i += 1
            continue
        if isinstance(e, ActionEvent):
            batch = [e]
            j = i + 1
            while j < len(events) and isinstance(events[j], ActionEvent) and events[j].llm_response_id == e.llm_response_id:  # type: ignore[attr-defined]
                batch.append(events[j])  # type: ignore[arg-type]
                j += 1
            # A call without a result would be rejected by the provider: leave it out.
            answered = [a for a in batch if a.tool_call_id in results]
            if answered:
                _add(messages, batch_message(answered))
                for a in answered:
                    k = results[a.tool_call_id]
                    if k not in used:
                        used.add(k)
                        _add(messages, result_message(events[k]))  # type: ignore[arg-type]
            i = j
            continue
        if isinstance(e, ObservationBase):
            i += 1  # a result whose call is not in the view has nothing to answer
            continue
        msg = single_message(e)
        if msg is not None:
            _add(messages, msg)
        i += 1
    return messages
