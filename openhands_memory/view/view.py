"""The view: what the model is shown, computed from SQL rows rather than by replaying history.

Semantics (see docs/architecture.md):
* the LLM-visible events whose id lies in no forgotten range, in id order;
* the summary of the newest condensation that has both a summary and an offset, inserted at
  that offset (clamped to the end) as a user-role ``CondensationSummaryEvent``;
* ``unhandled_condensation_request``: a CondensationRequest newer than the last Condensation;
* then the four well-formedness properties are enforced as a fallback, with a warning naming
  what was dropped;
* then the pinned events it does not show are shown again right after the summary
  (``pins.py``), each once.
"""

from __future__ import annotations

import warnings
import weakref
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Iterator, Sequence, overload

from ..allocation import collector_paused
from ..events import Condensation, CondensationRequest, CondensationSummaryEvent, Event, PinEvent
from . import pins as pinning
from .enforcement import Dropped, enforce, holds_all, manipulation_indices, warn
from .history import ListHistory
from .manipulation import ManipulationIndices
from .pins import NO_PINS, Pins
from .query import ViewData, visible_intervals
from .stored import Item, Loader, StoredEvents, decode_unrendered, event_of, items_of


@dataclass
class View:
    """The events to send to the model, with what a condenser needs to know about them.

    A view read from a store holds its events as ``stored.StoredEvents``: a sequence that
    decodes each event when first read (its messages need none decoded)."""

    events: Sequence[Event]
    unhandled_condensation_request: bool = False
    conversation_id: str | None = None
    upto: int = -1  # the last event id this view reflects
    last_condensation: int | None = None
    dropped: list[Dropped] = field(default_factory=list)
    hidden: list[tuple[int, int]] = field(default_factory=list, repr=False)
    # The ids on the path from this view's leaf (upto) to the root, on a history tree; None
    # when that is every id from 0 to upto (no branch on the path).
    path: list[tuple[int, int]] | None = field(default=None, repr=False)
    # Store ids of events a rewrite (masking) replaced with an in-memory version.
    replaced: frozenset[int] = frozenset()
    # The pins in force at ``upto``; how many pinned events are shown again (re-injected).
    pins: Pins = NO_PINS
    reinjected: int = 0
    _indices: ManipulationIndices | None = field(default=None, repr=False, compare=False)
    # Messages are built once per view; a view extended from another (see ViewCache) builds
    # only its new events' messages on top of the other's.
    _messages: list[Any] | None = field(default=None, repr=False, compare=False)  # messages.Turn
    # The messages of those turns for the last options asked (messages.Serialized): a step
    # serializes only its new turns, and each call hands out copies.
    _serialized: Any = field(default=None, repr=False, compare=False)
    _base: "View | None" = field(default=None, repr=False, compare=False)
    # The view this one was made by appending to (its events are this one's first, the same
    # objects): weakly, so that a run of views never rendered holds no chain of lists.
    _grown_from: "weakref.ref[View] | None" = field(default=None, repr=False, compare=False)

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
    def seqs(self) -> list[int | None]:
        """Each event's sequence number in the store; None for the summary (derived)."""
        return [x.seq for x in items_of(self.events)]

    @property
    def ids(self) -> list[int | None]:
        """Deprecated: ``seqs`` (an event's ``id`` is its external uid)."""
        warnings.warn("View.ids is deprecated: use View.seqs", DeprecationWarning, stacklevel=2)
        return self.seqs

    @property
    def intervals(self) -> list[tuple[int, int]]:
        """The stored ids this view shows (before enforcement dropped any), as intervals."""
        return visible_intervals(self.path, self.hidden, self.upto)

    def extends(self, other: "View") -> bool:
        """Whether this view was made by appending events to ``other``: ``other``'s events
        are this one's first ones, the very same objects (what a step costs can then follow
        the new events only)."""
        return self._grown_from is not None and self._grown_from() is other

    # --- condenser support -----------------------------------------------------------

    @property
    def manipulation_indices(self) -> ManipulationIndices:
        if self._indices is None:
            self._indices = manipulation_indices(self.events, self.pins)
        return self._indices

    def find_next(self, threshold: int) -> int | None:
        return self.manipulation_indices.find_next(threshold)

    @property
    def summary_event(self) -> CondensationSummaryEvent | None:
        for e in items_of(self.events):  # derived: never a stored one still to decode
            if isinstance(e, CondensationSummaryEvent):
                return e
        return None

    def forgotten_positions(self, cond: Condensation) -> list[int]:
        """Positions of the stored events ``cond`` forgets (by id range or external id)."""
        uids = set(cond.forgotten_event_ids)
        runs = cond.forgotten_ranges or []
        return [
            i for i, e in enumerate(self.events)
            if e.seq is not None and (e.id in uids or any(s <= e.seq <= t for s, t in runs))
        ]

    def with_events(self, events: list[Event], *, replaced: frozenset[int] | None = None) -> "View":
        """A rewritten view (for masking strategies) that keeps this one's flags. ``replaced``:
        the ids of the events the rewrite replaced one for one, when the caller knows them
        (else found by comparing the events)."""
        if replaced is not None:
            reinjected = self.reinjected
        else:
            mine = {id(e) for e in self.events}
            replaced = frozenset(e.seq for e in events if id(e) not in mine and e.seq is not None)
            reinjected = sum(1 for e in events if e.kind == "PinnedContextEvent")
        return View(
            events=events,
            unhandled_condensation_request=self.unhandled_condensation_request,
            conversation_id=self.conversation_id,
            upto=self.upto,
            last_condensation=self.last_condensation,
            hidden=self.hidden,
            path=self.path,
            replaced=self.replaced | replaced if self.replaced else replaced,
            pins=self.pins,
            reinjected=reinjected,
        )

    def with_pins(self, pins: Pins) -> "View":
        """This view with other pins in force (rules judged in memory, ``pins.judged``)."""
        return replace(self, pins=pins, _indices=None)

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
        from .messages import Options, Serialized, events_to_turns

        options = Options(vision, reasoning_content, cache_prompt, string_content)
        with collector_paused():
            prior = None
            if self._messages is None:
                base = self._base
                items = items_of(self.events)
                decode_unrendered(items, getattr(self.events, "loader", None))
                if base is not None and base._messages is not None:
                    self._messages = events_to_turns(items[len(base.events):], after=base._messages)
                    prior = base._serialized
                else:
                    self._messages = events_to_turns(items)
                self._base = None
            if self._serialized is None or self._serialized.options != options:
                self._serialized = Serialized.of(self._messages, options, prior)
            return self._serialized.messages()

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
        pin_events: list[tuple[int, PinEvent]] = []
        for e in seqd:
            if isinstance(e, PinEvent):
                pin_events.append((e.seq, e))  # type: ignore[arg-type]
            elif isinstance(e, Condensation):
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
            visible.insert(min(offset, len(visible)), make_summary_event(cond.id, cond.timestamp, cond.summary or ""))
        kept, dropped = enforce(visible, ListHistory(seqd))
        warn(dropped)
        pins = pinning.resolve(pinning.fold((at, e.__dict__) for at, e in pin_events), by_uid)  # type: ignore[arg-type]
        kept, again = _reinject(kept, pins, {e.seq: e for e in seqd})  # type: ignore[misc]
        unhandled = last_req is not None and (last_cond is None or last_req > last_cond)
        return cls(kept, unhandled, None, len(seqd) - 1, last_cond, dropped, pins=pins, reinjected=again)

    @classmethod
    def from_data(cls, data: ViewData) -> "View":
        # ``events`` holds the visible rows in id order, as ``facts`` does (read so, and
        # extended and filtered in place by the cache).
        visible: list[Item] = list(data.events.values())
        if data.summary is not None:
            s = data.summary
            visible.insert(min(s.offset, len(visible)), make_summary_event(s.condensation_uid, s.timestamp, s.text))
        history = data.history()
        kept: list[Item]
        if holds_all(visible, history):  # what almost every view gives: nothing to decode
            kept, dropped = visible, []
        else:
            # (decoded a chunk at a time: a long view's events are read back in few statements)
            kept, dropped = enforce(list(StoredEvents(visible, data.loader)), history)  # type: ignore[assignment]
            warn(dropped)
        again = 0
        if data.pins and (data.pinned or dropped):  # else every pinned event is in view
            kept, again = _reinject(kept, data.pins, {**data.events, **(data.pinned or {})}, data.loader)
        return cls(
            StoredEvents(kept, data.loader),
            data.unhandled_request,
            data.conversation_id,
            data.upto,
            data.last_condensation,
            dropped,
            hidden=list(data.hidden),
            path=None if data.path is None else list(data.path),
            pins=data.pins,
            reinjected=again,
        )


