"""Manipulation indices: the positions in a view where a condenser may cut.

If ``i`` is in the set a summary may be inserted at ``i``; if ``i`` and ``j`` both are,
``events[i:j]`` may be forgotten without splitting a tool call from its result, a parallel
batch, or a thinking tool loop.
"""

from __future__ import annotations

from typing import Iterable


class ManipulationIndices(frozenset[int]):
    @classmethod
    def complete(cls, n: int) -> "ManipulationIndices":
        """Every position 0..n: no constraint."""
        return cls(range(n + 1))

    def find_next(self, threshold: int) -> int | None:
        """The smallest index >= threshold, or None when there is none (never raises)."""
        candidates = [i for i in self if i >= threshold]
        return min(candidates) if candidates else None

    def find_previous(self, threshold: int) -> int | None:
        """The largest index <= threshold, or None."""
        candidates = [i for i in self if i <= threshold]
        return max(candidates) if candidates else None

    def intersect(self, others: Iterable[Iterable[int]]) -> "ManipulationIndices":
        out = set(self)
        for other in others:
            out &= set(other)
        return ManipulationIndices(out)
