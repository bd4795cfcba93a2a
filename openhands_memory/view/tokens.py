"""Counting a view's tokens: the counters, and the token source a condenser is given.

A counter is litellm's tokenizer for a model, or a declared estimate (about four characters
a token) when no tokenizer is wanted. A condenser asks a ``TokenSource`` for a view's counts
(as an SDK condenser is handed ``agent_llm``): ``FRESH`` counts every event anew; a
conversation passes its counts cached in the event rows (``conversation/tokens.py``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, Sequence

from ..events import ActionEvent, Condensation, CondensationSummaryEvent, Event, ObservationBase
from .messages import batch_message, result_message, single_message

if TYPE_CHECKING:
    from .view import View

CHARS_PER_TOKEN = 4
ESTIMATE = "chars/4"


class TokenCounter(Protocol):
    name: str

    def count(self, messages: list[dict]) -> int: ...


class TokenSource(Protocol):
    """A view's token counts by ``counter``: its total, and each event's."""

    def total(self, view: "View", counter: TokenCounter) -> int: ...

    def per_event(self, view: "View", counter: TokenCounter) -> list[int]: ...


def event_messages(e: Event) -> list[dict]:
    """The provider message(s) one event contributes, for counting it on its own."""
    if isinstance(e, ActionEvent):
        return [batch_message([e])]
    if isinstance(e, ObservationBase):
        return [result_message(e)]
    msg = single_message(e)
    return [msg] if msg is not None else []


@dataclass(frozen=True)
class CharEstimate:
    """A declared estimate: one token per four characters of the messages' JSON."""

    name: str = ESTIMATE

    def count(self, messages: list[dict]) -> int:
        if not messages:
            return 0
        return math.ceil(len(json.dumps(messages, ensure_ascii=False)) / CHARS_PER_TOKEN)


def count_event(counter: TokenCounter, e: Event) -> int:
    return counter.count(event_messages(e))


def count_events(counter: TokenCounter, events: Sequence[Event]) -> int:
    return sum(count_event(counter, e) for e in events)


class FreshCounts:
    """Every event counted anew: for a view that is no stored conversation's (the SDK's)."""

    def total(self, view: "View", counter: TokenCounter) -> int:
        return count_events(counter, view.events)

    def per_event(self, view: "View", counter: TokenCounter) -> list[int]:
        return [count_event(counter, e) for e in view.events]


FRESH = FreshCounts()


def tokens_after(view: "View", cond: Condensation, counts: Sequence[int], counter: TokenCounter) -> int:
    """The tokens of ``view`` once ``cond`` applies, from each event's ``counts``: what it
    forgets goes, and a new summary replaces the old one."""
    gone = set(view.forgotten_positions(cond))
    replaced = cond.summary is not None
    after = sum(n for p, (e, n) in enumerate(zip(view.events, counts))
                if p not in gone and not (replaced and isinstance(e, CondensationSummaryEvent)))
    if replaced:
        after += count_event(counter, CondensationSummaryEvent(summary=cond.summary))
    if view.pins:  # a forgotten pinned event comes back as text (pins.reinjected)
        from .pins import reinjected

        lost = {e.seq: e for p, e in enumerate(view.events) if p in gone and e.seq in view.pins}
        after += count_events(counter, reinjected(view.pins, set(), lost))  # type: ignore[arg-type]
    return after
