"""BrowserOutput: all but the newest browser pages are reduced to the URL that was visited."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from ..events import ObservationEvent
from ..view import View
from .base import Condenser
from .observation_masking import masked


def omitted(url: str) -> str:
    """The text legacy OpenHands puts in place of a page (its BrowserOutputCondenser)."""
    return f"Visited URL {url}\nContent omitted"


@dataclass
class BrowserOutputCondenser(Condenser):
    type = "browser_output_masking"

    attention_window: int = 1

    def __post_init__(self) -> None:
        if self.attention_window < 1:
            raise ConfigError(
                f"browser_output_masking.attention_window ({self.attention_window}) must be at least 1"
            )

    def condense(self, view: View) -> View:
        seen = 0
        out = list(view.events)
        for i in range(len(out) - 1, -1, -1):
            e = out[i]
            url = e.browser_url if isinstance(e, ObservationEvent) else None
            if url is None:
                continue
            if seen >= self.attention_window:
                out[i] = masked(e, omitted(url))
            seen += 1
        return view.with_events(out) if seen > self.attention_window else view
