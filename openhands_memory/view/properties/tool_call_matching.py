"""Every tool call has its result (observation, rejection or error) and every result its call.

Between a call and its result no cut is allowed, even if other events sit in between: they
are swallowed into the pair's span.
"""

from __future__ import annotations

from typing import Sequence

from ...events import ActionEvent, Event, ObservationBase
from ..manipulation import ManipulationIndices
from . import History


def enforce(events: Sequence[Event], history: History) -> set[str]:
    calls = {e.tool_call_id for e in events if isinstance(e, ActionEvent)}
    results = {e.tool_call_id for e in events if isinstance(e, ObservationBase)}
    return {
        e.id
        for e in events
        if (isinstance(e, ActionEvent) and e.tool_call_id not in results)
        or (isinstance(e, ObservationBase) and e.tool_call_id not in calls)
    }


def manipulation_indices(events: Sequence[Event]) -> ManipulationIndices:
    allowed = set(range(len(events) + 1))
    pending: set[str] = set()
    for i, e in enumerate(events):
        if isinstance(e, ActionEvent):
            pending.add(e.tool_call_id)
        elif isinstance(e, ObservationBase):
            # discard, not remove: an orphan or duplicate result must not crash the search.
            pending.discard(e.tool_call_id)
        if pending:
            allowed.discard(i + 1)
    return ManipulationIndices(allowed)
