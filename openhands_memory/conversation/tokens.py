"""Token counts cached in a conversation's event rows, summed in SQL over the visible intervals.

The rows hold one counter's counts: the conversation's metadata records which, and switching
counters clears them. ``TokenRows`` is the token source a conversation hands its condensers
(``view.tokens.TokenSource``); it keeps a ``RowTokens`` per counter that asks.

When is ``event.token_count`` written? Three times, all here: a new row carries the owning
counter's count from its insert (``TokenRows.count_new``, which the writing context asks);
a total counts and writes the rows still missing one (``RowTokens.counts``); a switch of
counters clears them (``claim``).
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

from ..events import Event, PinnedContextEvent
from ..storage.codec import decode
from ..view.tokens import TokenCounter, count_event

if TYPE_CHECKING:
    from ..storage import Recorder
    from ..view import View

log = logging.getLogger(__name__)

_COUNTER_KEY = "token_counter"


class TokenRows:
    """One conversation's token counts, cached in its rows, by whichever counter asks.

    While writes are held (``holding_writes``: a dry run) or the store is read-only, new
    counts are kept in memory instead, and nothing is written.
    """

    def __init__(self, recorder: "Recorder", conversation_id: str):
        self.recorder = recorder
        self.conversation_id = conversation_id
        self.owner: str | None = None  # the counter whose counts the rows hold (as last claimed)
        self.writes_held = False
        self._by_counter: dict[str, RowTokens] = {}

    def of(self, counter: TokenCounter) -> "RowTokens":
        if counter.name not in self._by_counter:
            self._by_counter[counter.name] = RowTokens(self, counter)
        return self._by_counter[counter.name]

    # --- the TokenSource a condenser is given ----------------------------------------

    def total(self, view: "View", counter: TokenCounter) -> int:
        return self.of(counter).total(view)

    def per_event(self, view: "View", counter: TokenCounter) -> list[int]:
        return self.of(counter).per_event(view)

    # --- writes ----------------------------------------------------------------------

    @property
    def may_write(self) -> bool:
        return not (self.recorder.readonly or self.writes_held)

    @contextmanager
    def holding_writes(self) -> Iterator[None]:
        """Within the block, token counts are kept in memory, not written: a dry run writes
        nothing at all."""
        held, self.writes_held = self.writes_held, True
        try:
            yield
        finally:
            self.writes_held = held

    def count_new(self, event: Event) -> int | None:
        """The count a new row is stored with: the owning counter's (saving the write a count
        would take later), None when no counter owns the rows yet or the event is never seen."""
        if self.owner is None or not self.may_write or not type(event).llm_visible:
            return None
        return count_event(self._by_counter[self.owner].counter, event)

    def claim(self, counter: TokenCounter) -> bool:
        """Make the cached counts belong to ``counter``, clearing them if another one made
        them (only when writes are allowed); whether the stored counts are ``counter``'s."""
        cid = self.conversation_id
        with self.recorder.reading() as db:
            meta = db.metadata(cid)
        if meta is None or meta.get(_COUNTER_KEY) == counter.name:
            self.owner = counter.name
            return True
        if not self.may_write:
            return False
        with self.recorder.writing(cid) as db:
            meta = db.metadata(cid) or {}
            previous = meta.get(_COUNTER_KEY)
            if previous != counter.name:
                if previous is not None:
                    # Only rows some counter filled need clearing; with no counter recorded
                    # there are none, and rewriting every row of a long history costs seconds.
                    log.info("token counter changed from %s to %s: recounting", previous, counter.name)
                    db.clear_token_counts(cid)
                db.set_metadata(cid, {**meta, _COUNTER_KEY: counter.name})
        self.owner = counter.name
        return True


class RowTokens:
    """Token totals of a conversation's views by one counter, from counts cached in its rows.

    A total costs one read of the visible rows' counts (one statement, whatever the history)
    and, when the newest rows are not counted yet, one write that caches their counts.
    """

    def __init__(self, rows: TokenRows, counter: TokenCounter):
        self.rows = rows
        self.counter = counter
        self._summary: tuple[str, int] | None = None  # (summary event id, its count)
        self._pinned: dict[tuple[str, int], int] = {}  # re-injected pins' counts
        self._memory: dict[int, int] = {}  # counts not written (writes held)

    @property
    def _owned(self) -> bool:
        return self.rows.owner == self.counter.name

    def counts(self, view: "View") -> dict[int, int]:
        """The token count of every LLM-visible row in the view's intervals, by id (counting
        and caching the rows not counted yet)."""
        rows = self.rows
        owned = self._owned or rows.claim(self.counter)
        intervals = view.intervals
        with rows.recorder.reading() as db:
            counts = db.token_counts(rows.conversation_id, intervals)
        if not owned:  # another counter's counts: not ours to use
            counts = dict.fromkeys(counts)
        if rows.may_write and owned:
            self._memory.clear()  # counted during a dry run: now they are counted into rows
        for seq in counts.keys() & self._memory.keys():
            if counts[seq] is None:
                counts[seq] = self._memory[seq]
        missing = [seq for seq, n in counts.items() if n is None]
        if missing:
            counts.update(self._count(missing, view, owned))
        return counts

    def _count(self, missing: list[int], view: "View", owned: bool) -> dict[int, int]:
        rows = self.rows
        # Uncounted rows are almost always the newest few: look for them from the end instead
        # of indexing the whole view (``Event.seq`` is a pydantic private attribute, slow).
        wanted, in_view = set(missing), {}
        for e in reversed(view.events):
            seq = e.seq
            if seq in wanted:
                in_view[seq] = e
                if len(in_view) == len(wanted):
                    break
        found = {seq: count_event(self.counter, in_view.get(seq) or self._stored(seq)) for seq in missing}
        if rows.may_write and owned:
            with rows.recorder.writing() as db:
                db.set_token_counts(rows.conversation_id, found.items())
        else:
            self._memory.update(found)
        return found

    def _stored(self, seq: int) -> Event:
        with self.rows.recorder.reading() as db:
            row = db.event(self.rows.conversation_id, seq)
        assert row is not None, f"event {seq} is in the view's intervals"
        return decode(row[0], row[1], seq)

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
        if view.reinjected:  # pinned events shown again: no row of their own either
            total += sum(self._pinned_count(e) for e in view.events if isinstance(e, PinnedContextEvent))
        dropped = [seq for d in view.dropped for seq in d.seqs if seq is not None]
        return total - sum(counts.get(seq, 0) for seq in dropped)

    def _pinned_count(self, e: PinnedContextEvent) -> int:
        key = (e.id, len(e.text))
        if key not in self._pinned:
            self._pinned[key] = count_event(self.counter, e)
        return self._pinned[key]

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
