"""NoOp: the view as it is."""

from __future__ import annotations

from dataclasses import dataclass

from ..view import View
from .base import Condenser


@dataclass
class NoOpCondenser(Condenser):
    type = "noop"

    def condense(self, view: View) -> View:
        return view
