"""RecentEvents: the first ``keep_first`` events and the newest ones, up to ``max_events``.

Recomputed every step and never stored. Fixes the legacy strategy, which repeated the head
when the view was shorter than ``max_events``, and cuts only where tool calls stay paired.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from ..view import View
from .base import Condenser, system_floor


@dataclass
class RecentEventsCondenser(Condenser):
    type = "recent"

    keep_first: int = 1
    max_events: int = 100

    def __post_init__(self) -> None:
        if self.keep_first < 0:
            raise ConfigError(f"recent.keep_first ({self.keep_first}) cannot be negative")
        if self.max_events < 1:
            raise ConfigError(f"recent.max_events ({self.max_events}) must be at least 1")
        if self.keep_first >= self.max_events:
            raise ConfigError(
                f"recent.keep_first ({self.keep_first}) must be less than max_events ({self.max_events})"
            )

    def condense(self, view: View) -> View:
        if len(view) <= self.max_events:
            return view
        head = view.find_next(max(self.keep_first, system_floor(view)))
        if head is None or head >= self.max_events:
            return view
        tail_start = view.find_next(len(view) - (self.max_events - head))
        if tail_start is None or tail_start <= head:
            return view  # no cut keeps tool calls paired; send the view whole
        return view.with_events(view.events[:head] + view.events[tail_start:])