def _reinject(kept: list[Item], pins: Pins, events: dict[int, Item],
              loader: Loader | None = None) -> tuple[list[Item], int]:
    """``kept`` with the pinned events it lacks shown again (``pins.reinjected``)."""
    if not pins:
        return kept, 0
    shown = {x.seq for x in kept}
    lost = {p.seq: event_of(events[p.seq], loader) for p in pins if p.seq not in shown and p.seq in events}
    again = pinning.reinjected(pins, shown, lost)
    if not again:
        return kept, 0
    at = pinning.insert_at(kept)
    return kept[:at] + list(again) + kept[at:], len(again)


def make_summary_event(condensation_uid: str, timestamp: str, text: str) -> CondensationSummaryEvent:
    # The id follows the SDK's "<condensation id>-summary" convention.
    return CondensationSummaryEvent(
        id=f"{condensation_uid}-summary", timestamp=timestamp, summary=text, source="environment"
    )


def runs_at(view: View, positions: Iterable[int]) -> list[tuple[int, int]]:
    """The id runs (a Condensation's ``forgotten_ranges``) that forget the view events at
    ``positions`` (``storage.condensations.forgotten_runs`` is what a stored one forgot),
    except those no cut may forget (``manipulation_indices.kept``: pinned events with their
    tool pairs), which split the runs around them.

    Each run of adjacent positions becomes one id range from its first to its last stored
    event: any id in between is either already hidden or not shown to the model, so one
    range per run forgets exactly those events. Derived events (the summary, re-injected
    pins: no store id) are skipped: a newer summary replaces the old one, and a pin stays
    shown while it is in force.
    """
    kept = view.manipulation_indices.kept if view.pins else frozenset()
    runs: list[tuple[int, int]] = []
    group: list[int] = []

    def flush() -> None:
        seqs = [view.events[i].seq for i in group if view.events[i].seq is not None]
        if seqs:
            runs.append((min(seqs), max(seqs)))  # type: ignore[type-var]

    for p in sorted(positions):
        if p in kept:
            continue
        if group and p != group[-1] + 1:
            flush()
            group = []
        group.append(p)
    if group:
        flush()
    return runs


def carve(view: View, cond: Condensation) -> Condensation:
    """``cond`` without the events no cut may forget (keep pins, with their tool pairs): the
    last guard, for a Condensation made by any strategy (``runs_at`` already leaves them
    out). The same Condensation when it forgets none of them."""
    if not view.pins.keep:
        return cond
    kept = view.manipulation_indices.kept
    positions = view.forgotten_positions(cond)
    if not kept.intersection(positions):
        return cond
    carved = cond.model_copy(update={"forgotten_event_ids": [], "forgotten_ranges": runs_at(view, positions)})
    return carved.with_note(cond.note) if cond.note is not None else carved
