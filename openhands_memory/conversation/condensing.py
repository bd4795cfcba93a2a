"""What a conversation asks of a condenser, and what one condensing step tells its caller.

A condenser is a strategy (``condensers/``, a layer above): the view and a token source in,
a View or a Condensation out. The conversation knows it only by this protocol.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

from ..errors import NoCondensationAvailable
from ..events import Condensation
from ..view import View
from ..view.tokens import ESTIMATE, FRESH, CharEstimate, TokenSource, tokens_after
from .writing import CallRecord


class Strategy(Protocol):
    def condense(self, view: View, tokens: TokenSource) -> View | Condensation: ...

    def take_calls(self) -> Sequence[CallRecord]:
        """The model calls made since the last take (for the ledger)."""
        ...

    def model_trouble(self) -> tuple[str | None, bool]:
        """(the latest model failure in one short line, whether a preview needed the model)."""
        ...


@dataclass(frozen=True)
class CondenseOutcome:
    """One run of a strategy on a conversation's view, and what came of it.

    ``result`` is the Condensation (stored unless a dry run), the view to send (unchanged or
    rewritten in memory), or None when the model failed (``failure``) or a dry run would need
    it (``needs_model``); ``error`` is then what the strategy raised.
    """

    view: View  # the view the strategy was given
    result: View | Condensation | None
    dry_run: bool = False
    forgotten_ids: list[int] = field(default_factory=list)
    tokens_before: int | None = None
    tokens_after: int | None = None
    token_counter: str | None = None  # who counted them: a tokenizer, or "chars/4 estimate"
    fallback: str | None = None  # the hard fallback that made the condensation, if one did
    failure: str | None = None
    needs_model: bool = False
    stored_as: int | None = None
    error: NoCondensationAvailable | None = field(default=None, repr=False, compare=False)

    @property
    def condensation(self) -> Condensation | None:
        return self.result if isinstance(self.result, Condensation) else None


def outcome(view: View, result: View | Condensation | None, *, dry_run: bool, trouble: tuple[str | None, bool],
            stored_as: int | None = None, error: NoCondensationAvailable | None = None) -> CondenseOutcome:
    failure, needs_model = trouble
    if not isinstance(result, Condensation):
        return CondenseOutcome(view, result, dry_run, failure=failure, needs_model=needs_model, error=error)
    forgotten = view.forgotten_positions(result)
    note = result.note
    if note is not None and note.tokens_before is not None and note.tokens_after is not None:
        before, after = note.tokens_before, note.tokens_after
        counter = (note.config or {}).get("tokenizer") or ESTIMATE
    else:  # the strategy counted nothing: the declared estimate, said as such
        estimate = CharEstimate()
        counts = FRESH.per_event(view, estimate)
        before, after = sum(counts), tokens_after(view, result, counts, estimate)
        counter = f"{ESTIMATE} estimate"
    return CondenseOutcome(
        view, result, dry_run,
        forgotten_ids=[view.events[i].seq for i in forgotten],  # type: ignore[misc]
        tokens_before=before, tokens_after=after, token_counter=counter,
        fallback=note.fallback if note is not None else None,
        failure=failure, needs_model=needs_model, stored_as=stored_as,
    )
