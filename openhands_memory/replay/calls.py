"""Where a recorded history called its model: one call before each response of the agent.

The agent's model answers with an action batch (the ``ActionEvent``s of one
``llm_response_id``, parallel tool calls included), a message to the user, or a legacy
``RecallAction``. Whatever the model was sent for that answer is the view of the events
before the answer's first one, which is what a replay rebuilds under another strategy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..events import ActionEvent, Condensation, CondensationRequest, Event, MessageEvent, RecallAction


@dataclass(frozen=True)
class ModelCall:
    """One recorded model call: the response began at ``position`` of the replayed events
    (``seq`` in the source conversation) and ran to ``end`` (exclusive)."""

    index: int
    position: int
    end: int
    seq: int


def _response_key(e: Event) -> str | None:
    """What ties the events of one model response together (None: not the agent's answer)."""
    if isinstance(e, ActionEvent):
        return f"r:{e.llm_response_id}"
    if isinstance(e, MessageEvent) and e.source == "agent":
        return f"m:{e.id}"
    if isinstance(e, RecallAction):
        return f"m:{e.id}"
    return None


def model_calls(events: Sequence[Event]) -> list[ModelCall]:
    """The recorded model calls of ``events`` (one branch, oldest first), in order. The
    actions of one response are one call even when their results came between them (a
    runtime that runs each call as it arrives): no call splits a batch."""
    starts: list[tuple[int, int]] = []  # (position, end)
    by_key: dict[str, int] = {}  # response -> its index in starts
    for i, e in enumerate(events):
        key = _response_key(e)
        if key is None:
            continue
        k = by_key.get(key)
        if k is None:
            by_key[key] = len(starts)
            starts.append((i, i + 1))
        else:
            starts[k] = (starts[k][0], i + 1)
    return [ModelCall(k, pos, end, events[pos].seq if events[pos].seq is not None else pos)
            for k, (pos, end) in enumerate(starts)]


def is_recorded_condensing(e: Event) -> bool:
    """Events the recorded run's own condenser wrote: a replayed strategy makes its own."""
    return isinstance(e, (Condensation, CondensationRequest))
