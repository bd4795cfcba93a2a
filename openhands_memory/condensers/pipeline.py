"""Pipeline: each condenser gets the previous one's view; the first Condensation ends it."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from ..events import Condensation
from ..settings import settings
from ..view import View
from ..view.tokens import FRESH, TokenSource
from .base import Condenser


@settings()
class PipelineCondenser(Condenser):
    type = "pipeline"

    condensers: list[Condenser] = field(default_factory=list)

    def condense(self, view: View, tokens: TokenSource = FRESH) -> View | Condensation:
        result: View | Condensation = view
        for condenser in self.condensers:
            result = condenser.condense(result, tokens)  # type: ignore[arg-type]
            if isinstance(result, Condensation):
                break
        return result

    def handles_condensation_requests(self) -> bool:
        return any(c.handles_condensation_requests() for c in self.condensers)

    def take_calls(self) -> list[Any]:
        return [call for c in self.condensers for call in c.take_calls()]

    def model_trouble(self) -> tuple[str | None, bool]:
        failure, needed = None, False
        for c in self.condensers:
            brief, needs = c.model_trouble()
            failure = brief or failure  # the latest failure
            needed = needed or needs
        return failure, needed
