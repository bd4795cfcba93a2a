"""RecentEvents: the first ``keep_first`` events and the newest ones, up to ``max_events``.

Recomputed every step and never stored. Fixes the legacy strategy, which repeated the head
when the view was shorter than ``max_events``, and cuts only where tool calls stay paired.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from ..settings import SettingError, settings
from ..strategy import ModelCalls
from ..view import View
from ..view.tokens import FRESH, TokenSource
from .base import Condenser, system_floor


@settings()
class RecentEventsCondenser(Condenser):
    type = "recent"

    keep_first: Annotated[int, Field(ge=0)] = 1
    max_events: Annotated[int, Field(ge=1)] = 100

    @model_validator(mode="after")
    def _head_fits(self) -> RecentEventsCondenser:
        if self.keep_first >= self.max_events:
            raise SettingError("keep_first", f"({self.keep_first}) must be less than max_events ({self.max_events})")
        return self

    def condense(self, view: View, tokens: TokenSource = FRESH, calls: ModelCalls | None = None) -> View:
        if len(view) <= self.max_events:
            return view
        head = view.find_next(max(self.keep_first, system_floor(view)))
        if head is None or head >= self.max_events:
            return view
        tail_start = view.find_next(len(view) - (self.max_events - head))
        if tail_start is None or tail_start <= head:
            return view  # no cut keeps tool calls paired; send the view whole
        return view.with_events(view.events[:head] + view.events[tail_start:])
