"""The workload's records as Responses API input items, as the OpenAI Agents SDK stores a
run's output (standard library only: both the peer's environment and this project's read it).

An assistant ``message`` (``output_text``) for a response's text, a ``function_call`` per
call, a ``function_call_output`` per result, user messages as ``{"role": "user", "content"}``.
"""

from __future__ import annotations

from typing import Any


def to_items(kind: str, value: Any) -> list[dict[str, Any]]:
    """The items of one unit of ``child.units``."""
    if kind == "user":
        return [{"role": "user", "content": value}]
    if kind == "agent":
        return [_message(value, "msg_agent")]
    if kind == "result":
        return [{"type": "function_call_output", "call_id": value["id"], "output": value["output"]}]
    items = [_message(value[0]["thought"], f"msg_{value[0]['turn']}")] if value[0]["thought"] else []
    items += [{"type": "function_call", "id": f"fc_{c['id']}", "call_id": c["id"], "name": c["name"],
               "arguments": c["arguments"], "status": "completed"} for c in value]
    return items


def _message(text: str, ident: str) -> dict[str, Any]:
    return {"type": "message", "id": ident, "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}
