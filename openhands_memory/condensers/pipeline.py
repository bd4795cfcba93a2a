"""Pipeline: each condenser gets the previous one's view; the first Condensation ends it."""

from __future__ import annotations

from dataclasses import field
from ..events import Condensation
from ..settings import settings
from ..strategy import ModelCalls
from ..view import View
from ..view.tokens import FRESH, TokenSource
from .base import Condenser


@settings()
class PipelineCondenser(Condenser):
    type = "pipeline"

    condensers: list[Condenser] = field(default_factory=list)

    def condense(self, view: View, tokens: TokenSource = FRESH, calls: ModelCalls | None = None) -> View | Condensation:
        result: View | Condensation = view
        for condenser in self.condensers:
            result = condenser.condense(result, tokens, calls)  # type: ignore[arg-type]
            if isinstance(result, Condensation):
                break
        return result

    def handles_condensation_requests(self) -> bool:
        return any(c.handles_condensation_requests() for c in self.condensers)
