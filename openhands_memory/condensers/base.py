"""The condenser framework.

A condenser is a strategy (``strategy.Strategy``): it maps a view, and a token source for its
counts (as an SDK condenser is handed ``agent_llm``), to either a view (an in-memory rewrite,
such as masking, sent as is and never stored) or a :class:`Condensation` (forget these ids,
maybe place a summary), which ``Conversation.condense`` stores in one transaction. The model
calls it makes go into the ``ModelCalls`` record it is handed; it keeps no state between runs
(its settings are all it holds), never writes, and knows neither the conversation nor storage.

Rolling condensers decide from *reasons* (an explicit request, too many tokens, too many
events) whether condensing is required softly (try again later if no cut exists) or hard
(fall back as configured), and cut only at the view's manipulation indices.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import logging
from abc import ABC, abstractmethod
from typing import Annotated, Any, ClassVar, Literal, Self, Sequence

from pydantic import Field, model_validator

from ..errors import NoCondensationAvailable
from ..events import Condensation, CondensationNote, SystemPromptEvent
from ..settings import SettingError, settings
from ..strategy import ModelCalls
from ..view import View
from ..view.view import runs_at  # noqa: F401  (the strategies' import)
from ..view.pins import DEFAULT_PIN_BUDGET, PinRule
from ..view.tokens import FRESH, TokenCounter, TokenSource, tokens_after
from .tokenizers import counter_for

log = logging.getLogger(__name__)


class Reason(str, enum.Enum):
    REQUEST = "request"
    TOKENS = "tokens"
    EVENTS = "events"


class Requirement(str, enum.Enum):
    SOFT = "soft"  # no valid cut: keep the view and try again next step
    HARD = "hard"  # no valid cut: fall back (see ``hard_fallback``), or raise


def _config_dict(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        if f.name.startswith("_") or not f.init:
            continue
        value = getattr(obj, f.name)
        if isinstance(value, Condenser):
            value = value.config()
        elif isinstance(value, (list, tuple)) and value and isinstance(value[0], Condenser):
            value = [v.config() for v in value]
        elif dataclasses.is_dataclass(value):
            value = {k: v for k, v in dataclasses.asdict(value).items() if k != "api_key"}
        out[f.name] = value
    return {"type": obj.type, **out}


class Condenser(ABC):
    """``condense(view, tokens, calls) -> View | Condensation``, and the defaults of the rest
    of ``strategy.Strategy``. Subclasses are dataclasses of their settings. ``tokens``: where
    the view's token counts come from (a conversation passes its counts cached in rows; by
    default every event is counted anew); ``calls``: where model calls are recorded (None:
    nowhere the caller will read)."""

    type: ClassVar[str]
    # Pin rules (``[[condenser.pins]]``) and the share of the token limit pins may take:
    # the conversation applies them before it runs the strategy (``Conversation.condense``).
    pin_rules: tuple[PinRule, ...] = ()
    pin_budget: float = DEFAULT_PIN_BUDGET

    @abstractmethod
    def condense(self, view: View, tokens: TokenSource = FRESH, calls: ModelCalls | None = None) -> View | Condensation: ...

    def with_pins(self, rules: Sequence[PinRule], budget: float = DEFAULT_PIN_BUDGET) -> Self:
        """A copy of this strategy that applies these pin rules (this one is left as it was)."""
        made = copy.copy(self)
        # On the copy only. Not dataclass fields: a settings file would then take them as
        # settings, beside the [[condenser.pins]] tables that are their spelling.
        object.__setattr__(made, "pin_rules", tuple(rules))
        object.__setattr__(made, "pin_budget", budget)
        return made

    @property
    def summarizer(self) -> str | None:
        """Who writes this strategy's summaries (or rankings): nobody, unless it asks a model."""
        return None

    def token_limit(self) -> int | None:
        """The most tokens the view may take before the strategy condenses: none, unless it
        counts tokens (``RollingCondenser``)."""
        return None

    def pin_limit(self) -> int | None:
        """The most tokens pinned events may take: ``pin_budget`` of the token limit, when
        the strategy has one."""
        limit = self.token_limit()
        return int(limit * self.pin_budget) if limit else None

    def handles_condensation_requests(self) -> bool:
        return False

    def config(self) -> dict[str, Any]:
        """The settings, as stored beside each condensation this condenser makes."""
        out = _config_dict(self)
        if self.pin_rules:
            out["pins"] = [
                {k: v for k, v in dataclasses.asdict(r).items() if v not in (None, False)} for r in self.pin_rules
            ]
        if self.pin_budget != DEFAULT_PIN_BUDGET:
            out["pin_budget"] = self.pin_budget
        return out


