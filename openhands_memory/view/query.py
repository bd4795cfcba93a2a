"""The SQL behind a view: read only the visible tail, never the whole history.

1. The hidden runs in force at the newest condensation at or before the view's end
   (``hidden.py``: canonical, so a rolling history has one or two). Their complement gives
   the visible id intervals.
2. Every row in those intervals is read (payloads only for LLM-visible kinds), plus the
   newest summary and the newest request.
3. Enforcement needs two facts about hidden events: how many actions each visible batch has
   in the whole history (an indexed count), and whether a thinking tool loop runs across an
   interval edge (one seek of the loop-edge index, and one row after the edge).

On a history tree (``storage/tree.py``) the view is that of the path from HEAD (or from
``at``) to the root: its intervals instead of 0..upto, the hidden runs in force on it, and the
newest summary and request on it.

The statements are ``storage.Session``'s; each has a plan test (tests/test_query_plans.py).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Sequence

from .. import ranges
from ..events import Event
from ..storage import Session, hidden, tree
from ..storage.codec import decode
from .history import RowFacts, TailHistory, loop_spans
from .messages import shown
from .pins import NO_PINS, Pins, fold, resolve
from .stored import Item, Loader, Pending, event_of

#: A view of more rows than this keeps no JSON: an event read later is read from the store
#: again (``stored.py``). Below it, the JSON costs less than the statement would.
KEEP_JSON_UPTO = 4096


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
    upto: int  # the last id the view covers (its leaf); -1 for an empty conversation
    hidden: list[ranges.Run]
    path: list[ranges.Run] | None  # the ids on the path to the root; None: all of 0..upto
    facts: list[RowFacts]  # every row in the visible intervals, in id order
    events: dict[int, Item]  # the LLM-visible ones among them (``stored.Pending`` until read)
    open_loop_at: dict[int, int]
    continues_after: set[int]
    batch_sizes: dict[str, int]
    summary: Summary | None
    last_condensation: int | None
    last_request: int | None
    pins: Pins = NO_PINS  # in force at ``upto``
    pinned: dict[int, Event] | None = None  # the pinned events not among ``events``, decoded
    loader: Loader | None = None  # reads the events a long view kept no JSON of

    def event(self, seq: int) -> Event:
        """The event ``seq`` among ``events``, decoded if need be."""
        return event_of(self.events[seq], self.loader)

    @property
    def unhandled_request(self) -> bool:
        return self.last_request is not None and (
            self.last_condensation is None or self.last_request > self.last_condensation
        )

    @property
    def joins(self) -> dict[int, int]:
        """Facts that are neighbours on the path though their ids are not (``loop_spans``):
        across a branch point with nothing hidden, or across detached rows (tree.py)."""
        return self.joins_of(self.facts)

    def joins_of(self, facts: Sequence[RowFacts]) -> dict[int, int]:
        """``joins`` among ``facts`` only (a run of this view's facts, in order): what a step
        that extends an open loop needs, at the cost of the loop, not of the history."""
        path = self.path or []
        if len(path) < 2 and len(facts) == sum(e - s + 1 for s, e in self.intervals):
            return {}  # every id of every interval read, and no branch point: nothing to join
        branch_at = {path[i][0]: path[i - 1][1] for i in range(1, len(path))}
        segment: list[tuple[int, int, int]] = []  # visible intervals, numbered by stretch
        for s, e in self.intervals:
            joined = segment and branch_at.get(s) == segment[-1][1]
            segment.append((s, e, segment[-1][2] if joined else len(segment)))
        out: dict[int, int] = {}
        k = 0
        prev: tuple[int, int] | None = None  # (seq, stretch) of the previous fact
        for f in facts:
            while k + 1 < len(segment) and segment[k][1] < f.seq:
                k += 1
            here = segment[k][2] if segment else 0
            if prev is not None and f.seq != prev[0] + 1 and prev[1] == here:
                out[f.seq] = prev[0]
            prev = (f.seq, here)
        return out

    @property
    def intervals(self) -> list[ranges.Run]:
        """The ids the view shows (before enforcement), as intervals."""
        return visible_intervals(self.path, self.hidden, self.upto)

    def history(self) -> TailHistory:
        if not self.open_loop_at and not any(f.has_thinking for f in self.facts):
            return TailHistory(self.batch_sizes, {})  # no thinking action: no loop to map
        spans = loop_spans(
            self.facts, open_loop_at=self.open_loop_at, continues_after=self.continues_after,
            joins=self.joins,
        )
        return TailHistory(self.batch_sizes, spans)


def edges(db: Session, cid: str, intervals: list[ranges.Run], upto: int,
          facts: list[RowFacts]) -> tuple[dict[int, int], set[int]]:
    """For each interval: the thinking loop its first event may continue (``open_loop_at``),
    and whether the event after it continues a loop running into it (``continues_after``),
    keyed by the interval's first and last of ``facts`` (the rows read)."""
    return _edges(_on_facts(db.view_edges(cid, intervals), facts), upto)


def _edges(rows: Iterable[tuple[int, int, int | None, Any]], upto: int) -> tuple[dict[int, int], set[int]]:
    open_loop_at: dict[int, int] = {}
    continues_after: set[int] = set()
    for s, e, loop_start, continues in rows:
        if s > 0 and loop_start is not None:
            open_loop_at[s] = loop_start
        if e < upto and continues:
            continues_after.add(e)
    return open_loop_at, continues_after


def _on_facts(rows: Iterable[tuple[int, int, int | None, Any]], facts: list[RowFacts]) -> list[tuple]:
    """Edge rows keyed by the first and last row read in each interval: a detached row at an
    interval's end is not read, so the loop facts belong to the row next to it."""
    seqs = [f.seq for f in facts]
    out = []
    for s, e, loop_start, continues in rows:
        first, last = bisect.bisect_left(seqs, s), bisect.bisect_right(seqs, e) - 1
        if first <= last:
            out.append((seqs[first], seqs[last], loop_start, continues))
    return out


def visible_intervals(path: list[ranges.Run] | None, hidden_runs: list[ranges.Run], upto: int) -> list[ranges.Run]:
    if path is None:
        return ranges.complement(hidden_runs, upto) if upto >= 0 else []
    return tree.subtract(path, hidden_runs)


def load(db: Session, cid: str, at: int | None = None, loader: Loader | None = None, *,
         rendered: bool = True) -> ViewData:
    """Read what the view of ``cid`` is made of: as it stood right after event ``at`` (the
    path from ``at`` to the root), or now (the path from HEAD).

    A fixed number of statements, whatever the history: the ends, the hidden runs and the
    path, the rows of every visible interval, the interval edges, the batch counts, the
    summary, the request. They go in two groups (``view_head``, ``view_tail``), each of which
    a backend may send in one round trip. A path with branches on it takes two statements
    more (its condensations, its hidden runs) and a group of its own for the batch counts.

    ``loader``: how to read an event again later (``stored.py``); without one, the view keeps
    every event's JSON, however long it is. ``rendered``: a long view renders its rows as
    they are read, and lets their JSON go (what its messages need, at the least memory: 100k
    rows' JSON held at once cost 100 MB more); without it, it keeps their JSON for a caller
    that reads it its own way (``ChatHistory``), and renders only if asked for messages.
    """
    last, last_cond, newest, live, path, pin_rows = db.view_head(cid, at)
    if not path or tree.is_prefix(path):
        upto = path[0][1] if path else -1
        if upto != last:  # HEAD (or ``at``) lies before the newest row: the ends up to it
            last, last_cond, newest = db.view_ends(cid, upto)
            live = None if last_cond != newest else live
        data = _load_prefix(db, cid, upto, last_cond, live, loader, rendered)
    else:
        data = _load_branch(db, cid, path, loader, rendered)
    if pin_rows:
        load_pins(db, data, pin_rows, path)
    return data


def load_pins(db: Session, data: ViewData, pin_rows: list[tuple[int, str]], path: list[ranges.Run]) -> None:
    """The pins in force on the view's path, and the pinned events it does not show,
    decoded: statements only a conversation with pins runs, and only for pinned events that
    are not in view."""
    data.pins, data.pinned = _fold_pins(db, data.conversation_id, pin_rows, path, data.upto, data.events)
    missing = [p.seq for p in data.pins if p.seq not in data.events and p.seq not in data.pinned]
    for seq, _, kind, _, _, payload in db.event_rows(data.conversation_id, missing) if missing else []:
        data.pinned[seq] = decode(kind, payload, seq)


def pins_at(db: Session, cid: str, at: int | None = None) -> Pins:
    """The pins in force right after event ``at`` (None: at HEAD), on its path."""
    path = db.path(cid, at)
    upto = db.last_seq(cid) if at is None else at
    if path:
        upto = min(upto, path[-1][1])
    return _fold_pins(db, cid, db.pin_events(cid, upto), path, upto, {})[0] if path else NO_PINS


def _fold_pins(db: Session, cid: str, pin_rows: list[tuple[int, str]], path: list[ranges.Run], upto: int,
               known: dict[int, Item]) -> tuple[Pins, dict[int, Event]]:
    """``pins.fold`` of the pin events on ``path``, naming events on it up to ``upto``; and
    the pinned events read to find them that ``known`` (the view's events) lacks.

    A pin event carries its event's id when pinned (``event_seq``): an event in view with
    that id and the pinned external id needs no statement; the others are read by id (the
    primary key), and only what is still unknown (a fork renumbered it) by external id.
    """
    linear = len(path) == 1 and path[0][0] == 0  # every id up to upto is on it
    mine = [(i, p) for i, p in pin_rows if i <= upto and (linear or ranges.covers(path, i))]
    fields = json.loads(f"[{','.join([p for _, p in mine])}]")  # one parse for all: a C loop
    folded = fold(list(zip([i for i, _ in mine], fields)))
    seq_of: dict[str, int] = {}
    hinted: dict[int, str] = {}
    for uid, (_, ev) in folded.items():
        hint = ev.get("event_seq")
        if hint is None or not 0 <= hint <= upto:
            continue
        item = known.get(hint)
        if type(item) is Pending and item.event is None and item.payload is None:
            item = None  # a long view's event: its row is read below, as an unseen one's
        if item is not None and event_of(item, None).id == uid:
            seq_of[uid] = hint
        elif item is None:
            hinted[hint] = uid
    read: dict[int, Event] = {}
    for seq, uid, kind, _, _, payload in db.event_rows(cid, list(hinted)) if hinted else []:
        if hinted[seq] == uid:
            seq_of[uid] = seq
            read[seq] = decode(kind, payload, seq)
    rest = [uid for uid in folded if uid not in seq_of]
    if rest:
        seq_of.update({uid: seq for seq, uid in db.seqs_of(cid, upto + 1, rest)})
    on_path = {uid: seq for uid, seq in seq_of.items() if linear or ranges.covers(path, seq)}
    return resolve(folded, on_path), read


def _load_prefix(db: Session, cid: str, upto: int, last_cond: int | None, live: list[ranges.Run] | None,
                 loader: Loader | None, rendered: bool) -> ViewData:
    runs = live if live is not None else hidden.at(db, cid, last_cond)
    intervals = ranges.complement(runs, upto) if upto >= 0 else []
    # Nothing hidden: every action up to ``upto`` is read, so the batches are counted here
    # (a long view with no condenser would otherwise have the database count each of its
    # tens of thousands of response ids).
    long = _long(intervals, loader)
    rows, edge_rows, summary, last_request, sizes = db.view_tail(cid, intervals, upto, count=bool(runs), once=long)
    data = _data(cid, upto, runs, None, rows, edge_rows, summary, last_cond, last_request, loader, long, rendered)
    if runs:  # (else every action up to ``upto`` was read, and counted as it was)
        data.batch_sizes = sizes
    return data


def _load_branch(db: Session, cid: str, path: list[ranges.Run], loader: Loader | None, rendered: bool) -> ViewData:
    upto = path[-1][1]
    last_cond, last_request = db.path_ends(cid, path)
    runs = tree.hidden_in_force(db, cid, path)
    intervals = tree.subtract(path, runs)
    long = _long(intervals, loader)
    rows, edge_rows, summary = db.branch_tail(cid, intervals, tree.edge_quads(path, intervals), path, once=long)
    data = _data(cid, upto, runs, path, rows, edge_rows, summary, last_cond, last_request, loader, long, rendered)
    data.batch_sizes = db.batch_sizes_on(cid, path, set(data.batch_sizes))
    return data


def _long(intervals: list[ranges.Run], loader: Loader | None) -> bool:
    """Whether a view keeps no JSON (``KEEP_JSON_UPTO``), judged by the rows its intervals
    can hold, before the first is read."""
    return loader is not None and sum(e - s + 1 for s, e in intervals) > KEEP_JSON_UPTO


def _data(cid: str, upto: int, runs: list[ranges.Run], path: list[ranges.Run] | None, rows: Iterable[tuple],
          edge_rows: list[tuple], summary: tuple | None, last_cond: int | None, last_request: int | None,
          loader: Loader | None, long: bool, rendered: bool) -> ViewData:
    facts: list[RowFacts] = []
    events: dict[int, Item] = {}
    counted: dict[str, int] = {}  # actions per response id among the rows
    # The rows come a batch at a time; a long view that is ``rendered`` renders each as it is
    # read and lets its JSON go, so that it never holds every payload and what is made of
    # them at once. Any other renders a row when its messages are asked for
    # (``messages.shown``). (One loop does what a long view needs of each row: a pass over
    # 100k rows costs ~10 ms.)
    render = long and rendered
    for seq, kind, thinking, call_id, rid, payload in rows:
        if kind == "ActionEvent":
            counted[rid] = counted.get(rid, 0) + 1
        if payload is None:
            facts.append(RowFacts(seq, kind, bool(thinking), call_id, rid))
            continue
        item = Pending(seq, kind, bool(thinking), call_id, rid, payload, long)
        if render:
            shown(item)
        facts.append(item)
        events[seq] = item
    open_loop_at, continues_after = _edges(_on_facts(edge_rows, facts), upto)
    return ViewData(
        conversation_id=cid,
        upto=upto,
        hidden=runs,
        path=path,
        facts=facts,
        events=events,
        open_loop_at=open_loop_at,
        continues_after=continues_after,
        batch_sizes=counted,
        summary=Summary(*summary) if summary else None,
        last_condensation=last_cond,
        last_request=last_request,
        loader=loader,
    )


