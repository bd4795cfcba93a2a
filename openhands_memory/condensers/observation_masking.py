"""ObservationMasking: tool output older than the attention window is replaced by a marker.

Unlike the legacy strategy, a masked result keeps its tool call id, so the call and its
(masked) result still reach the model as a pair instead of both vanishing.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from ..events import AgentErrorEvent, Event, ObservationEvent, RecallObservation
from ..view import View
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


@dataclass
class ObservationMaskingCondenser(Condenser):
    type = "observation_masking"

    attention_window: int = 100

    def __post_init__(self) -> None:
        if self.attention_window < 1:
            raise ConfigError(
                f"observation_masking.attention_window ({self.attention_window}) must be at least 1"
            )

    def condense(self, view: View) -> View:
        cutoff = len(view) - self.attention_window
        if cutoff <= 0:
            return view
        events = [
            masked(e, MASK) if i < cutoff and isinstance(e, (ObservationEvent, AgentErrorEvent, RecallObservation)) else e
            for i, e in enumerate(view.events)
        ]
        return view.with_events(events)
