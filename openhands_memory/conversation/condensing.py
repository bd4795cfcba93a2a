"""What one condensing step tells its caller (``CondenseOutcome``).

A condenser is a strategy (``condensers/``, a layer above): the view, a token source and a
record for its model calls in, a View or a Condensation out. The conversation knows it only
by ``strategy.Strategy`` (named here too, where it used to live).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ..errors import NoCondensationAvailable
from ..events import Condensation
from ..strategy import ModelCalls, Strategy
from ..view import View
from ..view.pins import Pin
from ..view.tokens import ESTIMATE, FRESH, CharEstimate, tokens_after

__all__ = ["CondenseOutcome", "ModelCalls", "Strategy"]


@dataclass(frozen=True)
class CondenseOutcome:
    """One run of a strategy on a conversation's view, and what came of it.

    ``result`` is the Condensation (stored as event ``stored_as`` unless a dry run), the view
    to send (unchanged or rewritten in memory), or None when the model failed (``failure``)
    or a dry run would need it (``needs_model``); ``error`` is then what the strategy raised.
    What it forgets and its token figures are worked out when asked (an agent's step never
    asks), from the view it was made from.
    """

    view: View  # the view the strategy was given
    result: View | Condensation | None
    dry_run: bool = False
    failure: str | None = None
    needs_model: bool = False
    stored_as: int | None = None
    error: NoCondensationAvailable | None = field(default=None, repr=False, compare=False)

    @property
    def condensation(self) -> Condensation | None:
        return self.result if isinstance(self.result, Condensation) else None

    @cached_property
    def forgotten_ids(self) -> list[int]:
        """The sequence numbers of the view's events the condensation forgets."""
        cond = self.condensation
        if cond is None:
            return []
        return [self.view.events[i].seq for i in self.view.forgotten_positions(cond)]  # type: ignore[misc]

    @cached_property
    def pins_carried(self) -> list[Pin]:
        """The keep pins the cut spanned and carried over (they stay in the view)."""
        positions = self.view.forgotten_positions(self.condensation) if self.condensation else []
        if not positions or not self.view.pins.keep:
            return []
        # The cut's span: from its first forgotten event to its last, and on over the kept
        # stretches that touch it (a cut that began or ended on a pinned event).
        kept = self.view.manipulation_indices.kept
        lo, hi = min(positions), max(positions)
        while lo - 1 in kept:
            lo -= 1
        while hi + 1 in kept:
            hi += 1
        seqs = {e.seq for e in self.view.events[lo : hi + 1]}
        return [p for p in self.view.pins if p.mode == "keep" and p.seq in seqs]

    @cached_property
    def pins_reinjected(self) -> list[Pin]:
        """The reinject pins whose events the condensation forgets: the next view shows them
        again after the summary."""
        gone = set(self.forgotten_ids)
        return [p for p in self.view.pins if p.mode == "reinject" and p.seq in gone]

    @property
    def fallback(self) -> str | None:
        """The hard fallback that made the condensation, if one did."""
        cond = self.condensation
        return cond.note.fallback if cond is not None and cond.note is not None else None

    @cached_property
    def _tokens(self) -> tuple[int | None, int | None, str | None]:
        cond = self.condensation
        if cond is None:
            return None, None, None
        note = cond.note
        if note is not None and note.tokens_before is not None and note.tokens_after is not None:
            return note.tokens_before, note.tokens_after, (note.config or {}).get("tokenizer") or ESTIMATE
        # The strategy counted nothing: the declared estimate, said as such.
        estimate = CharEstimate()
        counts = FRESH.per_event(self.view, estimate)
        return sum(counts), tokens_after(self.view, cond, counts, estimate), f"{ESTIMATE} estimate"

    @property
    def tokens_before(self) -> int | None:
        return self._tokens[0]

    @property
    def tokens_after(self) -> int | None:
        return self._tokens[1]

    @property
    def token_counter(self) -> str | None:
        """Who counted the tokens: the strategy's tokenizer, or ``chars/4 estimate``."""
        return self._tokens[2]
