"""ObservationMasking: tool output older than the attention window is replaced by a marker.

Unlike the legacy strategy, a masked result keeps its tool call id, so the call and its
(masked) result still reach the model as a pair instead of both vanishing.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ..events import AgentErrorEvent, Event, ObservationEvent, RecallObservation
from ..settings import settings
from ..view import View
from ..view.tokens import FRESH, TokenSource
from .base import Condenser

MASK = "<MASKED>"


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

    def condense(self, view: View, tokens: TokenSource = FRESH) -> View:
        cutoff = len(view) - self.attention_window
        if cutoff <= 0:
            return view
        events = [
            masked(e, MASK) if i < cutoff and isinstance(e, (ObservationEvent, AgentErrorEvent, RecallObservation)) else e
            for i, e in enumerate(view.events)
        ]
        return view.with_events(events)
