"""The SQL behind a view: read only the visible tail, never the whole history.

1. The newest condensation at or before the view's end carries ``hidden``: every id any
   condensation so far has forgotten, as disjoint runs. Its complement gives the visible
   id intervals.
2. Every row in those intervals is read (payloads only for LLM-visible kinds), plus the
   newest summary and the newest request.
3. Enforcement needs two facts about hidden events: how many actions each visible batch has
   in the whole history (an indexed count), and whether a thinking tool loop runs across an
   interval edge (a short backwards seek, and one row after the edge).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from . import ranges
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


def _last_id(db: sqlite3.Connection, cid: str, upto: int) -> int:
    row = db.execute(
        "SELECT MAX(id) FROM event WHERE conversation_id = ? AND id <= ?", (cid, upto)
    ).fetchone()
    return -1 if row[0] is None else row[0]


def _latest_condensation(db: sqlite3.Connection, cid: str, upto: int) -> tuple[int | None, list]:
    row = db.execute(
        "SELECT id, hidden FROM condensation WHERE conversation_id = ? AND id <= ? "
        "ORDER BY id DESC LIMIT 1",
        (cid, upto),
    ).fetchone()
    if row is None:
        return None, []
    return row[0], [(s, e) for s, e in json.loads(row[1])]


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


def _rows(db: sqlite3.Connection, cid: str, intervals: list[ranges.Run]):
    sql = (
        "SELECT id, kind, has_thinking, CASE WHEN llm_visible THEN payload END "
        "FROM event WHERE conversation_id = ? AND id BETWEEN ? AND ? ORDER BY id"
    )
    for start, end in intervals:
        yield from db.execute(sql, (cid, start, end))


def _loop_start_before(db: sqlite3.Connection, cid: str, seq: int) -> int | None:
    """If event ``seq`` continues a thinking tool loop begun earlier, that loop's first id."""
    row = db.execute(
        f"SELECT id, kind, has_thinking FROM event WHERE conversation_id = ? AND id < ? "
        f"AND (kind NOT IN ({_TOOL_KIND_LIST}) OR has_thinking) ORDER BY id DESC LIMIT 1",
        (cid, seq),
    ).fetchone()
    if row is not None and row[1] == "ActionEvent" and row[2]:
        return row[0]
    return None


def _continues_loop(db: sqlite3.Connection, cid: str, seq: int) -> bool:
    """Whether event ``seq`` is a tool event that would extend a loop running into it."""
    row = db.execute(
        "SELECT kind, has_thinking FROM event WHERE conversation_id = ? AND id = ?", (cid, seq)
    ).fetchone()
    return row is not None and row[0] in TOOL_KINDS and not row[1]


def batch_sizes(db: sqlite3.Connection, cid: str, upto: int, rids: set[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    rid_list = sorted(rids)
    for i in range(0, len(rid_list), 500):
        chunk = rid_list[i : i + 500]
        out.update(
            db.execute(
                f"SELECT llm_response_id, COUNT(*) FROM event WHERE conversation_id = ? "
                # "+id": keep the planner off the primary key, whose range scan reads every
                # row of the conversation; the partial response-id index is a seek per batch.
                f"AND kind = 'ActionEvent' AND +id <= ? "
                f"AND llm_response_id IN ({', '.join('?' for _ in chunk)}) "
                f"GROUP BY llm_response_id",
                (cid, upto, *chunk),
            ).fetchall()
        )
    return out


def load(db: sqlite3.Connection, cid: str, at: int | None = None) -> ViewData:
    """Read what the view of ``cid`` as it stood right after event ``at`` is made of."""
    upto = _last_id(db, cid, END if at is None else at)
    last_cond, hidden = _latest_condensation(db, cid, upto)
    intervals = ranges.complement(hidden, upto) if upto >= 0 else []
    facts: list[RowFacts] = []
    events: dict[int, Event] = {}
    for seq, kind, thinking, payload in _rows(db, cid, intervals):
        facts.append(RowFacts(seq, kind, bool(thinking)))
        if payload is not None:
            events[seq] = decode(kind, payload, seq)
    open_loop_at: dict[int, int] = {}
    continues_after: set[int] = set()
    for start, end in intervals:
        if start > 0:
            loop_start = _loop_start_before(db, cid, start)
            if loop_start is not None:
                open_loop_at[start] = loop_start
        if end < upto and _continues_loop(db, cid, end + 1):
            continues_after.add(end)
    rids = {getattr(e, "llm_response_id") for e in events.values() if e.kind == "ActionEvent"}  # type: ignore[attr-defined]
    return ViewData(
        conversation_id=cid,
        upto=upto,
        hidden=hidden,
        facts=facts,
        events=events,
        open_loop_at=open_loop_at,
        continues_after=continues_after,
        batch_sizes=batch_sizes(db, cid, upto, rids),
        summary=_summary(db, cid, upto),
        last_condensation=last_cond,
        last_request=_last_request(db, cid, upto),
    )
