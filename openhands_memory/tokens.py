"""Token counts: per event, cached in the event row, summed in SQL over the visible intervals.

A counter is litellm's tokenizer for a model, or a declared estimate (about four characters
a token) when no tokenizer is wanted. Counts cached in rows belong to one counter: the
conversation's metadata records which, and switching counters clears the cache.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, Sequence

from .events import ActionEvent, Event, ObservationBase
from .messages import batch_message, result_message, single_message

if TYPE_CHECKING:
    from .store import Conversation
    from .view import View

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4
ESTIMATE = "chars/4"


class TokenCounter(Protocol):
    name: str

    def count(self, messages: list[dict]) -> int: ...


def event_messages(e: Event) -> list[dict]:
    """The provider message(s) one event contributes, for counting it on its own."""
    if isinstance(e, ActionEvent):
        return [batch_message([e])]
    if isinstance(e, ObservationBase):
        return [result_message(e)]
    msg = single_message(e)
    return [msg] if msg is not None else []


@dataclass(frozen=True)
class CharEstimate:
    """A declared estimate: one token per four characters of the messages' JSON."""

    name: str = ESTIMATE

    def count(self, messages: list[dict]) -> int:
        if not messages:
            return 0
        return math.ceil(len(json.dumps(messages, ensure_ascii=False)) / CHARS_PER_TOKEN)


def count_event(counter: TokenCounter, e: Event) -> int:
    return counter.count(event_messages(e))


def count_events(counter: TokenCounter, events: Sequence[Event]) -> int:
    return sum(count_event(counter, e) for e in events)


# --- cached per row ----------------------------------------------------------------------

_COUNTER_KEY = "token_counter"


def _ensure_counter(conversation: "Conversation", counter: TokenCounter, *, write: bool) -> bool:
    """Make the cached counts belong to ``counter``, clearing them if another one made them.
    Without ``write``, nothing changes; returns whether the stored counts are ``counter``'s."""
    with conversation.store.reading() as db:
        meta = db.metadata(conversation.id)
    if meta is None or meta.get(_COUNTER_KEY) == counter.name:
        return True
    if not write:
        return False
    with conversation.store.writing(conversation.id) as db:
        meta = db.metadata(conversation.id) or {}
        previous = meta.get(_COUNTER_KEY)
        if previous == counter.name:
            return
        if previous is not None:
            # Only rows some counter filled need clearing; with no counter recorded there are
            # none, and rewriting every row of a long history would cost seconds.
            log.info("token counter changed from %s to %s: recounting", previous, counter.name)
            db.clear_token_counts(conversation.id)
        db.set_metadata(conversation.id, {**meta, _COUNTER_KEY: counter.name})
    return True


class RowTokens:
    """Token totals of a conversation's views, from counts cached in the event rows.

    A total costs one read of the visible rows' counts (one statement, whatever the history)
    and, when the newest rows are not counted yet, one write that caches their counts. A
    conversation keeps one per counter (``Conversation.tokens``). While writes are held
    (``Conversation.holding_writes``: a dry run) or the store is read-only, new counts are
    kept in memory instead, and nothing is written.
    """

    def __init__(self, conversation: "Conversation", counter: TokenCounter):
        self.conversation = conversation
        self.counter = counter
        self._owned: bool | None = None  # whether the rows' counts are this counter's
        self._summary: tuple[str, int] | None = None  # (summary event id, its count)
        self._memory: dict[int, int] = {}  # counts not written (writes held)

    @property
    def owns_rows(self) -> bool:
        """Whether the counts in the rows are this counter's (and it may write them)."""
        return bool(self._owned) and self._may_write

    def count_new(self, event: Event) -> int | None:
        """The count a new row is stored with (None for events the model never sees)."""
        return count_event(self.counter, event) if type(event).llm_visible else None

    @property
    def _may_write(self) -> bool:
        conv = self.conversation
        return not (conv.store.recorder.readonly or conv.writes_held)

    def counts(self, view: "View") -> dict[int, int]:
        """The token count of every LLM-visible row in the view's intervals, by id (counting
        and caching the rows not counted yet)."""
        from . import ranges

        if not self._owned:
            self._owned = _ensure_counter(self.conversation, self.counter, write=self._may_write)
        conv = self.conversation
        intervals = ranges.complement(view.hidden, view.upto) if view.upto >= 0 else []
        with conv.store.reading() as db:
            counts = db.token_counts(conv.id, intervals)
        if not self._owned:  # another counter's counts: not ours to use
            counts = dict.fromkeys(counts)
        if self._may_write and self._owned:
            self._memory.clear()  # counted during a dry run: now they are counted into rows
        for seq in counts.keys() & self._memory.keys():
            if counts[seq] is None:
                counts[seq] = self._memory[seq]
        missing = [seq for seq, n in counts.items() if n is None]
        if missing:
            counts.update(self._count(missing, view))
        return counts

    def _count(self, missing: list[int], view: "View") -> dict[int, int]:
        conv = self.conversation
        # Uncounted rows are almost always the newest few: look for them from the end instead
        # of indexing the whole view (``Event.seq`` is a pydantic private attribute, slow).
        wanted, in_view = set(missing), {}
        for e in reversed(view.events):
            seq = e.seq
            if seq in wanted:
                in_view[seq] = e
                if len(in_view) == len(wanted):
                    break
        found = {seq: count_event(self.counter, in_view.get(seq) or conv.get(seq)) for seq in missing}
        if self._may_write and self._owned:
            with conv.store.writing() as db:
                db.set_token_counts(conv.id, found.items())
        else:
            self._memory.update(found)
        return found

    def total(self, view: "View") -> int:
        """Tokens of everything in ``view``.

        A view as queried sums the cached row counts, plus its summary, minus what
        enforcement dropped. A rewritten view (masking) adds, event by event, the cached count
        of each stored event it kept and a fresh count of each replacement.
        """
        counts = self.counts(view)
        if view.replaced:
            return sum(self._per_event(counts, view))
        total = sum(counts.values())
        summary = view.summary_event
        if summary is not None:
            if self._summary is None or self._summary[0] != summary.id:
                self._summary = (summary.id, count_event(self.counter, summary))
            total += self._summary[1]  # a summary has no row: count it once, not every step
        dropped = [seq for d in view.dropped for seq in d.seqs if seq is not None]
        return total - sum(counts.get(seq, 0) for seq in dropped)

    def per_event(self, view: "View") -> list[int]:
        """Each view event's tokens: cached row counts, fresh counts for derived events."""
        return self._per_event(self.counts(view), view)

    def _per_event(self, counts: dict[int, int], view: "View") -> list[int]:
        return [
            counts[e.seq]
            if e.seq is not None and e.seq not in view.replaced and e.seq in counts
            else count_event(self.counter, e)
            for e in view.events
        ]
