"""The view: what the model is shown, computed from SQL rows rather than by replaying history.

Semantics (see docs/architecture.md):
* the LLM-visible events whose id lies in no forgotten range, in id order;
* the summary of the newest condensation that has both a summary and an offset, inserted at
  that offset (clamped to the end) as a user-role ``CondensationSummaryEvent``;
* ``unhandled_condensation_request``: a CondensationRequest newer than the last Condensation;
* then the four well-formedness properties are enforced as a fallback, with a warning naming
  what was dropped.
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Sequence, overload

from . import view_query
from .events import (
    ActionEvent,
    ObservationBase,
    Condensation,
    CondensationRequest,
    CondensationSummaryEvent,
    Event,
)
from .history import ListHistory, RowFacts, TailHistory, loop_spans
from .manipulation import ManipulationIndices
from .properties import (
    History,
    batch_atomicity,
    observation_uniqueness,
    tool_call_matching,
    tool_loop_atomicity,
)

if TYPE_CHECKING:
    from .store import Conversation

log = logging.getLogger(__name__)

# Order matters: after any drop, enforcement starts again from the first property.
PROPERTIES = (observation_uniqueness, batch_atomicity, tool_call_matching, tool_loop_atomicity)


@dataclass(frozen=True)
class Dropped:
    """Events enforcement removed, and which property removed them."""

    property: str
    ids: tuple[str, ...]  # external ids
    seqs: tuple[int | None, ...]  # ids in the store


def enforce(events: Sequence[Event], history: History) -> tuple[list[Event], list[Dropped]]:
    """Apply the properties to a fixpoint. Returns the kept events and what was dropped."""
    kept = list(events)
    dropped: list[Dropped] = []
    restart = True
    while restart:
        restart = False
        for prop in PROPERTIES:
            drop = prop.enforce(kept, history)
            if drop:
                name = prop.__name__.rsplit(".", 1)[-1]
                gone = [e for e in kept if e.id in drop]
                dropped.append(Dropped(name, tuple(e.id for e in gone), tuple(e.seq for e in gone)))
                kept = [e for e in kept if e.id not in drop]
                restart = True
                break
    return kept, dropped


def manipulation_indices(events: Sequence[Event]) -> ManipulationIndices:
    full = ManipulationIndices.complete(len(events))
    return full.intersect(p.manipulation_indices(events) for p in PROPERTIES)


@dataclass
class View:
    """The events to send to the model, with what a condenser needs to know about them."""

    events: list[Event]
    unhandled_condensation_request: bool = False
    conversation_id: str | None = None
    upto: int = -1  # the last event id this view reflects
    last_condensation: int | None = None
    dropped: list[Dropped] = field(default_factory=list)
    hidden: list[tuple[int, int]] = field(default_factory=list, repr=False)
    # Store ids of events a rewrite (masking) replaced with an in-memory version.
    replaced: frozenset[int] = frozenset()
    conversation: "Conversation | None" = field(default=None, repr=False, compare=False)
    _indices: ManipulationIndices | None = field(default=None, repr=False, compare=False)
    # Messages are built once per view; a view extended from another (see ViewCache) builds
    # only its new events' messages on top of the other's.
    _messages: list[Any] | None = field(default=None, repr=False, compare=False)  # messages.Turn
    _base: "View | None" = field(default=None, repr=False, compare=False)

    # --- list-like -------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    @overload
    def __getitem__(self, i: int) -> Event: ...
    @overload
    def __getitem__(self, i: slice) -> list[Event]: ...
    def __getitem__(self, i):
        return self.events[i]

    @property
    def ids(self) -> list[int | None]:
        """Each event's id in the store; None for the summary, which is derived."""
        return [e.seq for e in self.events]

    # --- condenser support -----------------------------------------------------------

    @property
    def manipulation_indices(self) -> ManipulationIndices:
        if self._indices is None:
            self._indices = manipulation_indices(self.events)
        return self._indices

    def find_next(self, threshold: int) -> int | None:
        return self.manipulation_indices.find_next(threshold)

    @property
    def summary_event(self) -> CondensationSummaryEvent | None:
        for e in self.events:
            if isinstance(e, CondensationSummaryEvent):
                return e
        return None

    def with_events(self, events: list[Event]) -> "View":
        """A rewritten view (for masking strategies) that keeps this one's flags."""
        mine = {id(e) for e in self.events}
        replaced = {e.seq for e in events if id(e) not in mine and e.seq is not None}
        return View(
            events=events,
            unhandled_condensation_request=self.unhandled_condensation_request,
            conversation_id=self.conversation_id,
            upto=self.upto,
            last_condensation=self.last_condensation,
            hidden=self.hidden,
            replaced=self.replaced | replaced,
            conversation=self.conversation,
        )

    def to_messages(
        self,
        *,
        vision: bool = True,
        reasoning_content: bool = True,
        cache_prompt: bool = False,
        string_content: bool = False,
    ) -> list[dict[str, Any]]:
        """The provider messages for this view, as the OpenHands SDK formats them for a
        Chat Completions model (a fresh list on every call: mutate freely).

        The switches are the SDK's per-model ones, which it reads from the model; here the
        caller says what the model supports. The defaults (the SDK has none without a model)
        are what this library always sent:

        * ``vision`` (default True): images are sent; with False they are dropped;
        * ``reasoning_content`` (default True): an assistant turn's ``reasoning_content`` is
          sent (the SDK sends it only for models that need it back, e.g. kimi-k2-thinking);
        * ``cache_prompt`` (default False): the SDK's prompt-caching markers (the system
          prompt's first block, the last user or tool message);
        * ``string_content`` (default False): each message's text joined into one string,
          for providers that take no list (images are still sent as parts with ``vision``).

        Tool results are rendered per observation kind and capped at 50,000 characters, as
        the SDK does; unlike the SDK, each batch's results follow it directly (see
        docs/architecture.md).
        """
        from .messages import Options, events_to_turns, turns_to_messages

        if self._messages is None:
            base = self._base
            if base is not None and base._messages is not None:
                self._messages = events_to_turns(self.events[len(base.events):], after=base._messages)
            else:
                self._messages = events_to_turns(self.events)
            self._base = None
        options = Options(vision, reasoning_content, cache_prompt, string_content)
        return turns_to_messages(self._messages, options)

    # --- construction ----------------------------------------------------------------

    @classmethod
    def from_events(cls, events: Sequence[Event]) -> "View":
        """The view of an in-memory history (each event with its ``seq``, or given in order).

        This is the plain fold the SQL view must agree with: union of forgotten ids, newest
        summary at its offset, then enforcement.
        """
        seqd = [e if e.seq is not None else e.model_copy().with_seq(i) for i, e in enumerate(events)]
        by_uid = {e.id: e.seq for e in seqd}
        forgotten: set[int] = set()
        summary: tuple[Condensation, int] | None = None
        last_cond = last_req = None
        for e in seqd:
            if isinstance(e, Condensation):
                for s, t in e.forgotten_ranges or []:
                    forgotten.update(range(s, t + 1))
                forgotten.update(by_uid[u] for u in e.forgotten_event_ids if u in by_uid and by_uid[u] < e.seq)  # type: ignore[operator]
                if e.has_summary_metadata:
                    summary = (e, e.summary_offset)  # type: ignore[assignment]
                last_cond = e.seq
            elif isinstance(e, CondensationRequest):
                last_req = e.seq
        visible = [e for e in seqd if type(e).llm_visible and e.seq not in forgotten]
        if summary is not None:
            cond, offset = summary
            visible.insert(min(offset, len(visible)), _summary_event(cond.id, cond.timestamp, cond.summary or ""))
        kept, dropped = enforce(visible, ListHistory(seqd))
        _warn(dropped)
        unhandled = last_req is not None and (last_cond is None or last_req > last_cond)
        return cls(kept, unhandled, None, len(seqd) - 1, last_cond, dropped)

    @classmethod
    def from_data(cls, data: view_query.ViewData) -> "View":
        visible = [data.events[f.seq] for f in data.facts if f.seq in data.events]
        if data.summary is not None:
            s = data.summary
            visible.insert(min(s.offset, len(visible)), _summary_event(s.condensation_uid, s.timestamp, s.text))
        kept, dropped = enforce(visible, data.history())
        _warn(dropped)
        return cls(
            kept,
            data.unhandled_request,
            data.conversation_id,
            data.upto,
            data.last_condensation,
            dropped,
            hidden=list(data.hidden),
        )


