"""Manipulation indices: the positions in a view where a condenser may cut.

If ``i`` is in the set a summary may be inserted at ``i``; if ``i`` and ``j`` both are,
``events[i:j]`` may be forgotten without splitting a tool call from its result, a parallel
batch, or a thinking tool loop.
"""

from __future__ import annotations

from typing import Iterable


class ManipulationIndices(frozenset[int]):
    """The cut positions; ``kept``: the positions of events no cut may forget (pinned ones,
    with their tool pairs): a cut that spans them carries them over (``runs_at``)."""

    kept: frozenset[int] = frozenset()

    def __new__(cls, allowed: Iterable[int] = (), kept: Iterable[int] = ()) -> "ManipulationIndices":
        made = super().__new__(cls, allowed)
        made.kept = frozenset(kept)
        return made

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
        out, kept = set(self), set(self.kept)
        for other in others:
            out &= set(other)
            kept |= getattr(other, "kept", frozenset())
        return ManipulationIndices(out, kept)
