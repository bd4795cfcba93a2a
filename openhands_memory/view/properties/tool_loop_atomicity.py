"""A tool loop that starts with thinking blocks is kept or forgotten whole.

Providers with extended thinking reject a turn whose tool loop no longer starts with its
thinking block. A loop is a maximal run of actions and results that starts at an action
carrying thinking blocks; any other event ends it.
"""

from __future__ import annotations

from typing import Sequence

from ...events import ActionEvent, Event, ObservationBase
from ..manipulation import ManipulationIndices
from . import History


def enforce(events: Sequence[Event], history: History) -> set[str]:
    # ``seq`` is a pydantic private attribute (a slow lookup): read it once per event.
    seqd = [(s, e) for e in events if (s := e.seq) is not None]
    ids_by_seq = {s: e.id for s, e in seqd}
    present = ids_by_seq.keys()
    drop: set[str] = set()
    checked: set[tuple[int, int]] = set()
    for seq, e in seqd:
        if not isinstance(e, (ActionEvent, ObservationBase)):
            continue
        span = history.loop_span(seq)
        if span is None or span in checked:
            continue
        checked.add(span)
        if not all(s in present for s in span):  # the loop's member ids (history.loop_spans)
            drop.update(ids_by_seq[s] for s in span if s in ids_by_seq)
    return drop


def manipulation_indices(events: Sequence[Event]) -> ManipulationIndices:
    allowed = set(range(len(events) + 1))
    in_loop = False
    for i, e in enumerate(events):
        if isinstance(e, ActionEvent) and e.thinking_blocks:
            in_loop = True  # a new loop may start here, so i itself stays allowed
        elif isinstance(e, (ActionEvent, ObservationBase)):
            if in_loop:
                allowed.discard(i)
        else:
            in_loop = False
    return ManipulationIndices(allowed)
