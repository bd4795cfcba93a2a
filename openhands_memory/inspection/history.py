"""Every event of a conversation, forgotten or not, with what forgot it.

Rows stream a page at a time: a history of a million events is listed in bounded memory
(what is kept is one entry per forgotten run, to say which condensation hid an event).
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

from .. import limits, ranges

if TYPE_CHECKING:
    from ..conversation import EventStore
    from ..storage.session import Session

PAGE = 1000


@dataclass
class HistoryRow:
    id: int
    uid: str | None
    kind: str
    source: str
    timestamp: str
    llm_visible: bool
    forgotten_by: int | None  # the condensation that first hid this event
    token_count: int | None
    payload: dict[str, Any]
    # For a Condensation: strategy, reason, summary, offset, tokens and its forgotten ranges.
    condensation: dict[str, Any] | None = None
    # For a PinEvent: the id of the event it names by external id (None: no such event before it).
    pinned_id: int | None = None

    def as_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in ("id", "uid", "kind", "source", "timestamp", "llm_visible",
                                            "forgotten_by", "token_count")}
        if self.condensation is not None:
            out["condensation"] = self.condensation
        if self.kind == "PinEvent":
            out["pinned_id"] = self.pinned_id
        return out


def first_hiders(forgotten: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """(start, end, condensation) runs from (condensation, start, end) ranges: each id under
    the first condensation that hid it. The runs hidden so far are kept as sorted starts and
    ends, and each new range is placed by bisection: n log n, where a scan of every earlier
    run for every range took minutes at a million events."""
    by_cond: dict[int, list[ranges.Run]] = {}
    for cond, start, end in forgotten:
        by_cond.setdefault(cond, []).append((start, end))
    out: list[tuple[int, int, int]] = []
    starts: list[int] = []
    ends: list[int] = []
    for cond in sorted(by_cond):
        for s, e in ranges.merge(by_cond[cond]):
            i = bisect.bisect_left(ends, s)  # the first run that ends at or after s
            j, cur = i, s
            while j < len(starts) and starts[j] <= e:  # runs overlapping [s, e]: not new
                if starts[j] > cur:
                    out.append((cur, starts[j] - 1, cond))
                cur = max(cur, ends[j] + 1)
                j += 1
            if cur <= e:
                out.append((cur, e, cond))
            lo = min(s, starts[i]) if i < j else s
            hi = max(e, ends[j - 1]) if i < j else e
            if i > 0 and ends[i - 1] == lo - 1:  # join a run that ends just before
                i -= 1
                lo = starts[i]
            if j < len(starts) and starts[j] == hi + 1:  # and one that starts just after
                hi = ends[j]
                j += 1
            starts[i:j], ends[i:j] = [lo], [hi]
    return sorted(out)


def head_path(store: "EventStore", cid: str) -> list[ranges.Run]:
    """The id intervals on the path from HEAD to the root (storage/tree.py), oldest first:
    the events the agent's view is made of. Empty for an empty HEAD; ``[(0, last)]`` for a
    history with no branches."""
    with store.reading() as db:
        return db.path(cid)


def on_path(path: list[ranges.Run], seq: int) -> bool:
    """Whether ``seq`` lies on ``path`` (sorted, disjoint intervals)."""
    k = bisect.bisect_right(path, (seq, 2**62)) - 1
    return k >= 0 and path[k][0] <= seq <= path[k][1]


class _Hiders:
    """Which condensation first hid each id, asked in increasing id order."""

    def __init__(self, spans: list[tuple[int, int, int]]):
        self.spans, self.k = spans, 0

    def of(self, seq: int) -> int | None:
        spans = self.spans
        while self.k < len(spans) and spans[self.k][1] < seq:
            self.k += 1
        return spans[self.k][2] if self.k < len(spans) and spans[self.k][0] <= seq <= spans[self.k][1] else None


def _pinned_ids(db: "Session", cid: str, page: list[Any], payloads: list[dict[str, Any]]) -> dict[int, int | None]:
    """The id of the event each pin event of ``page`` names by its external id (a pin names
    an event before it), in one query for the page."""
    pins = {row[0]: p.get("event_id") for row, p in zip(page, payloads) if row[2] == "PinEvent"}
    uids = sorted({u for u in pins.values() if isinstance(u, str)})
    found = {uid: seq for seq, uid in db.seqs_of(cid, max(pins), uids)} if uids else {}
    out: dict[int, int | None] = {}
    for at, uid in pins.items():
        seq = found.get(uid) if isinstance(uid, str) else None
        out[at] = seq if seq is not None and seq < at else None
    return out


def history(store: "EventStore", cid: str, start: int = 0, stop: int | None = None) -> Iterator[HistoryRow]:
    """The events with ids in ``[start, stop]``, oldest first. An event on HEAD's path is
    marked hidden by the first condensation on that path that hid it (a condensation on
    another branch does not apply there); an event off it, by the first that hid it at all."""
    with store.reading() as db:
        forgotten = db.forgotten_ranges(cid)
        path = db.path(cid)
    everywhere = _Hiders(first_hiders(forgotten))
    on_head = _Hiders(first_hiders([r for r in forgotten if on_path(path, r[0])]))
    cursor = limits.bound(start)
    end = (limits.bound(stop) if stop is not None else limits.END) + 1
    columns = "id, uid, kind, source, timestamp, llm_visible, token_count, payload"
    while True:
        with store.reading() as db:
            page = db.event_page(cid, cursor, end, PAGE, columns=columns)
            payloads = [json.loads(r[7]) for r in page]
            named = _pinned_ids(db, cid, page, payloads)
            conds = {}
            if page:
                for r in db.condensation_rows(cid, page[0][0], page[-1][0] + 1):
                    conds[r[0]] = {"strategy": r[1], "reason": r[2], "summary": r[3], "summary_offset": r[4],
                                   "tokens_before": r[5], "tokens_after": r[6],
                                   "forgotten_ranges": [list(x) for x in db.ranges_of(cid, r[0])]}
        for (seq, uid, kind, source, ts, visible, tokens, _), payload in zip(page, payloads):
            hidden_by = (on_head if on_path(path, seq) else everywhere).of(seq)
            info = conds.get(seq, {"forgotten_ranges": []}) if kind == "Condensation" else None
            yield HistoryRow(seq, uid, kind, source, ts, bool(visible), hidden_by, tokens, payload, info,
                             named.get(seq))
        if len(page) < PAGE:
            return
        cursor = page[-1][0] + 1
