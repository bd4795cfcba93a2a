"""The newest items of a history that was never condensed, read from the end of its branch.

An agent loop that keeps its context short by sending a window of its newest items (the
OpenAI Agents SDK's ``SessionSettings(limit=N)``, ``get_items(limit=N)``) asks for it at every
turn. Rendering the whole view and keeping its end costs the history; this reads the branch
backwards, a window at a time, and renders the window's own view instead.

A window's view differs from the whole's only near its start: a result whose call lies
before the window (the window drops it, as the view drops a result without its call), a
batch of calls the window's start cuts, an item whose strings are held by an event before
the window (rendered as other events are, not as the item). So the newest ``limit`` items
(``units.tail``: a call never split from its result) are taken from the window once they
start after every such event; else the window doubles. A branch with a condensation or a pin
on it is left to the whole view (None), as is one read to its root (the whole view is then
as cheap, and says what its enforcement dropped).
"""

from __future__ import annotations

import bisect
from itertools import islice
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from .. import ranges
from ..events import EVENT_CLASSES, OBSERVATION_KINDS, Event
from ..storage.codec import decode
from ..view import View
from ..view.enforcement import Dropped, enforce
from ..view.history import ListHistory
from .units import Item, tail

if TYPE_CHECKING:
    from ..storage import Session

#: The kinds of event a view shows.
VISIBLE = frozenset(name for name, cls in EVENT_CLASSES.items() if cls.llm_visible)
#: Where a window's first event may stand for more than it shows.
RESULT_KINDS = frozenset(OBSERVATION_KINDS)

#: A view position's rendering: (index of its first item in the rendered list, whether it
#: was rendered as an event written by other means rather than from its items).
Trace = list[tuple[int, bool]]
#: Renders a view as items, filling ``trace`` (``ChatHistory._render``).
Render = Callable[[View, Trace], list[Item]]


def newest(db: "Session", cid: str, limit: int, render: Render, window: int | None = None) -> list[Item] | None:
    """``tail(the view's items, limit)`` of conversation ``cid`` read through ``db``, from
    windows of its branch's end (the first of ``window`` events, by default twice ``limit``
    and some); None when the whole view must be rendered (see the module)."""
    path = db.path(cid)
    if not path:
        return []
    last_cond, _ = db.path_ends(cid, path)
    if last_cond is not None or any(ranges.covers(path, seq) for seq, _ in db.pin_events(cid, path[-1][1])):
        return None
    rows = (row for row in backwards(db, cid, path) if row[1] in VISIBLE)
    events: list[Event] = []  # the window, oldest first
    want = max(1, window) if window is not None else 2 * limit + 16
    while True:
        older = [decode(kind, payload, seq) for seq, kind, payload in islice(rows, want - len(events))]
        if len(events) + len(older) < want:
            return None  # the root is reached: the whole view is the window
        events = older[::-1] + events
        got = _from_window(events, limit, render)
        if got is not None:
            return got
        want *= 2


def _from_window(events: list[Event], limit: int, render: Render) -> list[Item] | None:
    """The newest ``limit`` items of the window ``events``' view, if they start after every
    event the window may show otherwise than the whole view does; else None."""
    kept, dropped = enforce(events, ListHistory(events))
    view = View(kept, False, None, events[-1].seq, None, dropped)  # type: ignore[arg-type]
    trace: Trace = []
    items = render(view, trace)
    newest_items = tail(items, limit)
    first = len(items) - len(newest_items)
    if first == 0:
        return None  # the whole window, and maybe more before it
    starts = [start for start, _ in trace]
    at = bisect.bisect_right(starts, first) - 1
    while at > 0 and starts[at - 1] == starts[at]:  # (positions that rendered nothing)
        at -= 1
    return newest_items if kept[at].seq > _unsure_upto(events, kept, dropped, trace) else None  # type: ignore[operator]


def _unsure_upto(events: Sequence[Event], kept: Sequence[Event], dropped: Sequence[Dropped], trace: Trace) -> int:
    """The newest id of an event the window may show otherwise than the whole view does
    (-1: none)."""
    unsure = -1
    cut: set[str] = set()  # the calls of a batch the window's start may cut (its message held before)
    for e in events:
        if e.kind != "ActionEvent":
            break
        unsure = e.seq  # type: ignore[assignment]
        cut.add(e.tool_call_id)  # type: ignore[attr-defined]
    whole = {e.tool_call_id for e in events if e.kind == "ActionEvent"} - cut  # type: ignore[attr-defined]
    answered = {e.tool_call_id for e in events if e.kind in RESULT_KINDS}  # type: ignore[attr-defined]
    for e in events:  # results whose call is before the window, or in the batch it cuts
        if e.kind in RESULT_KINDS and e.tool_call_id not in whole:  # type: ignore[attr-defined]
            unsure = max(unsure, e.seq)  # type: ignore[type-var]
    # What the window's enforcement dropped, but for a call with no result after it (every
    # event after it is in the window: the whole view drops it too).
    by_seq = {e.seq: e for e in events}
    for group in dropped:
        for seq in group.seqs:
            e = by_seq[seq]
            if not (e.kind == "ActionEvent" and e.tool_call_id not in answered):  # type: ignore[attr-defined]
                unsure = max(unsure, seq)  # type: ignore[type-var]
    for e, (_, foreign) in zip(kept, trace):  # items whose strings an event before holds
        if foreign:
            unsure = max(unsure, e.seq)  # type: ignore[type-var]
    return unsure


def backwards(db: "Session", cid: str, path: list[ranges.Run] | None = None,
              page: int = 64) -> Iterator[tuple[int, str, str]]:
    """(id, kind, JSON) of the rows on ``path`` (None: from HEAD to the root), newest first, a
    page at a time."""
    for s, e in reversed(db.path(cid) if path is None else path):
        hi = e
        while hi >= s:
            lo = max(s, hi - page + 1)
            yield from reversed(db.event_page(cid, lo, hi + 1, hi - lo + 1))
            hi = lo - 1
