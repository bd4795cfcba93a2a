"""The four well-formedness properties of a view, in the order enforcement applies them.

Each module is a :class:`Property`: ``enforce(events, history)`` gives the external ids of
the events to drop, ``manipulation_indices(events)`` the positions where a cut keeps the
property. ``history`` answers the questions that need events outside the view (see
:class:`History`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence

if TYPE_CHECKING:
    from ...events import Event
    from ..manipulation import ManipulationIndices


class History(Protocol):
    """What enforcement needs to know about all events, not only the visible ones."""

    def batch_size(self, llm_response_id: str) -> int:
        """How many ActionEvents in the whole history share this response id."""
        ...

    def loop_span(self, seq: int) -> tuple[int, ...] | None:
        """The member ids of the thinking tool loop holding event ``seq``, if any (with an
        id outside the history read when the loop reaches past it)."""
        ...



class Property(Protocol):
    """One well-formedness property (each module in this package is one)."""

    __name__: str

    def enforce(self, events: Sequence["Event"], history: History) -> set[str]:
        """External ids of the events to drop for the view to hold the property."""
        ...

    def manipulation_indices(self, events: Sequence["Event"]) -> "ManipulationIndices":
        """The positions between events where a cut keeps the property."""
        ...
