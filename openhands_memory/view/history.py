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


@dataclass(frozen=True)
class RowFacts:
    """What loop detection needs to know about one event."""

    seq: int
    kind: str
    has_thinking: bool

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
) -> dict[int, tuple[int, int]]:
    """Map each event in a thinking tool loop to the loop's [first, last] id.

    ``rows`` are contiguous runs of events in id order; a jump in ids starts a new run.
    ``open_loop_at[s]`` says a run starting at ``s`` continues a loop that began at an earlier
    (unread) id; ``continues_after`` lists run ends whose loop goes on past them. Such loops
    get a span reaching outside the rows, so they never count as complete.
    """
    open_loop_at = open_loop_at or {}
    extends = set(continues_after)
    spans: dict[int, tuple[int, int]] = {}
    members: list[int] = []
    start: int | None = None
    prev: int | None = None

    def close(end: int) -> None:
        nonlocal start, members
        if start is not None:
            for m in members:
                spans[m] = (start, end + 1 if end in extends else end)
        start, members = None, []

    for r in rows:
        if prev is not None and r.seq != prev + 1:
            close(prev)
        if start is None and r.seq in open_loop_at and r.is_tool and not r.starts_loop:
            start = open_loop_at[r.seq]
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
        RowFacts(e.seq, e.kind, e.has_thinking)  # type: ignore[attr-defined, arg-type]
        for e in events
        if e.seq is not None
    ]


@dataclass
class ListHistory:
    """History answers computed from every event (each with its ``seq``)."""

    events: Sequence[Event]
    _batches: Counter = field(init=False)
    _spans: dict[int, tuple[int, int]] = field(init=False)

    def __post_init__(self) -> None:
        self._batches = Counter(
            e.llm_response_id for e in self.events if isinstance(e, ActionEvent)
        )
        self._spans = loop_spans(facts_of(self.events))

    def batch_size(self, llm_response_id: str) -> int:
        return self._batches[llm_response_id]

    def loop_span(self, seq: int) -> tuple[int, int] | None:
        return self._spans.get(seq)


@dataclass
class TailHistory:
    """History answers from the view query's rows and edge facts (see ``view/query.py``)."""

    batch_sizes: dict[str, int]
    spans: dict[int, tuple[int, int]]

    def batch_size(self, llm_response_id: str) -> int:
        return self.batch_sizes.get(llm_response_id, 0)

    def loop_span(self, seq: int) -> tuple[int, int] | None:
        return self.spans.get(seq)
