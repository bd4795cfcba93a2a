"""The four well-formedness properties of a view, in the order enforcement applies them.

Each module has ``enforce(events, history) -> set of event ids to drop`` and
``manipulation_indices(events) -> set of allowed cut positions``. ``history`` answers the
questions that need events outside the view (see :class:`History`).
"""

from __future__ import annotations

from typing import Protocol


class History(Protocol):
    """What enforcement needs to know about all events, not only the visible ones."""

    def batch_size(self, llm_response_id: str) -> int:
        """How many ActionEvents in the whole history share this response id."""
        ...

    def loop_span(self, seq: int) -> tuple[int, int] | None:
        """The [first, last] ids of the thinking tool loop holding event ``seq``, if any."""
        ...

