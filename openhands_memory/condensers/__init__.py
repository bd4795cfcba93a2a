"""Condensers, one strategy per module, registered under OpenHands' config ``type`` names."""

from __future__ import annotations

from .amortized_forgetting import AmortizedForgettingCondenser
from .base import Condenser, Reason, Requirement, RollingCondenser
from .browser_output import BrowserOutputCondenser
from .conversation_window import ConversationWindowCondenser
from .no_op import NoOpCondenser
from .observation_masking import ObservationMaskingCondenser
from .pipeline import PipelineCondenser
from .recent_events import RecentEventsCondenser

CONDENSER_TYPES: dict[str, type[Condenser]] = {
    c.type: c
    for c in (
        NoOpCondenser,
        ObservationMaskingCondenser,
        BrowserOutputCondenser,
        RecentEventsCondenser,
        AmortizedForgettingCondenser,
        ConversationWindowCondenser,
        PipelineCondenser,
    )
}

__all__ = [
    "CONDENSER_TYPES",
    "AmortizedForgettingCondenser",
    "BrowserOutputCondenser",
    "Condenser",
    "ConversationWindowCondenser",
    "NoOpCondenser",
    "ObservationMaskingCondenser",
    "PipelineCondenser",
    "Reason",
    "RecentEventsCondenser",
    "Requirement",
    "RollingCondenser",
]
