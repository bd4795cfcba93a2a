"""The SQL behind a view: read only the visible tail, never the whole history.

1. The hidden runs in force at the newest condensation at or before the view's end
   (``hidden.py``: canonical, so a rolling history has one or two). Their complement gives
   the visible id intervals.
2. Every row in those intervals is read (payloads only for LLM-visible kinds), plus the
   newest summary and the newest request.
3. Enforcement needs two facts about hidden events: how many actions each visible batch has
   in the whole history (an indexed count), and whether a thinking tool loop runs across an
   interval edge (one seek of the loop-edge index, and one row after the edge).

The statements are ``storage.Session``'s; each has a plan test (tests/test_query_plans.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .. import ranges
from ..events import Event
from ..storage import END, Session, hidden
from ..storage.codec import decode
from .history import RowFacts, TailHistory, loop_spans


@dataclass(frozen=True)
class Summary:
    condensation_seq: int
    condensation_uid: str
    timestamp: str
    text: str
    offset: int




@dataclass
class ViewData:
    """Everything a view is computed from; the cache extends it as events are appended."""

    conversation_id: str
    upto: int  # the last id the view covers; -1 for an empty conversation
    hidden: list[ranges.Run]
    facts: list[RowFacts]  # every row in the visible intervals, in id order
    events: dict[int, Event]  # the LLM-visible ones among them, decoded
    open_loop_at: dict[int, int]
    continues_after: set[int]
    batch_sizes: dict[str, int]
    summary: Summary | None
    last_condensation: int | None
    last_request: int | None

    @property
    def unhandled_request(self) -> bool:
        return self.last_request is not None and (
            self.last_condensation is None or self.last_request > self.last_condensation
        )

    def history(self) -> TailHistory:
        spans = loop_spans(
            self.facts, open_loop_at=self.open_loop_at, continues_after=self.continues_after
        )
        return TailHistory(self.batch_sizes, spans)


def edges(db: Session, cid: str, intervals: list[ranges.Run], upto: int) -> tuple[dict[int, int], set[int]]:
    """For each interval: the thinking loop its first event may continue (``open_loop_at``),
    and whether the event after it continues a loop running into it (``continues_after``)."""
    return _edges(db.view_edges(cid, intervals), upto)


def _edges(rows: Iterable[tuple[int, int, int | None, Any]], upto: int) -> tuple[dict[int, int], set[int]]:
    open_loop_at: dict[int, int] = {}
    continues_after: set[int] = set()
    for s, e, loop_start, continues in rows:
        if s > 0 and loop_start is not None:
            open_loop_at[s] = loop_start
        if e < upto and continues:
            continues_after.add(e)
    return open_loop_at, continues_after


def load(db: Session, cid: str, at: int | None = None) -> ViewData:
    """Read what the view of ``cid`` as it stood right after event ``at`` is made of.

    A fixed number of statements, whatever the history: the ends, the hidden runs, the rows
    of every visible interval, the interval edges, the batch counts, the summary, the request.
    They go in three groups (``view_head``, ``view_tail``, the batch counts), each of which
    a backend may send in one round trip.
    """
    upto, last_cond, _newest, live = db.view_head(cid, END if at is None else at)
    runs = live if live is not None else hidden.at(db, cid, last_cond)
    intervals = ranges.complement(runs, upto) if upto >= 0 else []
    rows, edge_rows, summary, last_request = db.view_tail(cid, intervals, upto)
    facts: list[RowFacts] = []
    events: dict[int, Event] = {}
    for seq, kind, thinking, payload in rows:
        facts.append(RowFacts(seq, kind, bool(thinking)))
        if payload is not None:
            events[seq] = decode(kind, payload, seq)
    open_loop_at, continues_after = _edges(edge_rows, upto)
    rids = {getattr(e, "llm_response_id") for e in events.values() if e.kind == "ActionEvent"}  # type: ignore[attr-defined]
    return ViewData(
        conversation_id=cid,
        upto=upto,
        hidden=runs,
        facts=facts,
        events=events,
        open_loop_at=open_loop_at,
        continues_after=continues_after,
        batch_sizes=db.batch_sizes(cid, upto, rids),
        summary=Summary(*summary) if summary else None,
        last_condensation=last_cond,
        last_request=last_request,
    )
