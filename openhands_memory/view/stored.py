"""A view's events, decoded when first read.

A view of tens of thousands of events is mostly rendered, not read event by event: decoding
every row into its pydantic model up front cost a 100k-event view 0.8 s and ~5 KB an event,
twice the memory of the messages it is sent as. So the view query keeps each stored row as a
:class:`Pending`: its facts (what enforcement and turn grouping need, from indexed columns)
and its JSON. What its message is made of (``shown``: a record, a rendered tool turn, or the
event) is made from that JSON the first time the view is rendered (``messages.shown``), not
by the query: a caller that renders the JSON its own way (``ChatHistory``) or reads a few
events never pays for it. A long view then lets the JSON go. The event itself is decoded the
first time someone reads it, from the JSON or, once a long view let it go, from the store
(rows at or below a view's end never change), and kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Union, overload

from ..events import Event
from ..storage.codec import decode
from .history import RowFacts

#: Decodes the stored events with these ids ({id: event}); what a long view reads them with.
Loader = Callable[[list[int]], dict[int, Event]]

#: How many undecoded events one read of the store decodes at once (a loop over a view reads
#: it a chunk at a time, not a statement an event).
CHUNK = 512


class Pending(RowFacts):
    """A stored event of a view, not decoded yet: its facts (what enforcement, the cache and
    turn grouping read, as they read an event's own attributes), and how to get the rest."""

    __slots__ = ("payload", "shown", "event", "long")

    def __init__(self, seq: int, kind: str, has_thinking: bool, tool_call_id: str | None,
                 llm_response_id: str | None, payload: str, long: bool):
        # (RowFacts's slots set here: a long view makes a hundred thousand of these)
        self.seq, self.kind, self.has_thinking = seq, kind, has_thinking
        self.tool_call_id, self.llm_response_id = tool_call_id, llm_response_id
        self.payload: str | None = payload  # its JSON; None once a long view rendered it
        self.shown: Any = None  # what its message is made of, once rendered (``messages.shown``)
        self.event: Event | None = None  # decoded, once read
        self.long = long  # of a long view: the JSON goes once rendered


#: A view's item: an event, or a stored one not decoded yet. Both have ``seq`` and ``kind``,
#: and ``tool_call_id`` and ``llm_response_id`` where their kind does.
Item = Union[Event, Pending]


class StoredEvents(Sequence[Event]):
    """A view's events, some of them still :class:`Pending` (decoded when read)."""

    __slots__ = ("items", "loader")

    def __init__(self, items: list[Item], loader: Loader | None = None):
        self.items = items
        self.loader = loader

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, i: int) -> Event: ...
    @overload
    def __getitem__(self, i: slice) -> list[Event]: ...
    def __getitem__(self, i):
        if isinstance(i, slice):
            part = self.items[i]
            self._decode(part)
            return [x.event if type(x) is Pending else x for x in part]
        x = self.items[i]
        if type(x) is not Pending:
            return x
        if x.event is None:
            n = len(self.items)
            at = i if i >= 0 else i + n
            self._decode(self.items[at : at + CHUNK])
        return x.event

    def __iter__(self) -> Iterator[Event]:
        for k in range(0, len(self.items), CHUNK):
            part = self.items[k : k + CHUNK]
            self._decode(part)
            for x in part:
                yield x.event if type(x) is Pending else x  # type: ignore[misc]

    def __add__(self, other: Sequence[Event]) -> "StoredEvents":
        return StoredEvents(self.items + list(items_of(other)), self.loader)

    def __radd__(self, other: Sequence[Event]) -> "StoredEvents":
        return StoredEvents(list(items_of(other)) + self.items, self.loader)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (StoredEvents, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StoredEvents({len(self.items)} events)"

    def _decode(self, part: Sequence[Item]) -> None:
        """Decode the pending events among ``part``: from their JSON, or from the store."""
        unread: dict[int, Pending] = {}
        for x in part:
            if type(x) is Pending and x.event is None:
                if x.payload is not None:
                    x.event = decode(x.kind, x.payload, x.seq)
                else:
                    unread[x.seq] = x
        if unread:
            decode_unread(unread, self.loader)


def decode_unread(unread: dict[int, Pending], loader: Loader | None) -> None:
    if loader is None:  # pragma: no cover - a view keeps the JSON of every event when it has no loader
        raise RuntimeError("a view event has neither its JSON nor a store to read it from")
    found = loader(sorted(unread))
    for seq, x in unread.items():
        event = found.get(seq)
        if event is None:
            raise LookupError(f"event {seq} of this view is no longer in the store (its conversation was deleted?)")
        x.event = event


def decode_unrendered(items: Sequence[Item], loader: Loader | None) -> None:
    """Decode, in one read of the store, the items of a long view that were neither rendered
    nor kept their JSON (a reader that made its own items of it let it go: ``ChatHistory``),
    so that the view's messages can be made from the events."""
    unread = {x.seq: x for x in items
              if type(x) is Pending and x.shown is None and x.payload is None and x.event is None}
    if unread:
        decode_unread(unread, loader)


def items_of(events: Sequence[Event]) -> Sequence[Item]:
    """The items of ``events`` without decoding any (a plain list is its own)."""
    return events.items if isinstance(events, StoredEvents) else events


def event_of(item: Item, loader: Loader | None) -> Event:
    """The event an item stands for, decoded if need be."""
    if type(item) is not Pending:
        return item  # type: ignore[return-value]
    if item.event is None:
        if item.payload is not None:
            item.event = decode(item.kind, item.payload, item.seq)
        else:
            decode_unread({item.seq: item}, loader)
    return item.event  # type: ignore[return-value]
