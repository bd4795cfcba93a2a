"""At most one result per tool call. The first one wins: it is what the agent already saw.

A duplicate happens after crash recovery: a synthetic error and then the late real output.
"""

from __future__ import annotations

from typing import Sequence

from ...events import Event, ObservationBase
from ..manipulation import ManipulationIndices
from . import History


def enforce(events: Sequence[Event], history: History) -> set[str]:
    seen: set[str] = set()
    drop: set[str] = set()
    for e in events:
        if isinstance(e, ObservationBase):
            if e.tool_call_id in seen:
                drop.add(e.id)
            else:
                seen.add(e.tool_call_id)
    return drop


def manipulation_indices(events: Sequence[Event]) -> ManipulationIndices:
    return ManipulationIndices.complete(len(events))