def summary_offset(view: View, start: int) -> int:
    """Where a new summary for a cut at ``start`` lands in the next view: among the stored
    events before it (the old summary and re-injected pins are derived, not stored)."""
    return sum(1 for e in view.events[:start] if e.seq is not None)


def system_floor(view: View) -> int:
    """The first position after the system prompt (0 without one): never forget the prompt."""
    for i, e in enumerate(view.events):
        if isinstance(e, SystemPromptEvent):
            return i + 1
    return 0


@settings()
class RollingCondenser(Condenser):
    """Condenses when a reason applies; cuts ``[start, end)`` at manipulation indices.

    Settings shared by the rolling strategies:
    * ``max_size``: more events than this is the EVENTS reason (soft);
    * ``keep_first``: events at the start that are never forgotten;
    * ``max_tokens``: more tokens than this is the TOKENS reason (hard); capped by the
      ``tokenizer`` model's context window when litellm knows it;
    * ``tokenizer``: a model name for litellm's tokenizer, or ``"chars/4"`` for the declared
      estimate; token counting is on when either this or ``max_tokens`` is set;
    * ``hard_fallback``: what a hard requirement does when condensing failed: ``raise``,
      ``reset`` (forget all after the system prompt) or, for summarizers, ``offline``.
    """

    max_size: Annotated[int, Field(ge=1)] = 100
    keep_first: Annotated[int, Field(ge=0)] = 1
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    tokenizer: str | None = None
    minimum_progress: Annotated[float, Field(ge=0, lt=1)] = 0.0
    hard_fallback: Literal["raise", "reset"] = "raise"

    summary_slot: ClassVar[int] = 0  # 1 for strategies that add a summary
    # The SDK's rule (LLMSummarizingCondenser): a request on a view too short for
    # ``len//2 - keep_first - slot`` gives a negative tail, which has no cut, so a hard
    # requirement falls back to a hard reset. False: the tail is clamped at zero (forget all
    # after the protected head), as the legacy strategies did.
    negative_tail_resets: ClassVar[bool] = False

    @model_validator(mode="after")
    def _room_to_condense(self) -> RollingCondenser:
        # A head this large leaves an events-triggered cut nothing to forget, forever.
        room = self.max_size // 2 - self.summary_slot
        if self.keep_first >= room:
            raise SettingError(
                "keep_first",
                f"({self.keep_first}) leaves no room to condense: it must be less than "
                f"max_size // 2{' - 1' if self.summary_slot else ''} ({room}); "
                "lower keep_first or raise max_size",
            )
        return self

    def handles_condensation_requests(self) -> bool:
        return True

    # --- tokens ----------------------------------------------------------------------

    @property
    def counts_tokens(self) -> bool:
        return self.max_tokens is not None or self.tokenizer is not None

    def counter(self) -> TokenCounter:
        return counter_for(self.tokenizer)

    def token_limit(self) -> int | None:
        """``max_tokens``, capped by the tokenizer model's context window when known."""
        limits = [self.max_tokens] if self.max_tokens is not None else []
        if self.tokenizer not in (None, "chars/4"):
            from ..llm import context_window

            window = context_window(self.tokenizer)  # type: ignore[arg-type]
            if window is not None:
                limits.append(window)
        return min(limits) if limits else None

    def view_tokens(self, view: View, tokens: TokenSource = FRESH) -> int:
        return tokens.total(view, self.counter())

    def event_tokens(self, view: View, tokens: TokenSource = FRESH) -> list[int]:
        return tokens.per_event(view, self.counter())

    # --- deciding --------------------------------------------------------------------

    def reasons(self, view: View, tokens: TokenSource = FRESH) -> set[Reason]:
        found: set[Reason] = set()
        if view.unhandled_condensation_request:
            found.add(Reason.REQUEST)
        if len(view) > self.max_size:
            found.add(Reason.EVENTS)
        if self.counts_tokens:
            limit = self.token_limit()
            if limit is not None and self.view_tokens(view, tokens) > limit:
                found.add(Reason.TOKENS)
        return found

    @staticmethod
    def requirement(reasons: set[Reason]) -> Requirement | None:
        if not reasons:
            return None
        if reasons <= {Reason.EVENTS}:
            return Requirement.SOFT
        return Requirement.HARD

    def tail_length(self, view: View, reasons: set[Reason], tokens: TokenSource) -> int:
        """How many of the newest events to keep: the strictest reason wins."""
        slot = self.summary_slot
        candidates: list[int] = []
        if Reason.REQUEST in reasons:
            candidates.append(len(view) // 2 - self.keep_first - slot)
        if Reason.EVENTS in reasons:
            candidates.append(self.max_size // 2 - self.keep_first - slot)
        if Reason.TOKENS in reasons:
            candidates.append(self._token_tail(view, tokens))
        if not candidates:
            return len(view)
        tail = min(candidates)
        return tail if self.negative_tail_resets else max(0, tail)

    def _token_tail(self, view: View, tokens: TokenSource) -> int:
        """The longest tail whose tokens, with the kept head, fit in half the limit."""
        limit = self.token_limit() or 0
        counts = self.event_tokens(view, tokens)
        budget = limit // 2 - sum(counts[: self.keep_first])
        tail, used = 0, 0
        for n in reversed(counts[self.keep_first :]):
            if used + n > budget:
                break
            used += n
            tail += 1
        return tail

    def cut(self, view: View, reasons: set[Reason], tokens: TokenSource) -> tuple[int, int]:
        """The ``[start, end)`` positions to forget, at manipulation indices."""
        tail = self.tail_length(view, reasons, tokens)
        if tail < 0:
            raise NoCondensationAvailable(
                f"the view is too short to condense as asked: the tail to keep would be {tail} "
                f"events (len // 2 - keep_first{' - 1' if self.summary_slot else ''})"
            )
        naive_end = len(view) - tail
        start = view.find_next(max(self.keep_first, system_floor(view)))
        end = view.find_next(naive_end)
        if start is None or end is None:
            raise NoCondensationAvailable(
                "no cut point: a tool call is still waiting for its result, or one tool loop "
                "runs to the end of the view"
            )
        if end <= start:
            raise NoCondensationAvailable(
                f"nothing to forget between the protected head ({start} events) and the tail "
                "to keep; a tool loop may span most of the view (lower keep_first or max_size)"
            )
        if end - start < len(view) * self.minimum_progress:
            raise NoCondensationAvailable(
                f"forgetting {end - start} of {len(view)} events is below minimum_progress "
                f"({self.minimum_progress:g})"
            )
        return start, end

    # --- condensing ------------------------------------------------------------------

    @abstractmethod
    def get_condensation(self, view: View, reasons: set[Reason], tokens: TokenSource, calls: ModelCalls) -> Condensation:
        """The condensation for these reasons, or NoCondensationAvailable."""

    def reset_positions(self, view: View) -> range | None:
        """Everything after the system prompt that can be forgotten at once, or None."""
        start = system_floor(view)
        end = view.manipulation_indices.find_previous(len(view))
        if end is None or end <= start:
            return None
        return range(start, end)

    def fallback(
        self, view: View, reasons: set[Reason], error: NoCondensationAvailable, tokens: TokenSource,
        calls: ModelCalls,
    ) -> Condensation | None:
        """What a hard requirement does when ``get_condensation`` failed; None re-raises.

        The base strategy knows one fallback, ``reset``: forget everything after the system
        prompt that can be forgotten (summarizing strategies override this).
        """
        if self.hard_fallback == "raise":
            return None
        positions = self.reset_positions(view)
        if positions is None:
            return None
        return Condensation(forgotten_ranges=runs_at(view, positions))

    def condense(self, view: View, tokens: TokenSource = FRESH, calls: ModelCalls | None = None) -> View | Condensation:
        reasons = self.reasons(view, tokens)
        requirement = self.requirement(reasons)
        if requirement is None:
            return view
        calls = ModelCalls() if calls is None else calls
        try:
            cond = self.get_condensation(view, reasons, tokens, calls)
        except NoCondensationAvailable as e:
            if requirement is Requirement.SOFT:
                log.info("%s: condensation deferred (%s)", self.type, e)
                return view
            fallback = self.fallback(view, reasons, e, tokens, calls)
            if fallback is None:
                raise
            log.warning("%s: %s; falling back to %s", self.type, e, self.hard_fallback)
            return self.annotate(view, fallback, reasons, tokens, fallback=self.hard_fallback)
        return self.annotate(view, cond, reasons, tokens)

    def annotate(
        self, view: View, cond: Condensation, reasons: set[Reason], tokens: TokenSource,
        *, fallback: str | None = None,
    ) -> Condensation:
        """Attach why and at what cost this condensation was made (stored beside it)."""
        reason = ",".join(sorted(r.value for r in reasons))
        if fallback:
            reason += f";fallback={fallback}"
        before = after = None
        if self.counts_tokens:
            counts = self.event_tokens(view, tokens)
            before = sum(counts)
            after = tokens_after(view, cond, counts, self.counter())
        note = CondensationNote(self.type, reason, self.config(), before, after, fallback or None)
        return cond.with_note(note)
