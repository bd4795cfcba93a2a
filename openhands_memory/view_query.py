"""The SQL behind a view: read only the visible tail, never the whole history.

1. The hidden runs in force at the newest condensation at or before the view's end
   (``hidden.py``: canonical, so a rolling history has one or two). Their complement gives
   the visible id intervals.
2. Every row in those intervals is read (payloads only for LLM-visible kinds), plus the
   newest summary and the newest request.
3. Enforcement needs two facts about hidden events: how many actions each visible batch has
   in the whole history (an indexed count), and whether a thinking tool loop runs across an
   interval edge (one seek of the loop-edge index, and one row after the edge).

Every statement here has a plan test (tests/test_query_plans.py): a seek on the index named
there, never a read of a conversation's rows by ``conversation_id`` alone.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from . import hidden, ranges
from .events import Event
from .history import TOOL_KINDS, RowFacts, TailHistory, loop_spans
from .rows import decode

END = 2**62  # "no upper bound" for id ranges

_TOOL_KIND_LIST = ", ".join(f"'{k}'" for k in sorted(TOOL_KINDS))


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


def _ends(db: sqlite3.Connection, cid: str, upto: int) -> tuple[int, int | None, int | None]:
    """(the last event id <= upto, the newest condensation <= upto, the newest overall)."""
    last, cond, newest = db.execute(
        "SELECT (SELECT MAX(id) FROM event WHERE conversation_id = ?1 AND id <= ?2), "
        "(SELECT MAX(id) FROM condensation WHERE conversation_id = ?1 AND id <= ?2), "
        "(SELECT MAX(id) FROM condensation WHERE conversation_id = ?1)",
        (cid, upto),
    ).fetchone()
    return (-1 if last is None else last), cond, newest


def _summary(db: sqlite3.Connection, cid: str, upto: int) -> Summary | None:
    row = db.execute(
        "SELECT c.id, e.uid, e.timestamp, c.summary, c.summary_offset "
        "FROM condensation c JOIN event e ON e.conversation_id = c.conversation_id AND e.id = c.id "
        "WHERE c.conversation_id = ? AND c.id <= ? "
        "AND c.summary IS NOT NULL AND c.summary_offset IS NOT NULL "
        "ORDER BY c.id DESC LIMIT 1",
        (cid, upto),
    ).fetchone()
    return Summary(*row) if row else None


def _last_request(db: sqlite3.Connection, cid: str, upto: int) -> int | None:
    return db.execute(
        "SELECT MAX(id) FROM event WHERE conversation_id = ? AND id <= ? "
        "AND kind = 'CondensationRequest'",
        (cid, upto),
    ).fetchone()[0]


# Intervals go to SQL as a VALUES list, so that a view costs a fixed number of statements
# however many intervals it has. CROSS JOIN makes SQLite walk the intervals in order and seek
# the primary key in each, so rows come back in id order without a sort.
_CHUNK = 4_000  # intervals per statement (two parameters each, well under SQLite's limit)


def intervals_cte(intervals: list[ranges.Run]) -> tuple[str, list[int]]:
    """``WITH iv(s, e) AS (VALUES ...)`` for ``intervals`` and its parameters."""
    values = ", ".join("(?, ?)" for _ in intervals)
    return f"WITH iv(s, e) AS (VALUES {values}) ", [x for run in intervals for x in run]


def chunks(intervals: list[ranges.Run]):
    for i in range(0, len(intervals), _CHUNK):
        yield intervals[i : i + _CHUNK]


def _rows(db: sqlite3.Connection, cid: str, intervals: list[ranges.Run]):
    for part in chunks(intervals):
        cte, params = intervals_cte(part)
        yield from db.execute(
            cte + "SELECT ev.id, ev.kind, ev.has_thinking, "
            "CASE WHEN ev.llm_visible THEN ev.payload END "
            "FROM iv CROSS JOIN event ev ON ev.conversation_id = ? AND ev.id BETWEEN iv.s AND iv.e",
            (*params, cid),
        )


# The nearest row before an interval that is not a tool event, or starts a thinking loop: the
# partial index ix_event_loop_edge holds exactly those rows, so this is one seek however long
# the run of tool events before the interval is.
LOOP_EDGE = f"(kind NOT IN ({_TOOL_KIND_LIST}) OR has_thinking)"


def edges(
    db: sqlite3.Connection, cid: str, intervals: list[ranges.Run], upto: int
) -> tuple[dict[int, int], set[int]]:
    """For each interval: the thinking loop its first event may continue (``open_loop_at``),
    and whether the event after it continues a loop running into it (``continues_after``)."""
    open_loop_at: dict[int, int] = {}
    continues_after: set[int] = set()
    for part in chunks(intervals):
        cte, params = intervals_cte(part)
        found = db.execute(
            cte + "SELECT iv.s, iv.e, "
            "(SELECT CASE WHEN kind = 'ActionEvent' AND has_thinking THEN id END FROM event "
            f"WHERE conversation_id = ? AND id < iv.s AND {LOOP_EDGE} ORDER BY id DESC LIMIT 1), "
            f"(SELECT kind IN ({_TOOL_KIND_LIST}) AND NOT has_thinking FROM event "
            "WHERE conversation_id = ? AND id = iv.e + 1) FROM iv",
            (*params, cid, cid),
        )
        for s, e, loop_start, continues in found:
            if s > 0 and loop_start is not None:
                open_loop_at[s] = loop_start
            if e < upto and continues:
                continues_after.add(e)
    return open_loop_at, continues_after


def batch_sizes(db: sqlite3.Connection, cid: str, upto: int, rids: set[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    rid_list = sorted(rids)
    for i in range(0, len(rid_list), 500):
        chunk = rid_list[i : i + 500]
        out.update(
            db.execute(
                f"SELECT llm_response_id, COUNT(*) FROM event WHERE +conversation_id = ? "
                # The unary "+" takes conversation_id and id out of index selection: on them the
                # planner may pick the uid or primary key index and read every row of the
                # conversation. The partial response-id index is then the only choice: one seek
                # per batch, whatever the history.
                f"AND kind = 'ActionEvent' AND +id <= ? "
                f"AND llm_response_id IN ({', '.join('?' for _ in chunk)}) "
                f"GROUP BY llm_response_id",
                (cid, upto, *chunk),
            ).fetchall()
        )
    return out


def load(db: sqlite3.Connection, cid: str, at: int | None = None) -> ViewData:
    """Read what the view of ``cid`` as it stood right after event ``at`` is made of.

    A fixed number of statements, whatever the history: the ends, the hidden runs, the rows
    of every visible interval, the interval edges, the batch counts, the summary, the request.
    """
    upto, last_cond, newest_cond = _ends(db, cid, END if at is None else at)
    runs = hidden.live(db, cid) if last_cond == newest_cond else hidden.at(db, cid, last_cond)
    intervals = ranges.complement(runs, upto) if upto >= 0 else []
    facts: list[RowFacts] = []
    events: dict[int, Event] = {}
    for seq, kind, thinking, payload in _rows(db, cid, intervals):
        facts.append(RowFacts(seq, kind, bool(thinking)))
        if payload is not None:
            events[seq] = decode(kind, payload, seq)
    open_loop_at, continues_after = edges(db, cid, intervals, upto)
    rids = {getattr(e, "llm_response_id") for e in events.values() if e.kind == "ActionEvent"}  # type: ignore[attr-defined]
    return ViewData(
        conversation_id=cid,
        upto=upto,
        hidden=runs,
        facts=facts,
        events=events,
        open_loop_at=open_loop_at,
        continues_after=continues_after,
        batch_sizes=batch_sizes(db, cid, upto, rids),
        summary=_summary(db, cid, upto),
        last_condensation=last_cond,
        last_request=_last_request(db, cid, upto),
    )
