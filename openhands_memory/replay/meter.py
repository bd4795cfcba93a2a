"""Measuring what one strategy sends at each model call, at the cost of what changed.

A replay measures thousands of views of one history, each mostly the one before plus a few
events. Counting each view anew would make a replay quadratic in the history, so the meter
keeps the previous view's events and their running token sums, finds where the new view
first differs (the views share event objects: the conversation's cached view is extended,
and a strategy that rewrites events, as masking does, rewrites only what it must), and
counts only from there. That point is also what a provider's prompt cache cares about:
everything before it was sent, unchanged, at the previous call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ..events import ActionEvent, Event, ObservationBase
from ..view.tokens import TokenCounter, count_event


def first_difference(old: Sequence[Event], new: Sequence[Event], hint: int = 0) -> int:
    """The length of the longest common start of ``old`` and ``new``.

    List comparison runs in C and short-cuts on identical objects. ``hint`` (where the
    previous view differed from its own predecessor) is checked first in one pass, since
    views change near where they last changed; from the start known equal, spans twice as
    long each time are compared until one differs, and that span is bisected. The cost is
    one pass over the common start plus a few over what changed.
    """
    n = min(len(old), len(new))
    lo = hint if 0 < hint <= n and new[:hint] == old[:hint] else 0
    step = 64
    while lo < n:
        hi = min(n, lo + step)
        if new[lo:hi] == old[lo:hi]:
            lo, step = hi, step * 2
            continue
        while hi - lo > 1:  # new[:lo] == old[:lo]; new[:hi] != old[:hi]
            mid = (lo + hi) // 2
            if new[lo:mid] == old[lo:mid]:
                lo = mid
            else:
                hi = mid
        return lo
    return n


@dataclass
class Change:
    """How a view differs from the one sent at the previous call."""

    kept: int  # the common start's length
    forgotten: list[Event]  # stored events no longer in the view
    rewritten: list[Event]  # stored events still there, but rewritten (masked)
    fresh: list[Event]  # events not in the previous view (new ones, a new summary)


@dataclass
class Meter:
    """One strategy's calls: the tokens each sends and how many of them a cache keeps."""

    counter: TokenCounter
    counts: dict[int, tuple[Event, int]] = field(default_factory=dict)  # id(event) -> (event, tokens)
    previous: list[Event] = field(default_factory=list)
    sums: list[int] = field(default_factory=lambda: [0])  # sums[i]: tokens of previous[:i]
    peak: int = 0
    # The tool-call ids of the actions and results in the previous view (pairs checked).
    actions: set[str] = field(default_factory=set)
    results: set[str] = field(default_factory=set)
    broken: set[str] = field(default_factory=set)
    hint: int = 0  # where the previous view first differed from the one before it

    def tokens(self, e: Event) -> int:
        """An event's tokens, counted once per event object (shared between strategies)."""
        got = self.counts.get(id(e))
        if got is None:
            got = self.counts[id(e)] = (e, count_event(self.counter, e))  # holding e keeps id(e) its own
        return got[1]

    def measure(self, events: list[Event], answered: set[str], newly: Sequence[str],
                extends: bool = False) -> tuple[int, int, Change]:
        """(input tokens, cached tokens, the change) of the view ``events``. ``answered``: the
        tool-call ids whose results the history holds so far; ``newly``: those of them added
        since the previous call (the pair check); ``extends``: the view was made by appending
        to the previous one (``View.extends``), so nothing before its new events changed."""
        old = self.previous
        kept = self.hint = len(old) if extends else first_difference(old, events, self.hint)
        cached = self.sums[kept]
        del self.sums[kept + 1 :]
        total = cached
        for e in events[kept:]:
            total += self.tokens(e)
            self.sums.append(total)
        change = self._change(old, events, kept)
        self._check_pairs(events, change, answered, newly)
        self.previous = events
        self.peak = max(self.peak, total)
        return total, cached, change

    def _change(self, old: list[Event], new: list[Event], kept: int) -> Change:
        before = {e.seq: e for e in old[kept:] if e.seq is not None}
        fresh, rewritten = [], []
        for e in new[kept:]:
            was = before.pop(e.seq, None) if e.seq is not None else None
            if was is None:
                fresh.append(e)
            elif was is not e:
                rewritten.append(e)
        return Change(kept, list(before.values()), rewritten, fresh)

    def _check_pairs(self, events: list[Event], change: Change, answered: set[str], newly: Sequence[str]) -> None:
        """Tool calls and results that the view shows apart: a result without its call, or a
        call without the result the history already holds. Checked on what changed, unless
        events left the view (then on the whole view)."""
        if change.forgotten:
            self.actions = {e.tool_call_id for e in events if isinstance(e, ActionEvent)}
            self.results = {e.tool_call_id for e in events if isinstance(e, ObservationBase)}
            self.broken |= self.results - self.actions
            self.broken |= (self.actions - self.results) & answered
            return
        results = []
        for e in change.fresh:
            if isinstance(e, ActionEvent):
                self.actions.add(e.tool_call_id)
            elif isinstance(e, ObservationBase):
                self.results.add(e.tool_call_id)
                results.append(e.tool_call_id)
        self.broken.update(r for r in results if r not in self.actions)
        self.broken.update(a for a in newly if a in self.actions and a not in self.results)
