"""AmortizedForgetting: past ``max_size`` events, forget the middle down to ``max_size // 2``.

No summary: the head and the newest events stay, the rest is forgotten in one stored
condensation, so the cost of condensing is paid once per ``max_size // 2`` events.
"""

from __future__ import annotations

from ..events import Condensation
from ..settings import settings
from ..strategy import ModelCalls
from ..view import View
from ..view.tokens import TokenSource
from .base import Reason, RollingCondenser, runs_at


@settings()
class AmortizedForgettingCondenser(RollingCondenser):
    type = "amortized"

    def get_condensation(self, view: View, reasons: set[Reason], tokens: TokenSource, calls: ModelCalls) -> Condensation:
        start, end = self.cut(view, reasons, tokens)
        return Condensation(forgotten_ranges=runs_at(view, range(start, end)))
