"""The one writing context: a write transaction on a conversation whose appends, condensations
and ledger rows commit together, and which the conversation's cached view learns once (and
only once) the transaction has committed.

    with conv.writing() as w:
        w.append([event])                  # -> its id
        w.condensation(cond, view=view)    # refused if another condensation landed after view

``w.db`` is the transaction's session, for statements that are no event's (the SDK file
store's files, the conversation row an import creates).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ..errors import ConcurrentCondensation, ConversationNotFound
from ..events import Condensation, Event
from ..storage import Session, condensations, tree
from ..storage.codec import check_rows, event_row
from ..strategy import CallRecord, ModelCall  # noqa: F401  (ModelCall: named here before)

if TYPE_CHECKING:
    from ..view import View
    from .tokens import TokenRows

# How a bulk load records a Condensation: the event as stored, and its id -> the event whose
# ranges are recorded (an import resolves external ids itself, without asking SQL).
Resolve = Callable[[Condensation, int], Condensation]


def record_calls(db: Session, conversation_id: str, calls: Sequence[CallRecord], condensation_id: int | None) -> None:
    """Ledger rows for model calls. ``condensation_id`` goes on the calls whose reply went
    into that condensation (``produced``, which a reply flagged ``bad_response`` can still be
    when its text was used); None elsewhere."""
    now = datetime.now(timezone.utc).isoformat()
    db.insert_llm_calls([
        (
            conversation_id, condensation_id if c.produced else None, now, c.strategy, c.purpose,
            c.call.model, c.call.prompt_tokens, c.call.completion_tokens, c.call.cost_usd,
            c.call.latency_s, c.call.outcome, c.call.error, c.call.response_id, c.call.attempts,
        )
        for c in calls
    ])


class Writer:
    """What one write transaction on a conversation stores (see the module's docstring)."""

    def __init__(self, db: Session, conversation_id: str, tokens: "TokenRows"):
        self.db = db
        self.conversation_id = conversation_id
        self._tokens = tokens
        self._next: int | None = None  # the next id, once read (this transaction holds the lock)
        self.appended: list[tuple[list[Event], int]] = []  # (events, first id): for the cache
        self.loaded = False  # rows written by ``load``, which the cache does not see
        self.version: object = None  # what the transaction leaves (Session.touch), once written
        self._head: int | None = None  # HEAD as stored, once read (see storage/tree.py)
        self.branched = False  # a row was given a parent other than the row before it, or HEAD moved
        self._moved = False  # HEAD moved by ``navigate``: other connections' caches must read again

    def append(self, events: Sequence[Event], payloads: Sequence[str] | None = None) -> list[int]:
        """Store events with the next ids (a Condensation with its bookkeeping); their ids.
        ``payloads``: each event's JSON as the caller holds it (kept byte for byte)."""
        events = list(events)
        first = self._insert(events, payloads, None)
        self.appended.append((events, first))
        return list(range(first, first + len(events)))

    def load(self, events: Sequence[Event], payloads: Sequence[str | None], resolve: Resolve,
             known: Mapping[str, int] | None = None,
             rows: Sequence[tuple[Any, ...] | None] | None = None) -> None:
        """A bulk load's batch (an import): stored as ``append`` stores them, but the events
        keep no ids and the cached view is read again after the commit instead of extended,
        so that a long history is never held in memory. ``known``: the external id of every
        row stored so far with its id, which the loader keeps (parents are found there, not in
        SQL: ``Session.defer_event_indexes``). ``rows``: for each event, its row when it was
        made already (``codec.event_row(checked=False)``, with this conversation and the id
        the event gets; the event is then only what the tree reads of it: ``io/parallel.py``),
        else None."""
        self._insert(events, payloads, resolve, known, rows)
        self.loaded = True

    def navigate(self, to: int | None) -> None:
        """Move HEAD to event ``to`` (None: empty) inside this transaction, as
        ``Conversation.navigate`` does: what the block appends afterwards starts a branch
        there, and a rewind followed by new events commits as one (or not at all)."""
        db, cid = self.db, self.conversation_id
        if not db.conversation_exists(cid):
            raise ConversationNotFound(cid)
        want = tree.normalized_head(db, cid, tree.EMPTY if to is None else to)
        db.set_head(cid, want)
        uid = None if to is None else db.uid_of(cid, to)
        state = db.base_state(cid)
        if state is not None:  # an SDK conversation resumes where HEAD now is
            db.set_base_state(cid, tree.base_state_with_head(state, uid))
        self._head = want
        self.branched = self._moved = True

    def condensation(self, cond: Condensation, *, view: "View | None" = None,
                     calls: Sequence[CallRecord] = (), payload: str | None = None) -> int:
        """Store ``cond`` with the ledger rows of the calls that made it; its id. With the
        ``view`` it was made from: refused (``ConcurrentCondensation``, nothing written) when
        another condensation landed after that view was read. ``payload`` as in ``append``."""
        if view is not None:
            cid = self.conversation_id
            path = self.db.path(cid)
            if tree.is_prefix(path) and path[0][1] == self.db.last_seq(cid):
                latest = self.db.latest_condensation(cid)
            else:  # HEAD is on a branch: the condensations on its path
                if not any(s <= view.upto <= e for s, e in path):
                    raise ConcurrentCondensation(
                        f"HEAD of conversation {cid!r} moved off the view's branch (up to event "
                        f"{view.upto}) after the view was read; nothing was written: condense again "
                        "from a fresh view"
                    )
                latest = self.db.path_ends(cid, path)[0]
            if latest != view.last_condensation:
                raise ConcurrentCondensation(
                    f"condensation {latest} landed in conversation {cid!r} after "
                    f"the view (up to event {view.upto}) was read; nothing was written: condense "
                    "again from a fresh view"
                )
        (seq,) = self.append([cond], [payload] if payload is not None else None)
        if calls:
            record_calls(self.db, self.conversation_id, calls, seq)
        return seq

    def _insert(self, events: Sequence[Event], payloads: Sequence[str | None] | None,
                resolve: Resolve | None, known: Mapping[str, int] | None = None,
                made: Sequence[tuple[Any, ...] | None] | None = None) -> int:
        db, cid = self.db, self.conversation_id
        if self._next is None:
            last = db.last_seq(cid)
            if last < 0 and not db.conversation_exists(cid):
                raise ConversationNotFound(cid)
            self._next = last + 1
            self._head = db.head(cid)
        first = self._next
        texts = payloads if payloads is not None else [None] * len(events)
        count = self._tokens.count_new
        if made is None:
            rows = [event_row(cid, first + k, e, p, tokens=count(e)) for k, (e, p) in enumerate(zip(events, texts))]
        else:  # a new conversation's load (no counter owns its counts yet), in order
            rows = [event_row(cid, first + k, e, p, tokens=count(e)) if r is None else r
                    for k, (e, p, r) in enumerate(zip(events, texts, made))]
            if rows and (rows[0][:2] != (cid, first) or rows[-1][1] != first + len(rows) - 1):
                raise RuntimeError(f"a load's rows of {cid!r} do not start at id {first}")
            check_rows(rows)
        db.insert_events(rows)
        parents = tree.store(db, cid, first, events, self._head, known)
        self._head = parents.head
        # The cached view extends only along HEAD's path: rows that start a branch, move HEAD,
        # or land while HEAD stays behind them (a non-node after a navigate) make it read again.
        self.branched = (self.branched or bool(parents.jumps) or bool(parents.detached) or parents.head_changed
                         or parents.head is not None)
        for k, e in enumerate(events):
            if isinstance(e, Condensation):
                seq = first + k
                condensations.record(db, cid, seq, resolve(e, seq) if resolve is not None else e)
        self._next = first + len(events)
        return first

    def finish(self) -> None:
        """Inside the transaction, after the caller's block: mark the write for other
        connections' view caches (see ``Session.touch``)."""
        if self.appended or self.loaded or self._moved:
            self.version = self.db.touch(self.conversation_id)
