"""The seam between a conversation and a condensing strategy: all that one asks of the other.

A strategy (``condensers/``) is handed a view, a token source for its counts, and a
``ModelCalls`` record to write its model calls in; it returns a View (sent as is) or a
Condensation (stored by the conversation). It keeps nothing from one run to the next, so one
strategy object can serve any number of conversations, threads or replays at once. Besides
``condense``, a conversation reads the strategy's pin rules and their token limit (applied
before it runs), and, for a replay's report, its settings and who writes its summaries;
``condensers.base.Condenser`` gives each of these a default.

Below both the conversation and the strategies, so that each imports it and neither the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from .events import Condensation
from .view import View
from .view.pins import PinRule
from .view.tokens import TokenSource


class ModelCall(Protocol):
    """What the ledger keeps of one call (``llm.LLMCall``)."""

    model: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    latency_s: float
    outcome: str
    error: str | None
    response_id: str | None
    attempts: int


class CallRecord(Protocol):
    """One model call for the ``llm_call`` ledger (``condensers.llm_base.LedgerEntry``)."""

    @property
    def strategy(self) -> str: ...
    @property
    def purpose(self) -> str: ...
    @property
    def call(self) -> ModelCall: ...
    @property
    def produced(self) -> bool: ...


@dataclass
class ModelCalls:
    """What a strategy asked of models during one run, written as it goes: a record the
    caller hands in (as it hands in the token source) and reads once the run is over, so
    that the strategy itself keeps no state.

    ``preview`` is the caller's: stand a placeholder in for every model call (a dry run that
    must not spend). The rest is the strategy's: ``calls``, every call made, in order, for the
    ledger (``produced``: its reply went into the result); ``failure``, the latest model
    failure in one short line; ``needs_model``, a preview reached a point only the model
    could decide.
    """

    preview: bool = False
    calls: list[CallRecord] = field(default_factory=list)
    failure: str | None = None
    needs_model: bool = False

    def record(self, call: CallRecord) -> None:
        self.calls.append(call)

    def take(self, other: ModelCalls) -> None:
        """Add what ``other`` (a part of this run, such as one strategy of a pipeline) recorded."""
        self.calls += other.calls
        self.failure = other.failure or self.failure
        self.needs_model = self.needs_model or other.needs_model


class Strategy(Protocol):
    """Everything a conversation asks of a strategy (``Conversation.condense``, a replay)."""

    @property
    def pin_rules(self) -> tuple[PinRule, ...]:
        """The pin rules (``[[condenser.pins]]``) the conversation applies before each run."""
        ...

    def pin_limit(self) -> int | None:
        """The most tokens the pinned events may take (None: no limit)."""
        ...

    def condense(self, view: View, tokens: TokenSource = ..., calls: ModelCalls | None = None) -> View | Condensation:
        """The view to send, or a Condensation to store; model calls go into ``calls``."""
        ...

    def config(self) -> dict[str, Any]:
        """The settings, as stored beside each condensation and shown in a replay's report."""
        ...

    @property
    def summarizer(self) -> str | None:
        """Who writes the summaries (``model gpt-4o-mini``), for a report; None: nobody."""
        ...
