"""Answers about the whole history that enforcement needs (batch sizes, tool-loop spans).

``ListHistory`` works from a list of events (in memory, tests, imports). ``TailHistory`` works
from the rows the view query read (the visible intervals) plus the few facts the query asked
SQL about the hidden events at their edges, so that it never has to read the whole history.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from ..events import TOOL_KINDS, ActionEvent, Event


@dataclass(slots=True)
class RowFacts:
    """What loop detection, enforcement and turn grouping need to know about one event (from
    indexed columns: no payload is decoded for them). An event answers the same questions
    itself, so either may stand where facts are read."""

    seq: int
    kind: str
    has_thinking: bool
    tool_call_id: str | None = None
    llm_response_id: str | None = None

    @property
    def starts_loop(self) -> bool:
        return self.kind == "ActionEvent" and self.has_thinking

    @property
    def is_tool(self) -> bool:
        return self.kind in TOOL_KINDS


def loop_spans(
    rows: Iterable[RowFacts],
    *,
    open_loop_at: dict[int, int] | None = None,
    continues_after: Iterable[int] = (),
    joins: dict[int, int] | None = None,
) -> dict[int, tuple[int, ...]]:
    """Map each event in a thinking tool loop to the loop: the ids of its members, in order.

    ``rows`` are contiguous runs of events in id order; a jump in ids starts a new run,
    except where ``joins`` says the row is the next one on a history tree's path after the
    row before it (``joins[seq] == previous seq``: a branch point).
    ``open_loop_at[s]`` says a run starting at ``s`` continues a loop that began at an earlier
    (unread) id; ``continues_after`` lists run ends whose loop goes on past them. Such loops
    also name an id outside the rows (that earlier start, or the id after the end), so they
    never count as complete.
    """
    open_loop_at = open_loop_at or {}
    joins = joins or {}
    extends = set(continues_after)
    spans: dict[int, tuple[int, ...]] = {}
    members: list[int] = []
    start: int | None = None
    prev: int | None = None

    unread: list[int] = []  # ids of the loop the rows lack: it began before a hidden gap

    def close(end: int) -> None:
        nonlocal start, members, unread
        if start is not None:
            loop = tuple(unread + members + ([end + 1] if end in extends else []))
            for m in members:
                spans[m] = loop
        start, members, unread = None, [], []

    for r in rows:
        if prev is not None and r.seq != prev + 1 and joins.get(r.seq) != prev:
            close(prev)
        if start is None and r.seq in open_loop_at and r.is_tool and not r.starts_loop:
            start = open_loop_at[r.seq]
            unread = [start, r.seq - 1]  # where it began, and the hidden row before this one
        if r.starts_loop:
            if prev is not None and start is not None:
                close(prev)
            start, members = r.seq, [r.seq]
        elif r.is_tool and start is not None:
            members.append(r.seq)
        elif not r.is_tool:
            if start is not None and prev is not None:
                close(prev)
        prev = r.seq
    if prev is not None:
        close(prev)
    return spans


def facts_of(events: Sequence[Event]) -> list[RowFacts]:
    return [
        RowFacts(e.seq, e.kind, e.has_thinking)  # type: ignore[arg-type]
        for e in events
        if e.seq is not None
    ]


@dataclass
class ListHistory:
    """History answers computed from every event (each with its ``seq``)."""

    events: Sequence[Event]
    _batches: Counter = field(init=False)
    _spans: dict[int, tuple[int, ...]] = field(init=False)

    def __post_init__(self) -> None:
        self._batches = Counter(
            e.llm_response_id for e in self.events if isinstance(e, ActionEvent)
        )
        facts = facts_of(self.events)
        # The list is the history (a line, or a tree's path): neighbours in it are neighbours.
        self._spans = loop_spans(facts, joins={b.seq: a.seq for a, b in zip(facts, facts[1:])})

    def batch_size(self, llm_response_id: str) -> int:
        return self._batches[llm_response_id]

    def loop_span(self, seq: int) -> tuple[int, ...] | None:
        return self._spans.get(seq)


@dataclass
class TailHistory:
    """History answers from the view query's rows and edge facts (see ``view/query.py``)."""

    batch_sizes: dict[str, int]
    spans: dict[int, tuple[int, ...]]

    def batch_size(self, llm_response_id: str) -> int:
        return self.batch_sizes.get(llm_response_id, 0)

    def loop_span(self, seq: int) -> tuple[int, ...] | None:
        return self.spans.get(seq)
