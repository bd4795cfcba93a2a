"""A ``keep`` pin's event is never forgotten: the fifth property, beside the SDK's four.

It is made for the pins in force (``Keep(pins)``), since the events alone do not say what is
pinned. No cut position is forbidden: a cut may span a pinned event, which is then carried
over. Its manipulation indices name the positions a cut must carry (``kept``): the pinned
event with the smallest stretch around it that the other properties let a cut start and
end at (its tool call and result, its parallel batch, its thinking loop), so that what stays
is well formed. ``runs_at`` leaves them out of every forgotten range, and ``carve`` takes
them out of a Condensation made any other way. Enforcement drops nothing for it: a view
cannot bring back a forgotten event by dropping others (``pins.reinjected`` shows one again).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Sequence

from ...events import Event
from ..manipulation import ManipulationIndices
from . import History


@dataclass(frozen=True)
class Keep:
    """The keep property for the events with these ids."""

    seqs: frozenset[int]
    __name__ = "pinned"

    def enforce(self, events: Sequence[Event], history: History) -> set[str]:
        return set()

    def manipulation_indices(self, events: Sequence[Event], others: ManipulationIndices | None = None) -> ManipulationIndices:
        """Every position, with ``kept``: the pinned events' stretches between the positions
        ``others`` (the other properties' indices) allow."""
        n = len(events)
        full = ManipulationIndices.complete(n)
        allowed = sorted(others if others is not None else full)
        kept: set[int] = set()
        for i, e in enumerate(events):
            if e.seq is None or e.seq not in self.seqs:
                continue
            k = bisect.bisect_right(allowed, i)
            lo = allowed[k - 1] if k > 0 else 0
            hi = allowed[k] if k < len(allowed) else n
            kept.update(range(lo, hi))
        return ManipulationIndices(full, kept)
