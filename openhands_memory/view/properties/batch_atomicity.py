"""Actions from one LLM response (same ``llm_response_id``) are all in the view or none are.

Enforcement drops only the actions of a partial batch; their results become orphans that
tool-call matching removes on the next pass.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

from ...events import ActionEvent, Event
from ..manipulation import ManipulationIndices
from . import History


def enforce(events: Sequence[Event], history: History) -> set[str]:
    batches: dict[str, list[str]] = defaultdict(list)
    for e in events:
        if isinstance(e, ActionEvent):
            batches[e.llm_response_id].append(e.id)
    drop: set[str] = set()
    for rid, ids in batches.items():
        if len(ids) != history.batch_size(rid):
            drop.update(ids)
    return drop


def manipulation_indices(events: Sequence[Event]) -> ManipulationIndices:
    allowed = set(range(len(events) + 1))
    for i in range(len(events) - 1):
        a, b = events[i], events[i + 1]
        if (
            isinstance(a, ActionEvent)
            and isinstance(b, ActionEvent)
            and a.llm_response_id == b.llm_response_id
        ):
            allowed.discard(i + 1)
    return ManipulationIndices(allowed)
