"""The newest items of a rendered history, without splitting what must travel together.

A provider refuses a tool result whose call is not before it, and the Responses API a
reasoning item without the item that follows it. So a window over the newest ``limit``
items starts earlier when it would begin inside such a unit: at the call of any result in
it (a chat message's ``tool_calls`` or a Responses call item), and before the reasoning
items that go with its first item. It may hold a few more items than asked, never fewer
of the newest.
"""

from __future__ import annotations

from typing import Any, Sequence

from .items import CALL_OUTPUTS, OUTPUT_TYPES

Item = dict[str, Any]


def _calls_of(item: Item) -> list[str]:
    """The call ids an item makes."""
    if item.get("type") in CALL_OUTPUTS and isinstance(item.get("call_id"), str):
        return [item["call_id"]]
    calls = item.get("tool_calls") if item.get("role") == "assistant" else None
    if isinstance(calls, list):
        return [c["id"] for c in calls if isinstance(c, dict) and isinstance(c.get("id"), str)]
    return []


def _answers(item: Item) -> str | None:
    """The call id an item answers."""
    if item.get("type") in OUTPUT_TYPES and isinstance(item.get("call_id"), str):
        return item["call_id"]
    if item.get("role") == "tool" and isinstance(item.get("tool_call_id"), str):
        return item["tool_call_id"]
    return None


def tail(items: Sequence[Item], limit: int | None) -> list[Item]:
    """The newest ``limit`` items (None or negative: all; 0: none), started earlier where
    the window would split a call from its result or a reasoning item from its follower."""
    if limit is None or limit < 0 or limit >= len(items):
        return list(items)
    if limit == 0:
        return []
    made_at: dict[str, int] = {}
    for i, item in enumerate(items):
        for call in _calls_of(item):
            made_at.setdefault(call, i)
    start = len(items) - limit
    checked = len(items)  # items[checked:] have had their calls looked up
    while True:
        earliest = start
        for i in range(start, checked):
            call = _answers(items[i])
            if call is not None and made_at.get(call, start) < earliest:
                earliest = made_at[call]
        checked = start
        while earliest > 0 and items[earliest - 1].get("type") == "reasoning":
            earliest -= 1
        if earliest == start:
            return list(items[start:])
        start = earliest
