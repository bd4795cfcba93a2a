"""Condensers, one strategy per module, registered under OpenHands' config ``type`` names."""

from __future__ import annotations

from .amortized_forgetting import AmortizedForgettingCondenser
from .base import Condenser, Reason, Requirement, RollingCondenser
from .browser_output import BrowserOutputCondenser
from .conversation_window import ConversationWindowCondenser
from .llm_attention import LLMAttentionCondenser
from .llm_summarizing import LLMSummarizingCondenser
from .no_op import NoOpCondenser
from .observation_masking import ObservationMaskingCondenser
from .pipeline import PipelineCondenser
from .recent_events import RecentEventsCondenser
from .structured_summary import StructuredSummaryCondenser

CONDENSER_TYPES: dict[str, type[Condenser]] = {
    c.type: c
    for c in (
        NoOpCondenser,
        ObservationMaskingCondenser,
        BrowserOutputCondenser,
        RecentEventsCondenser,
        AmortizedForgettingCondenser,
        ConversationWindowCondenser,
        LLMSummarizingCondenser,
        StructuredSummaryCondenser,
        LLMAttentionCondenser,
        PipelineCondenser,
    )
}


def default_condenser() -> Condenser:
    """The embedded default: old browser pages reduced to their URL, then a rolling summary
    written by the offline summarizer (no API key) past 120 events, keeping the first 4."""
    return PipelineCondenser(
        [
            BrowserOutputCondenser(attention_window=2),
            LLMSummarizingCondenser(max_size=120, keep_first=4),
        ]
    )

__all__ = [
    "CONDENSER_TYPES",
    "AmortizedForgettingCondenser",
    "BrowserOutputCondenser",
    "Condenser",
    "ConversationWindowCondenser",
    "LLMAttentionCondenser",
    "LLMSummarizingCondenser",
    "StructuredSummaryCondenser",
    "default_condenser",
    "NoOpCondenser",
    "ObservationMaskingCondenser",
    "PipelineCondenser",
    "Reason",
    "RecentEventsCondenser",
    "Requirement",
    "RollingCondenser",
]
