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

import warnings
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence, overload

from ..allocation import collector_paused
from ..events import Condensation, CondensationRequest, CondensationSummaryEvent, Event
from .enforcement import Dropped, enforce, manipulation_indices, warn
from .history import ListHistory
from .manipulation import ManipulationIndices
from .query import ViewData, visible_intervals


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
    # The ids on the path from this view's leaf (upto) to the root, on a history tree; None
    # when that is every id from 0 to upto (no branch on the path).
    path: list[tuple[int, int]] | None = field(default=None, repr=False)
    # Store ids of events a rewrite (masking) replaced with an in-memory version.
    replaced: frozenset[int] = frozenset()
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
    def seqs(self) -> list[int | None]:
        """Each event's sequence number in the store; None for the summary (derived)."""
        return [e.seq for e in self.events]

    @property
    def ids(self) -> list[int | None]:
        """Deprecated: ``seqs`` (an event's ``id`` is its external uid)."""
        warnings.warn("View.ids is deprecated: use View.seqs", DeprecationWarning, stacklevel=2)
        return self.seqs

    @property
    def intervals(self) -> list[tuple[int, int]]:
        """The stored ids this view shows (before enforcement dropped any), as intervals."""
        return visible_intervals(self.path, self.hidden, self.upto)

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

    def forgotten_positions(self, cond: Condensation) -> list[int]:
        """Positions of the stored events ``cond`` forgets (by id range or external id)."""
        uids = set(cond.forgotten_event_ids)
        runs = cond.forgotten_ranges or []
        return [
            i for i, e in enumerate(self.events)
            if e.seq is not None and (e.id in uids or any(s <= e.seq <= t for s, t in runs))
        ]

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
            path=self.path,
            replaced=self.replaced | replaced,
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

        with collector_paused():
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
            visible.insert(min(offset, len(visible)), make_summary_event(cond.id, cond.timestamp, cond.summary or ""))
        kept, dropped = enforce(visible, ListHistory(seqd))
        warn(dropped)
        unhandled = last_req is not None and (last_cond is None or last_req > last_cond)
        return cls(kept, unhandled, None, len(seqd) - 1, last_cond, dropped)

    @classmethod
    def from_data(cls, data: ViewData) -> "View":
        visible = [data.events[f.seq] for f in data.facts if f.seq in data.events]
        if data.summary is not None:
            s = data.summary
            visible.insert(min(s.offset, len(visible)), make_summary_event(s.condensation_uid, s.timestamp, s.text))
        kept, dropped = enforce(visible, data.history())
        warn(dropped)
        return cls(
            kept,
            data.unhandled_request,
            data.conversation_id,
            data.upto,
            data.last_condensation,
            dropped,
            hidden=list(data.hidden),
            path=None if data.path is None else list(data.path),
        )


def make_summary_event(condensation_uid: str, timestamp: str, text: str) -> CondensationSummaryEvent:
    # The id follows the SDK's "<condensation id>-summary" convention.
    return CondensationSummaryEvent(
        id=f"{condensation_uid}-summary", timestamp=timestamp, summary=text, source="environment"
    )