def _summary_event(condensation_uid: str, timestamp: str, text: str) -> CondensationSummaryEvent:
    # The id follows the SDK's "<condensation id>-summary" convention.
    return CondensationSummaryEvent(
        id=f"{condensation_uid}-summary", timestamp=timestamp, summary=text, source="environment"
    )


def _warn(dropped: list[Dropped]) -> None:
    for d in dropped:
        names = ", ".join(str(s) if s is not None else u for s, u in zip(d.seqs, d.ids))
        log.warning("view: %s dropped %d event(s): %s", d.property, len(d.ids), names)


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
        b.add(view.events)
        if not b.track_loop(view, _open_loop_start(facts)):
            return None
        return b

    def add(self, events: Sequence[Event]) -> None:
        for e in events:
            if isinstance(e, ActionEvent):
                self.call_ids.add(e.tool_call_id)
                self.response_ids.add(e.llm_response_id)
            elif isinstance(e, ObservationBase):
                self.call_ids.add(e.tool_call_id)

    def track_loop(self, view: View, start: int | None) -> bool:
        """Follow the open loop starting at event ``start``; False if the view lacks it."""
        if start == self.loop_start and (start is None or self.loop_from is not None):
            return True
        self.loop_start, self.loop_from = start, None
        if start is None:
            return True
        for pos in range(len(view.events) - 1, -1, -1):
            if view.events[pos].seq == start:
                self.loop_from = pos
                return True
        return False

    def admits(self, events: Sequence[Event]) -> bool:
        for e in events:
            if isinstance(e, ActionEvent):
                if e.tool_call_id in self.call_ids or e.llm_response_id in self.response_ids:
                    return False
            elif isinstance(e, ObservationBase) and e.tool_call_id in self.call_ids:
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

    A write by another connection (SQLite's ``data_version``) or a Condensation makes it read
    again; otherwise appending extends the rows the view is computed from, and the view is
    either extended (see :class:`Boundary`) or recomputed from those rows. Either way the
    cached view equals a fresh query.
    """

    def __init__(self, conversation: "Conversation"):
        self.conversation = conversation
        self.data: view_query.ViewData | None = None
        self.version: int | None = None
        self.view: View | None = None
        self.boundary: Boundary | None = None
        self.new_facts: list[RowFacts] = []  # appended since ``view`` was made
        self.new_events: list[Event] = []  # the LLM-visible ones among them

    def get(self) -> View:
        store = self.conversation.store
        version = store.data_version()
        if self.data is None or version != self.version:
            with store.reading() as db:
                self.data = view_query.load(db, self.conversation.id)
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
        if summary is not None and summary.offset > len(old.events) - 1:
            return None  # the summary was clamped to the end: new events move past it
        if b.continued_by(self.new_facts):
            # Enforce the open loop's events in the view together with the new ones.
            assert b.loop_start is not None and b.loop_from is not None
            first = bisect.bisect_left(data.facts, b.loop_start, key=lambda f: f.seq)
            window = old.events[b.loop_from :] + self.new_events
            history = TailHistory(data.batch_sizes, loop_spans(data.facts[first:]))
            kept, dropped = enforce(window, history)
            if dropped:
                return None  # the loop is broken: only a full enforcement is right
            kept = self.new_events
        else:
            history = TailHistory(data.batch_sizes, loop_spans(self.new_facts))
            kept, dropped = enforce(self.new_events, history)
            _warn(dropped)
        view = View(
            old.events + kept,
            data.unhandled_request,
            data.conversation_id,
            data.upto,
            data.last_condensation,
            dropped,
            hidden=old.hidden,
            _base=old,
        )
        b.add(self.new_events)
        if dropped or not b.track_loop(view, _open_loop_start(self.new_facts, before=b.loop_start)):
            self.boundary = None
        return view

    def extend(self, events: list[Event]) -> None:
        """Fold our own appended events into the cached rows."""
        data = self.data
        if data is None:
            return
        for e in events:
            assert e.seq is not None
            if isinstance(e, Condensation) or e.seq != data.upto + 1:
                self.data = None  # re-read: the hidden runs and summary changed
                return
            data.upto = e.seq
            fact = RowFacts(e.seq, e.kind, e.has_thinking)  # type: ignore[attr-defined]
            data.facts.append(fact)
            self.new_facts.append(fact)
            if type(e).llm_visible:
                data.events[e.seq] = e
                self.new_events.append(e)
            if isinstance(e, ActionEvent):
                rid = e.llm_response_id
                if rid not in data.batch_sizes and data.hidden:
                    # Earlier actions of this batch may lie in forgotten ranges (a condensation
                    # landed mid-batch): count the whole batch up to this event in SQL.
                    with self.conversation.store.reading() as db:
                        data.batch_sizes.update(
                            view_query.batch_sizes(db, data.conversation_id, e.seq, {rid})
                        )
                else:
                    data.batch_sizes[rid] = data.batch_sizes.get(rid, 0) + 1
            if isinstance(e, CondensationRequest):
                data.last_request = e.seq
        # Our own commit changed data_version only if someone else wrote too; re-check then.
        self.version = self.conversation.store.data_version() if self.version is not None else None


def view_of(conversation: "Conversation", at: int | None = None) -> View:
    if at is not None:
        with conversation.store.reading() as db:
            view = View.from_data(view_query.load(db, conversation.id, at))
    else:
        if conversation._view_cache is None:
            conversation._view_cache = ViewCache(conversation)
        view = conversation._view_cache.get()
    view.conversation = conversation
    return view
