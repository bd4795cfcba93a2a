"""ObservationMasking: tool output older than the attention window is replaced by a marker.

Unlike the legacy strategy, a masked result keeps its tool call id, so the call and its
(masked) result still reach the model as a pair instead of both vanishing.
"""

from __future__ import annotations

from dataclasses import field
from typing import Annotated

from pydantic import Field

from ..events import AgentErrorEvent, Event, ObservationEvent, RecallObservation
from ..settings import settings
from ..strategy import ModelCalls
from ..view import View
from ..view.tokens import FRESH, TokenSource
from .base import Condenser

MASK = "<MASKED>"
MASKABLE = (ObservationEvent, AgentErrorEvent, RecallObservation)


def masked(e: Event, text: str) -> Event:
    """A copy of a result event whose content is ``text``; same ids, same pairing."""
    if isinstance(e, ObservationEvent):
        kind = e.observation.get("kind", "Observation")
        copy = e.model_copy(
            update={"observation": {"kind": kind, "content": [{"type": "text", "text": text}]},
                    "extended_content": []}
        )
    elif isinstance(e, AgentErrorEvent):
        copy = e.model_copy(update={"error": text})
    elif isinstance(e, RecallObservation):
        copy = e.model_copy(update={"content": text})
    else:
        return e
    return copy.with_seq(e.seq) if e.seq is not None else copy


@settings()
class ObservationMaskingCondenser(Condenser):
    type = "observation_masking"

    attention_window: Annotated[int, Field(ge=1)] = 100

    # The previous call's view, result and cutoff: an agent's next view extends its last
    # one, so only the events the window slid past since are masked anew (a step then costs
    # what changed, not the history: a long view is masked thousands of times). Never set.
    _last: tuple[View, list[Event], int, frozenset[int]] | None = field(
        default=None, init=False, repr=False, compare=False)

    def condense(self, view: View, tokens: TokenSource = FRESH, calls: ModelCalls | None = None) -> View:
        cutoff = len(view) - self.attention_window
        if cutoff <= 0:
            return view
        done = 0
        kept: list[Event] = []
        replaced: frozenset[int] = frozenset()
        last = self._last
        if last is not None:
            before, out, until, was = last
            if until <= cutoff and (
                view.extends(before)
                or (len(before.events) <= len(view.events) and view.events[: len(before.events)] == before.events)
            ):
                done, kept, replaced = until, out[:until], was
        fresh = [masked(e, MASK) if isinstance(e, MASKABLE) else e for e in view.events[done:cutoff]]
        new = {e.seq for e, m in zip(view.events[done:cutoff], fresh) if m is not e and e.seq is not None}
        if new:
            replaced = replaced | new
        events = kept + fresh + view.events[cutoff:]
        object.__setattr__(self, "_last", (view, events, cutoff, replaced))
        return view.with_events(events, replaced=replaced)
