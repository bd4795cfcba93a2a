"""Enforcing the four well-formedness properties, and the cut positions they allow (with the
fifth, ``keep`` pins, when there are any: ``properties/pinned.py``).

Enforcement drops what breaks a property and starts again from the first property after any
drop (observation uniqueness, batch atomicity, tool-call matching, tool-loop atomicity), to a
fixpoint; what was dropped is logged as a warning naming the ids.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Sequence

from ..events import OBSERVATION_KINDS, Event
from .manipulation import ManipulationIndices
from .pins import NO_PINS, Pins
from .properties import (
    History,
    Property,
    batch_atomicity,
    observation_uniqueness,
    tool_call_matching,
    tool_loop_atomicity,
)
from .properties.pinned import Keep
from .stored import Item

log = logging.getLogger(__name__)

# Order matters: after any drop, enforcement starts again from the first property.
PROPERTIES: tuple[Property, ...] = (observation_uniqueness, batch_atomicity, tool_call_matching, tool_loop_atomicity)


@dataclass(frozen=True)
class Dropped:
    """Events enforcement removed, and which property removed them."""

    property: str
    ids: tuple[str, ...]  # external ids
    seqs: tuple[int | None, ...]  # ids in the store


def enforce(events: Sequence[Event], history: History) -> tuple[list[Event], list[Dropped]]:
    """Apply the properties to a fixpoint. Returns the kept events and what was dropped."""
    kept = list(events)
    if holds_all(kept, history):
        return kept, []
    dropped: list[Dropped] = []
    restart = True
    while restart:
        restart = False
        for prop in PROPERTIES:
            drop = prop.enforce(kept, history)
            if drop:
                name = prop.__name__.rsplit(".", 1)[-1]
                gone = [e for e in kept if e.id in drop]
                dropped.append(Dropped(name, tuple(e.id for e in gone), tuple(e.seq for e in gone)))
                kept = [e for e in kept if e.id not in drop]
                restart = True
                break
    return kept, dropped


def holds_all(events: Sequence[Item], history: History) -> bool:
    """Whether no property would drop anything, in one pass over the events: what almost
    every view gives, and the four passes of the properties cost a long view 0.5 s at 100k
    events. The conditions are the properties' own, so False only sends the view on to them.
    It reads only what a view's items tell undecoded (``stored.Item``)."""
    calls: set[str] = set()
    results: set[str] = set()
    batches: dict[str, int] = {}
    tools: list[int] = []
    for f in events:
        kind = f.kind
        if kind == "ActionEvent":
            calls.add(f.tool_call_id)
            batches[f.llm_response_id] = batches.get(f.llm_response_id, 0) + 1
        elif kind in OBSERVATION_KINDS:
            if f.tool_call_id in results:
                return False  # observation uniqueness
            results.add(f.tool_call_id)
        else:
            continue
        if f.seq is not None:
            tools.append(f.seq)
    if calls != results:  # tool-call matching
        return False
    if any(n != history.batch_size(rid) for rid, n in batches.items()):  # batch atomicity
        return False
    present: set[int] | None = None  # made for the first loop found (most views have none)
    for seq in tools:  # tool-loop atomicity
        span = history.loop_span(seq)
        if span is not None:
            if present is None:
                present = {f.seq for f in events if f.seq is not None}
            if not all(m in present for m in span):
                return False
    return True


def manipulation_indices(events: Sequence[Event], pins: Pins = NO_PINS) -> ManipulationIndices:
    full = ManipulationIndices.complete(len(events))
    indices = full.intersect(p.manipulation_indices(events) for p in PROPERTIES)
    keep = pins.keep
    if not keep:
        return indices
    return indices.intersect([Keep(keep).manipulation_indices(events, indices)])



def warn(dropped: list[Dropped]) -> None:
    for d in dropped:
        names = ", ".join(str(s) if s is not None else u for s, u in zip(d.seqs, d.ids))
        log.warning("view: %s dropped %d event(s): %s", d.property, len(d.ids), names)
