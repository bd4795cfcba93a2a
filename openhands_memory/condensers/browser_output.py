"""BrowserOutput: all but the newest browser pages are reduced to the URL that was visited."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ..events import ActionEvent, ObservationEvent
from ..settings import settings
from ..strategy import ModelCalls
from ..view import View
from ..view.tokens import FRESH, TokenSource
from .base import Condenser
from .observation_masking import masked


def omitted(url: str) -> str:
    """The text legacy OpenHands puts in place of a page (its BrowserOutputCondenser)."""
    return f"Visited URL {url}\nContent omitted"


@settings()
class BrowserOutputCondenser(Condenser):
    type = "browser_output_masking"

    attention_window: Annotated[int, Field(ge=1)] = 1

    def condense(self, view: View, tokens: TokenSource = FRESH, calls: ModelCalls | None = None) -> View:
        seen = 0
        out = list(view.events)
        # The SDK's BrowserObservation carries no URL: its action does.
        asked = {e.tool_call_id: str(e.action.get("url") or "") for e in out
                 if isinstance(e, ActionEvent) and isinstance(e.action, dict)}
        for i in range(len(out) - 1, -1, -1):
            e = out[i]
            url = e.browser_url if isinstance(e, ObservationEvent) else None
            if url is None:
                continue
            url = url or asked.get(e.tool_call_id, "")
            if seen >= self.attention_window:
                out[i] = masked(e, omitted(url))
            seen += 1
        return view.with_events(out) if seen > self.attention_window else view
