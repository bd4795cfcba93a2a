"""A conversation's latest view, kept in memory and extended as the agent appends."""

from __future__ import annotations

import bisect
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from .. import ranges
from ..errors import StoreClosed
from ..events import OBSERVATION_KINDS, ActionEvent, Condensation, CondensationRequest, Event, PinEvent
from ..storage import hidden
from ..storage.codec import decode
from ..view import View, query
from ..view.enforcement import enforce, warn
from ..view.history import RowFacts, TailHistory, loop_spans
from ..view.stored import Item, Loader, items_of

if TYPE_CHECKING:
    from ..storage import Recorder


@dataclass
class Boundary:
    """What a clean view's end looks like, so that new events can be folded in on their own.

    When the view had nothing dropped and the new events share no tool call id or response
    id with it, the only way a property can relate old events to new ones is a thinking tool
    loop that the history ends in and the new events continue. Then enforcing the whole list
    equals the old view plus the new events enforced together with that open loop (or alone,
    when they do not continue it). Anything else falls back to enforcing the whole list.
    """

    call_ids: set[str]
    response_ids: set[str]
    loop_start: int | None  # the id of the thinking action whose loop the history ends in
    loop_from: int | None  # that action's position in the view

    @classmethod
    def of(cls, view: View, facts: list[RowFacts]) -> "Boundary | None":
        if view.dropped:
            return None
        b = cls(set(), set(), None, None)
        b.add(items_of(view.events))
        if not b.track_loop(view, _open_loop_start(facts)):
            return None
        return b

    def add(self, events: Sequence[Item]) -> None:
        for f in events:
            if f.kind == "ActionEvent":
                self.call_ids.add(f.tool_call_id)
                self.response_ids.add(f.llm_response_id)
            elif f.kind in OBSERVATION_KINDS:
                self.call_ids.add(f.tool_call_id)

    def track_loop(self, view: View, start: int | None) -> bool:
        """Follow the open loop starting at event ``start``; False if the view lacks it."""
        if start == self.loop_start and (start is None or self.loop_from is not None):
            return True
        self.loop_start, self.loop_from = start, None
        if start is None:
            return True
        items = items_of(view.events)
        for pos in range(len(items) - 1, -1, -1):
            if items[pos].seq == start:
                self.loop_from = pos
                return True
        return False

    def admits(self, events: Sequence[Event]) -> bool:
        for e in events:
            if e.kind == "ActionEvent":
                if e.tool_call_id in self.call_ids or e.llm_response_id in self.response_ids:  # type: ignore[attr-defined]
                    return False
            elif e.kind in OBSERVATION_KINDS and e.tool_call_id in self.call_ids:  # type: ignore[attr-defined]
                return False
        return True

    def continued_by(self, facts: Sequence[RowFacts]) -> bool:
        return self.loop_start is not None and facts[0].is_tool and not facts[0].starts_loop


def _open_loop_start(facts: Sequence[RowFacts], before: int | None = None) -> int | None:
    """The first id of the thinking tool loop a history ending with ``facts`` ends in, if
    any; ``before`` is the answer for the history before them (used if all are tool events)."""
    for f in reversed(facts):
        if not f.is_tool:
            return None
        if f.starts_loop:
            return f.seq
    return before


