"""What the LLM strategies share: the summarizer call with its ledger entries (written to the
run's ``ModelCalls``), the shrinking retry when the summarizer's own context overflows, and
the offline fallback."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Annotated, Callable, ClassVar, Literal, TypeVar

from pydantic import Field

from ..errors import NoCondensationAvailable
from ..events import Condensation, Event
from ..llm import ContextWindowError, LLMCall, LLMConfig, LLMError, LLMReply
from ..settings import settings
from ..strategy import ModelCalls
from ..view import View
from ..view.tokens import FRESH, TokenSource
from .base import Reason, RollingCondenser, runs_at, summary_offset
from ..view.rendering import describe

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class LedgerEntry:
    """One model call, for the ``llm_call`` table. ``produced``: its reply went into the result."""

    strategy: str
    purpose: str
    call: LLMCall
    produced: bool = False


def longest(events: list[Event]) -> int:
    """The length of the longest event text the summarizer would be sent uncut."""
    return max((len(describe(e)) for e in events), default=0)


class SummarizerFailed(NoCondensationAvailable):
    """The model call failed; nothing was condensed. ``brief``: one short line saying why."""

    def __init__(self, message: str, brief: str | None = None):
        super().__init__(message)
        self.brief = brief or message


class ModelNotCalled(NoCondensationAvailable):
    """A preview (``preview=True``) reached a point where only the model can decide."""


# What a preview puts where the model's summary would be.
PREVIEW_SUMMARY = "(not written: a dry run does not call the model)"


@settings()
class LLMCondenser(RollingCondenser):
    """A rolling strategy that asks a model. Without ``llm_config`` it uses the offline summarizer.

    ``hard_context_reset_max_retries`` / ``..._context_scaling``: when the summarizer's own
    context overflows, retry with every event cut to a shrinking length.
    """

    llm_config: LLMConfig | None = None
    max_event_length: Annotated[int, Field(ge=100)] = 10_000
    hard_context_reset_max_retries: Annotated[int, Field(ge=1)] = 5
    hard_context_reset_context_scaling: Annotated[float, Field(gt=0, lt=1)] = 0.8
    hard_fallback: Literal["offline", "reset", "raise"] = "offline"  # type: ignore[assignment]

    purpose: ClassVar[str] = "summary"

    @property
    def summarizer(self) -> str:
        """Who writes this strategy's summaries: ``model gpt-4o-mini`` or ``the offline
        summarizer``."""
        if self.llm_config is None:
            return "the offline summarizer"
        return f"model {self.llm_config.model}"

    def condense(self, view: View, tokens: TokenSource = FRESH, calls: ModelCalls | None = None):  # type: ignore[override]
        # This run's own record, added to the caller's at the end: a fallback may rewrite the
        # calls of this strategy's run, never those of another strategy in the same pipeline.
        mine = ModelCalls(preview=calls.preview if calls is not None else False)
        try:
            return super().condense(view, tokens, mine)
        finally:
            if calls is not None:
                calls.take(mine)

    def _record(self, calls: ModelCalls, call: LLMCall, produced: bool) -> None:
        calls.record(LedgerEntry(self.type, self.purpose, call, produced))

    def _failed(self, calls: ModelCalls, message: str, brief: str) -> SummarizerFailed:
        calls.failure = brief
        return SummarizerFailed(message, brief)

    def ask(
        self, calls: ModelCalls, request: Callable[[int], LLMReply], parse: Callable[[LLMReply], T],
        longest: int | None = None,
    ) -> T:
        """``parse(request(max_event_length))``, shrinking event text after a context overflow.

        ``longest``: the length of the longest event text in the request. The first shrink
        starts from it when it is below ``max_event_length``, so that every retry really sends
        less (scaling a limit no event reaches would resend the same prompt).

        Every call lands in ``calls``, for the ledger. A failed call or an unusable reply
        (``parse`` raised ValueError) raises SummarizerFailed, so nothing half-made is ever
        stored. A preview (``calls.preview``) calls nothing: ModelNotCalled.
        """
        limit = self.max_event_length
        if calls.preview:
            calls.needs_model = True
            raise ModelNotCalled(f"{self.type}: only the model can decide here, and a dry run does not call it")
        for _ in range(self.hard_context_reset_max_retries):
            try:
                reply = request(limit)
            except ContextWindowError as e:
                self._record(calls, e.call, False)
                if longest is not None:
                    limit = min(limit, longest)
                limit = max(100, int(limit * self.hard_context_reset_context_scaling))
                log.warning("%s: the summarizer's context overflowed; retrying with events cut to %d chars", self.type, limit)
                continue
            except LLMError as e:
                self._record(calls, e.call, False)
                raise self._failed(calls, f"{self.type}: the model call failed: {e}", e.brief) from e
            try:
                result = parse(reply)
            except ValueError as e:
                if not reply.cached:  # a kept reply was no call: the ledger has it already
                    self._record(calls, replace(reply.call, outcome="bad_response", error=str(e)), False)
                brief = f"{reply.call.model}: bad_response ({' '.join(str(e).split())[:60]})"
                raise self._failed(calls, f"{self.type}: the model's reply was unusable: {e}", brief) from e
            if not reply.cached:
                self._record(calls, reply.call, True)
            return result
        raise self._failed(
            calls,
            f"{self.type}: the summarizer's context overflowed even with events cut to {limit} characters",
            f"{self.llm_config.model if self.llm_config else self.type}: context_window even with "
            f"events cut to {limit} characters",
        )


@settings()
class SummarizingCondenser(LLMCondenser):
    """Forget the middle and put a summary of it (and of the previous summary) in its place."""

    minimum_progress: Annotated[float, Field(ge=0, lt=1)] = 0.1

    summary_slot: ClassVar[int] = 1
    negative_tail_resets: ClassVar[bool] = True  # as the SDK: a negative tail is a hard reset

    def previous_summary(self, view: View) -> str | None:
        s = view.summary_event
        return s.summary if s is not None else None

    def forgotten(self, view: View, start: int, end: int) -> list[Event]:
        """What the summary covers: the stored events it forgets (not the old summary, not
        pinned events, which stay or are shown again as they are)."""
        kept = view.manipulation_indices.kept
        return [e for i, e in enumerate(view.events[start:end], start)
                if e.seq is not None and i not in kept]

    def summarize_with_model(self, events: list[Event], previous: str | None, calls: ModelCalls) -> str:
        raise NotImplementedError

    def summarize_offline(self, events: list[Event], previous: str | None) -> str:
        from ..summarizers.offline import OfflineSummarizer

        return OfflineSummarizer().summarize(events, previous)

    def summarize(self, events: list[Event], previous: str | None, calls: ModelCalls) -> str:
        if self.llm_config is None:
            return self.summarize_offline(events, previous)
        if calls.preview:
            return PREVIEW_SUMMARY
        return self.summarize_with_model(events, previous, calls)

    def condensation(self, view: View, start: int, end: int, summary: str) -> Condensation:
        return Condensation(
            forgotten_ranges=runs_at(view, range(start, end)),
            summary=summary,
            summary_offset=summary_offset(view, start),
        )

    def get_condensation(self, view: View, reasons: set[Reason], tokens: TokenSource, calls: ModelCalls) -> Condensation:
        start, end = self.cut(view, reasons, tokens)
        summary = self.summarize(self.forgotten(view, start, end), self.previous_summary(view), calls)
        return self.condensation(view, start, end, summary)

    def fallback(
        self, view: View, reasons: set[Reason], error: NoCondensationAvailable, tokens: TokenSource,
        calls: ModelCalls,
    ) -> Condensation | None:
        """``offline``: the offline summarizer over the cut the reasons asked for (or over
        everything after the system prompt when there is no cut); ``reset``: the model over
        everything after the system prompt, shrinking event text on overflow; ``raise``."""
        if self.hard_fallback == "raise":
            return None
        span = None
        if self.hard_fallback == "offline":
            try:
                span = self.cut(view, reasons, tokens)
            except NoCondensationAvailable:
                pass
        if span is None:
            positions = self.reset_positions(view)
            if positions is None:
                return None
            span = (positions.start, positions.stop)
        events, previous = self.forgotten(view, *span), self.previous_summary(view)
        if self.hard_fallback == "offline":
            return self.condensation(view, *span, self.summarize_offline(events, previous))
        try:
            return self.condensation(view, *span, self.summarize(events, previous, calls))
        except SummarizerFailed:
            return None

