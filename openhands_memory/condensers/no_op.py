"""NoOp: the view as it is."""

from __future__ import annotations

from ..settings import settings
from ..strategy import ModelCalls
from ..view import View
from ..view.tokens import FRESH, TokenSource
from .base import Condenser


@settings()
class NoOpCondenser(Condenser):
    type = "noop"

    def condense(self, view: View, tokens: TokenSource = FRESH, calls: ModelCalls | None = None) -> View:
        return view