class ViewCache:
    """A conversation's latest view, kept in memory and extended as the agent appends.

    A write by another connection (SQLite's ``data_version``) makes it read again. Our own
    appends extend the rows the view is computed from, and the view is either extended (see
    :class:`Boundary`) or recomputed from those rows; our own Condensation updates the rows in
    place (two statements: the new hidden runs and the interval edges). Either way the cached
    view equals a fresh query.
    """

    def __init__(self, recorder: "Recorder", conversation_id: str):
        self.recorder = recorder
        self.conversation_id = conversation_id
        self.loader = stored_loader(recorder, conversation_id)
        self.data: query.ViewData | None = None
        self.version: int | None = None
        self.view: View | None = None
        self.boundary: Boundary | None = None
        self.new_facts: list[RowFacts] = []  # appended since ``view`` was made
        self.new_events: list[Event] = []  # the LLM-visible ones among them
        self._known: Any = None  # a version read before anything was cached (``known_version``)
        # Whether a long view renders its rows as it reads them (``query.load``): off for a
        # reader that renders their JSON its own way (``ChatHistory``).
        self.rendered = True

    def known_version(self, version: Any) -> None:
        """The conversation's version as just read (by the lookup that made it): the first
        ``get`` takes it instead of reading it again. Read before the rows are, as ``get``
        reads it: a write in between leaves the cache one version behind, so the next
        ``get`` reads again."""
        if self.data is None:
            self._known = version

    def get(self) -> View:
        version, self._known = self._known, None
        if version is None:
            version = self.recorder.version(self.conversation_id)
        if self.data is None or version != self.version:
            with self.recorder.reading() as db:
                self.data = query.load(db, self.conversation_id, loader=self.loader, rendered=self.rendered)
            self.version = version
            self.view = None
        if self.view is not None and self.new_facts:
            self.view = self._extended(self.view)
        if self.view is None:
            self.view = View.from_data(self.data)
            self.boundary = Boundary.of(self.view, self.data.facts)
        self.new_facts, self.new_events = [], []
        return self.view

    def _extended(self, old: View) -> View | None:
        """``old`` plus the new events, if they cannot interact with it (see Boundary)."""
        b, data = self.boundary, self.data
        assert data is not None
        if b is None or not b.admits(self.new_events):
            return None
        summary = data.summary
        if summary is not None and summary.offset > len(old.events) - old.reinjected - 1:
            return None  # the summary was clamped to the end: new events move past it
        if b.continued_by(self.new_facts):
            # Enforce the open loop's events in the view together with the new ones.
            assert b.loop_start is not None and b.loop_from is not None
            first = bisect.bisect_left(data.facts, b.loop_start, key=lambda f: f.seq)
            window = old.events[b.loop_from :] + self.new_events
            tail = data.facts[first:]
            history = TailHistory(data.batch_sizes, loop_spans(tail, joins=data.joins_of(tail)))
            kept, dropped = enforce(window, history)
            if dropped:
                return None  # the loop is broken: only a full enforcement is right
            kept = self.new_events
        else:
            history = TailHistory(data.batch_sizes, loop_spans(self.new_facts))
            kept, dropped = enforce(self.new_events, history)
            warn(dropped)
        view = View(
            old.events + kept,
            data.unhandled_request,
            data.conversation_id,
            data.upto,
            data.last_condensation,
            dropped,
            hidden=old.hidden,
            path=None if data.path is None else list(data.path),
            pins=old.pins,
            reinjected=old.reinjected,
            # The nearest view whose messages were built (a view never rendered has none to
            # build on); never a chain of unrendered ones, each holding its own list.
            _base=old if old._messages is not None else old._base,
            _grown_from=weakref.ref(old),
        )
        b.add(self.new_events)
        if dropped or not b.track_loop(view, _open_loop_start(self.new_facts, before=b.loop_start)):
            self.boundary = None
        return view

    def counts_wanted(self, events: Sequence[Event]) -> list[str]:
        """The response ids whose batch sizes ``extend`` will need from SQL for these events
        (see there): an append reads them in its own transaction (``Recorder.append``),
        which saves a statement afterwards."""
        data = self.data
        if data is None or not data.hidden:
            return []
        return sorted({e.llm_response_id for e in events
                       if isinstance(e, ActionEvent) and e.llm_response_id not in data.batch_sizes})

    def extend(self, events: list[Event], version: Any = None, counts: dict[str, int] | None = None) -> None:
        """Fold our own appended events into the cached rows; ``version`` is what our write
        transaction left (see ``Session.touch``); ``counts``: the ActionEvents each response
        id in ``counts_wanted`` had before these events (absent: none), read by the write."""
        self._known = None  # (from before this write)
        data = self.data
        if data is None:
            return
        for e in events:
            assert e.seq is not None
            if e.seq != data.upto + 1:
                self.data = None  # someone else's rows came first: read again
                return
            if isinstance(e, PinEvent) or (isinstance(e, Condensation) and (data.path is not None or data.pins)):
                # Pins changed, or a condensation may hide a pinned event (which the view then
                # shows again from its row), or on a branch the runs in force are the path's:
                # read again (pins are few, and change seldom).
                self.clear()
                return
            if isinstance(e, Condensation):
                self._fold_condensation(data, e)
                continue
            data.upto = e.seq
            if data.path is not None:
                data.path[-1] = (data.path[-1][0], e.seq)
            fact = RowFacts(e.seq, e.kind, e.has_thinking, e.__dict__.get("tool_call_id"),
                            e.__dict__.get("llm_response_id"))
            data.facts.append(fact)
            self.new_facts.append(fact)
            if type(e).llm_visible:
                data.events[e.seq] = e
                self.new_events.append(e)
            if isinstance(e, ActionEvent):
                rid = e.llm_response_id
                if rid not in data.batch_sizes and data.hidden:
                    # Earlier actions of this batch may lie in forgotten ranges (a condensation
                    # landed mid-batch): count the whole batch up to this event in SQL (or
                    # take what the write counted before its rows, plus this one).
                    # (The write counted the whole history; on a branch that is the path's
                    # count too when it found none.)
                    if counts is not None and (data.path is None or not counts.get(rid)):
                        data.batch_sizes[rid] = counts.get(rid, 0) + 1
                    else:
                        with self.recorder.reading(snapshot=False) as db:
                            data.batch_sizes.update(
                                db.batch_sizes(data.conversation_id, e.seq, {rid}) if data.path is None
                                else db.batch_sizes_on(data.conversation_id, data.path, {rid})
                            )
                else:
                    data.batch_sizes[rid] = data.batch_sizes.get(rid, 0) + 1
            if isinstance(e, CondensationRequest):
                data.last_request = e.seq
        # Every row up to ours is in the cache (ids were consecutive), so the version our
        # transaction left is the one the cache now reflects.
        if self.version is not None:
            self.version = version if version is not None else self.recorder.version(self.conversation_id)

    def clear(self) -> None:
        """Forget the cached view: the next ``get`` reads it from the database again."""
        self.data = self.view = self.boundary = self._known = None
        self.new_facts, self.new_events = [], []

    def at(self, seq: int) -> View:
        """The view as it stood right after event ``seq`` (not cached)."""
        with self.recorder.reading() as db:
            return View.from_data(query.load(db, self.conversation_id, seq, self.loader, rendered=self.rendered))

    def _fold_condensation(self, data: query.ViewData, cond: Condensation) -> None:
        """Apply a Condensation we just stored to the cached rows in place: drop the rows it
        hid, move the summary, and ask SQL only for the new hidden runs and interval edges."""
        assert cond.seq is not None
        cid = data.conversation_id
        with self.recorder.reading() as db:
            runs = hidden.live(db, cid)
            starts = [s for s, _ in runs]

            def shown(seq: int) -> bool:
                k = bisect.bisect_right(starts, seq) - 1
                return k < 0 or runs[k][1] < seq

            data.facts = [f for f in data.facts if shown(f.seq)]
            data.facts.append(RowFacts(cond.seq, cond.kind, False))
            intervals = ranges.complement(runs, cond.seq)
            data.open_loop_at, data.continues_after = query.edges(db, cid, intervals, cond.seq, data.facts)
        data.events = {seq: e for seq, e in data.events.items() if shown(seq)}
        data.hidden = runs
        data.upto = data.last_condensation = cond.seq
        if cond.has_summary_metadata:
            data.summary = query.Summary(
                cond.seq, cond.id, cond.timestamp, cond.summary or "", cond.summary_offset or 0
            )
        # The whole view is enforced again (a cut changes what sits next to what).
        self.view, self.boundary = None, None
        self.new_facts, self.new_events = [], []


def stored_loader(recorder: "Recorder", conversation_id: str) -> Loader:
    """How a long view reads back the events it kept no JSON of (``view/stored.py``): by id,
    each chunk one statement (rows at or below a view's end never change)."""

    def load(seqs: list[int]) -> dict[int, Event]:
        if recorder.closed:
            raise StoreClosed(recorder.label, conversation_id)
        with recorder.reading(snapshot=False) as db:
            rows = db.event_rows(conversation_id, seqs)
        return {seq: decode(kind, payload, seq) for seq, _, kind, _, _, payload in rows}

    return load
