"""One conversation: its events, its cached view, its token counts, and condensing it.

A conversation belongs to a store (``store.EventStore``, which makes conversations); what it
asks of that store is the ``Store`` protocol below, so that this module never imports it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Protocol, Sequence

from .. import limits
from ..allocation import collector_paused
from ..errors import ConcurrentCondensation, ConversationNotFound, DuplicateEventId, EventNotFound, MalformedEvent, \
    NoCondensationAvailable
from ..events import Condensation, CondensationRequest, Event, PinMode
from ..storage import END, IntegrityViolation, Recorder, Session, tree
from ..storage.recorder import FOLLOWS_HEAD
from ..storage.codec import decode, event_row
from ..storage.search import SearchFilters
from ..view import View, query
from ..view.pins import Pin, PinRule, judged, rule_pins
from ..view.tokens import TokenCounter
from ..view.view import carve
from . import pinning, recall
from .recall import Hit, Recalled, Scope
from .cache import ViewCache
from .pinning import PinRequest
from .condensing import CondenseOutcome, ModelCalls, Strategy
from .tokens import TokenRows
from .writing import Writer, record_calls

if TYPE_CHECKING:
    from ..replay.report import Prices, Replay
    from ..replay.run import ModelUse, ScratchStore


class Store(Protocol):
    """What a conversation asks of the store it belongs to (``EventStore`` is one): its
    recorder, its transactions, a fork, and a throwaway store for a replay to run in."""

    recorder: Recorder

    def writing(self, conversation_id: str | None = None, *, large: bool = False,
                timeout: float | None = None) -> AbstractContextManager[Session]: ...

    def reading(self, *, snapshot: bool = True) -> AbstractContextManager[Session]: ...

    def fork(self, source: str, at: int | None = None, conversation_id: str | None = None) -> Conversation: ...

    def scratch(self) -> AbstractContextManager[ScratchStore]: ...


class Conversation:
    """One conversation's events. Sequence numbers (``Event.seq``) are 0, 1, 2, ... assigned
    inside the write transaction.

    A conversation keeps its latest view (``views``), which its own writes extend, and its
    token counts cached in rows (``tokens``), which it hands its condensers.
    """

    def __init__(self, store: Store, id: str):
        self.store = store
        self.id = id
        self.views = ViewCache(store.recorder, id)
        self.tokens = TokenRows(store.recorder, id)
        # Pin rules judge each event once: the rules last applied, and the view's end then.
        self._ruled_rules: tuple[PinRule, ...] = ()
        self._ruled_upto = -1

    def __repr__(self) -> str:
        return f"Conversation({self.id!r})"

    # --- writing ---------------------------------------------------------------------

    @contextmanager
    def writing(self, within: Session | None = None, *, timeout: float | None = None) -> Iterator[Writer]:
        """One write transaction on this conversation (it holds the conversation's id lock):
        what the block appends commits together, and the cached view learns it once committed.

        ``within``: write inside the caller's transaction instead (which must hold that lock or
        the whole file's); the cached view is then read again next time, since this
        conversation cannot know when that transaction commits.
        ``timeout``: wait at most this many seconds for the lock while another connection
        holds it, then raise ``LockTimeout`` having written nothing (None: as long as the
        connection's own settings say: SQLite's busy timeout, PostgreSQL's lock_timeout).
        """
        if within is not None:
            writer = Writer(within, self.id, self.tokens)
            yield writer
            writer.finish()
            self.views.clear()
            return
        with self.store.writing(self.id, timeout=timeout) as db:
            writer = Writer(db, self.id, self.tokens)
            yield writer
            writer.finish()
        self._committed(writer)

    def _committed(self, writer: Writer) -> None:
        """Give the events a committed transaction stored their ids, and fold them into the
        cached view (a bulk load makes it read again)."""
        if writer.loaded or writer.branched:
            self.views.clear()
            return
        events: list[Event] = []
        for batch, first in writer.appended:
            for k, e in enumerate(batch):
                e.with_seq(first + k)
            events += batch
        if events:
            self.views.extend(events, writer.version)

    def append(self, event: Event) -> int:
        """Store one event; returns its sequence number."""
        return self.append_many([event])[0]

    def append_many(self, events: Sequence[Event]) -> list[int]:
        """Store events in one transaction; returns their sequence numbers. All are stored,
        or none."""
        events = list(events)
        for e in events:
            if not isinstance(e, Event):
                raise MalformedEvent(f"expected an Event, got {type(e).__name__}")
        if not events:
            return []
        try:
            if any(isinstance(e, Condensation) for e in events) or not _chained(events):
                with self.writing() as w:
                    return w.append(events)
            return self._append_rows(events)
        except IntegrityViolation:
            # Explained after the rollback: PostgreSQL refuses further statements in a
            # transaction that failed.
            with self.store.reading() as db:
                self._explain_integrity_error(db, events)
            raise

    def _append_rows(self, events: list[Event]) -> list[int]:
        """Events without a Condensation among them (nothing to record beside their rows): the
        recorder's one-statement append (one round trip on PostgreSQL), rows made before it
        begins, the ids given inside; then the cached view learns them, as after ``writing``."""
        count = self.tokens.count_new
        rows = [event_row(self.id, -1, e, tokens=count(e)) for e in events]
        got = self.store.recorder.append(self.id, rows, self.views.counts_wanted(events), events[0].parent_id)
        if got is None:
            raise ConversationNotFound(self.id)
        if got is FOLLOWS_HEAD:  # a branch: the writing context gives parents
            with self.writing() as w:
                return w.append(events)
        first, version, counts = got  # type: ignore[misc]
        for k, e in enumerate(events):
            e.with_seq(first + k)
        self.views.extend(events, version, counts)
        return list(range(first, first + len(events)))

    def _explain_integrity_error(self, db: Session, events: list[Event]) -> None:
        """Raise the error a refused insert means, judged on what is committed."""
        if not db.conversation_exists(self.id):
            raise ConversationNotFound(self.id) from None
        dup = duplicate_uid(db, self.id, events)
        if dup is not None:
            raise DuplicateEventId(self.id, dup) from None

    def request_condensation(self) -> int:
        """Append a CondensationRequest: the next step must condense (as a context-window
        error does)."""
        return self.append(CondensationRequest())

    # --- reading ---------------------------------------------------------------------

    def __len__(self) -> int:
        with self.store.reading() as db:
            return db.last_seq(self.id) + 1

    def get(self, seq: int) -> Event:
        """The event with sequence number ``seq`` (``Event.seq``; its ``id`` is the uid)."""
        seq = limits.event_id(seq, self.id)
        with self.store.reading() as db:
            row = db.event(self.id, seq)
        if row is None:
            raise EventNotFound(self.id, seq)
        return decode(row[0], row[1], seq)

    def __getitem__(self, seq: int) -> Event:
        return self.get(seq)

    def events(
        self,
        start: int = 0,
        stop: int | None = None,
        *,
        kinds: Iterable[str] | None = None,
        page: int = 512,
    ) -> Iterator[Event]:
        """Events with sequence numbers in ``[start, stop)``, oldest first, read a page at a
        time.

        Each page is its own short read, so iterating a long history never holds a snapshot
        open while the caller works.
        """
        kind_list = sorted(set(kinds)) if kinds is not None else None
        cursor = limits.bound(start)
        end = limits.bound(stop) if stop is not None else END
        page = limits.count(page, "page", 1)
        while True:
            with self.store.reading() as db:
                batch = db.event_page(self.id, cursor, end, page, kind_list)
            for seq, kind, payload in batch:
                yield decode(kind, payload, seq)
            if len(batch) < page:
                return
            cursor = batch[-1][0] + 1

    def __iter__(self) -> Iterator[Event]:
        return self.events()

    def view(self, at: int | None = None, *, head: int | None = None) -> View:
        """What the agent sees now (the path from HEAD to the root), or saw right after event
        ``at`` (the path from ``at``). ``head``: the view HEAD at that event would give, which
        is the same thing, for a branch other than HEAD's."""
        if head is not None:
            if at is not None and at != head:
                raise ValueError("give at= or head=, not both")
            at = head
        at = None if at is None else limits.event_id(at, self.id)
        with collector_paused():  # a long view decodes many events that all live on
            return self.views.get() if at is None else self.views.at(at)

    # --- the history tree (storage/tree.py) -------------------------------------------

    @property
    def head(self) -> int | None:
        """HEAD: the event the next one follows (None when it is empty or there are none)."""
        with self.store.reading() as db:
            if not db.conversation_exists(self.id):
                raise ConversationNotFound(self.id)
            return tree.leaf(db, self.id)

    def navigate(self, to: int | None) -> None:
        """Move HEAD to event ``to`` (None: empty, so that the next event starts a new root),
        as the OpenHands SDK's ``navigate_to`` does. Nothing is deleted: the events after it
        stay stored on their branch, and the next append starts a new branch here. For a
        conversation the SDK persisted, its ``base_state.json`` says the same."""
        if to is not None:
            limits.event_id(to, self.id)
        with self.writing() as w:
            w.navigate(to)
        self.views.clear()

    def branches(self) -> list[tree.Branch]:
        """Every leaf of the history tree with its path (one per branch), oldest first."""
        with self.store.reading() as db:
            if not db.conversation_exists(self.id):
                raise ConversationNotFound(self.id)
            return tree.branches(db, self.id)

    def fork(self, at: int | None = None, conversation_id: str | None = None) -> "Conversation":
        """A new conversation holding the path from ``at`` (None: HEAD) to the root, as the
        SDK's ``fork(from_event_id=...)`` makes one: the same events (same external ids),
        condensations and forgotten ranges, numbered 0, 1, 2, ... along the path. It costs a
        copy of the path's rows, done by the database in one transaction."""
        return self.store.fork(self.id, at, conversation_id)

    # --- pins (view/pins.py) -------------------------------------------------------------

    def pin(
        self, seq: int, mode: PinMode = "keep", label: str | None = None, group: str | None = None,
        *, budget: int | None = None, counter: TokenCounter | None = None,
    ) -> int:
        """Pin event ``seq``: ``keep`` (no condensation forgets it) or ``reinject`` (after a
        condensation forgets it, the view shows it again right after the summary). A newer
        pin in the same ``group`` replaces the older one. ``budget``: the most tokens (by
        ``counter``, default chars/4) all pinned events may take, else ``PinBudgetExceeded``
        naming them. The pin is an event: returns its id."""
        return self.pin_many([PinRequest(seq, mode, label, group)], budget=budget, counter=counter)[0]

    def pin_many(self, requests: Sequence[PinRequest], *, budget: int | None = None,
                 counter: TokenCounter | None = None) -> list[int]:
        """Several pins in one transaction (all are made, or none)."""
        for r in requests:
            limits.event_id(r.seq, self.id)
        budget = None if budget is None else limits.count(budget, "budget", 0)
        if not requests:
            return []
        with self.writing() as w:
            return w.append(pinning.pin_events(w.db, self.id, requests, budget=budget, counter=counter))

    def unpin(self, seq: int) -> int:
        """Unpin event ``seq`` (an event too: ``view(at=...)`` before it still shows the pin)."""
        seq = limits.event_id(seq, self.id)
        with self.writing() as w:
            return w.append([pinning.unpin_event(w.db, self.id, seq)])[0]

    def pins(self, at: int | None = None) -> list[Pin]:
        """The pins in force at HEAD (or right after event ``at``), oldest pinned event first."""
        at = None if at is None else limits.event_id(at, self.id)
        with self.store.reading() as db:
            if not db.conversation_exists(self.id):
                raise ConversationNotFound(self.id)
            return list(query.pins_at(db, self.id, at))

    def _holds_sdk_log(self) -> bool:
        """Whether an OpenHands SDK agent persists this conversation (DatabaseFileStore): its
        event log can hold no pin rows, which the SDK could not load."""
        with self.store.reading() as db:
            return db.base_state(self.id) is not None

    def apply_pin_rules(self, rules: Sequence[PinRule], *, budget: int | None = None,
                        counter: TokenCounter | None = None) -> list[int]:
        """Pin what ``rules`` ask for among the view's events not judged yet (a condenser's
        ``[[condenser.pins]]``: ``condense`` applies them itself). Returns the pin events' ids."""
        if not rules:
            return []
        rules = tuple(rules)
        view = self.view()
        since = self._ruled_upto if self._ruled_rules == rules else -1
        made = rule_pins(rules, view.events, view.pins, since)
        requests = [PinRequest(_seq_of(view, p.event_id), p.mode, p.label, p.group, p.rule) for p in made]  # type: ignore[arg-type]
        seqs = self.pin_many(requests, budget=budget, counter=counter)
        # Judged only once pinned: a refused pin (the budget) is judged again next time.
        self._ruled_rules, self._ruled_upto = rules, view.upto
        return seqs

    # --- recall (recall.py) ----------------------------------------------------------------

    def search(
        self, query: str, limit: int = 10, scope: Scope = "forgotten", *, kinds: Sequence[str] | None = None,
        tools: Sequence[str] | None = None, before: str | None = None, after: str | None = None,
    ) -> list[Hit]:
        """Events of the current branch matching ``query`` (words, a "quoted phrase", or a
        fragment of an identifier or path), best first: by default only those a
        condensation hid from the model (``scope="visible"``: those it sees; ``"all"``).
        ``kinds``/``tools``: only these event kinds / tool names; ``before``/``after``: ISO
        timestamps. Each hit has the event's id, kind, tool, time, a snippet with the match,
        the condensation that hid it, and its score."""
        filters = SearchFilters(tuple(kinds or ()), tuple(tools or ()), before, after)
        view = self.view()
        with self.store.reading() as db:
            return recall.search(db, self.id, view, query, limit=limit, scope=scope, filters=filters,
                                 label=self.store.recorder.label)

    def read(self, seq: int, window: int = 2, max_chars: int = 4000) -> Recalled:
        """Event ``seq`` as text (cut to ``max_chars``), the id of its tool call or result, and
        the ids of ``window`` neighbours each side on the branch, to scroll with."""
        seq = limits.event_id(seq, self.id)
        window, max_chars = limits.count(window, "window", 0), limits.count(max_chars, "max_chars", 1)
        view = self.view()
        with self.store.reading() as db:
            return recall.read(db, self.id, view, seq, window=window, max_chars=max_chars)

    # --- replay (replay/) ------------------------------------------------------------------

    def replay(
        self, strategies: Sequence[tuple[str, Strategy]], *, scratch: "ScratchStore | None" = None,
        counter: TokenCounter | None = None, prices: "Prices | None" = None,
        progress: Callable[[int], None] | None = None, model_use: "Callable[[], ModelUse] | None" = None,
    ) -> "Replay":
        """This conversation's recorded history (HEAD's branch) replayed under each of
        ``strategies`` (label, condenser): at every recorded model call, what each would have
        sent (tokens, the part a prompt cache keeps), forgotten and cost, beside what the
        recorded run sent. Nothing here is written: the strategies run in ``scratch`` (by
        default a throwaway database). ``counter``: chars/4 unless given; ``prices``: per
        token, for the costs; ``progress(n)``: n more calls replayed; ``model_use()``: what
        a model summarizing for the strategies has been asked so far (``llm.ReplyCache``)."""
        from ..replay.run import Candidate, History, replay_history
        from ..view.tokens import CharEstimate

        history = History.read(self)
        candidates = [Candidate(label, strategy) for label, strategy in strategies]
        if scratch is None:
            with self.store.scratch() as scratch:
                return replay_history(history, candidates, scratch, counter or CharEstimate(),
                                      prices=prices, progress=progress, model_use=model_use)
        return replay_history(history, candidates, scratch, counter or CharEstimate(), prices=prices,
                              progress=progress, model_use=model_use)

    @property
    def metadata(self) -> dict[str, Any]:
        with self.store.reading() as db:
            meta = db.metadata(self.id)
        if meta is None:
            raise ConversationNotFound(self.id)
        return meta

    # --- condensing ------------------------------------------------------------------

    def condense(self, condenser: Strategy, *, dry_run: bool = False, preview: bool = False) -> CondenseOutcome:
        """Run ``condenser`` on the current view, with this conversation's token counts; a
        Condensation is stored unless ``dry_run`` (which writes nothing at all). ``preview``
        (with ``dry_run``): call no model; a strategy that asks one puts a placeholder where
        its summary would be, or says that only the model could decide (``needs_model``).

        Every model call lands in the ledger, even when nothing else is written: failed calls,
        and calls whose reply went into no stored condensation, with no condensation id. When
        the model failed or a dry run would need it, the outcome says so (``failure``,
        ``needs_model``) instead of raising; any other refusal is raised.
        """
        if preview and not dry_run:
            raise ValueError("preview goes with dry_run: a placeholder summary is never stored")
        rules = condenser.pin_rules
        in_memory = bool(rules) and (dry_run or self._holds_sdk_log())
        if rules and not in_memory:
            self.apply_pin_rules(rules, budget=condenser.pin_limit())
        view = self.view()
        if in_memory:  # judged on this view only: a dry run writes nothing, an SDK log holds no pins
            view = view.with_pins(judged(rules, view.events, view.pins))
        calls = ModelCalls(preview=preview)
        result: View | Condensation | None = None
        error: NoCondensationAvailable | None = None
        try:
            if dry_run:
                with self.tokens.holding_writes():
                    result = condenser.condense(view, self.tokens, calls)
            else:
                result = condenser.condense(view, self.tokens, calls)
            if isinstance(result, Condensation):
                result = carve(view, result)  # no strategy forgets a keep pin
        except NoCondensationAvailable as e:
            if calls.failure is None and not calls.needs_model:
                raise
            error = e
        finally:
            stored = isinstance(result, Condensation) and not dry_run
            loose = [c for c in calls.calls if not (stored and c.produced)]
            if loose and not dry_run:
                with self.store.writing() as db:  # ledger rows only: no event, no id lock
                    record_calls(db, self.id, loose, None)
        seq = None
        if isinstance(result, Condensation) and not dry_run:
            produced = [c for c in calls.calls if c.produced]
            try:
                with self.writing() as w:
                    seq = w.condensation(result, view=view, calls=produced)
            except ConcurrentCondensation:
                if produced:  # the calls were made all the same: the ledger keeps them
                    with self.store.writing() as db:
                        record_calls(db, self.id, produced, None)
                raise
        return CondenseOutcome(view, result, dry_run, calls.failure, calls.needs_model, seq, error)

    def step(self, condenser: Strategy) -> View:
        """The agent-loop helper: condense if needed, store it, and return the view to send
        to the model (a model failure with nothing to fall back on is raised).

        Agents may share a conversation: when another's condensation lands between the view
        this step read and its own (``ConcurrentCondensation``: nothing of this one was
        written), the step reads the view again and decides again, which usually finds
        nothing left to condense. After ``STEP_TRIES`` refusals in a row it raises the last
        one. ``condense`` itself raises at the first: its caller asked for that condensation."""
        for tries_left in reversed(range(STEP_TRIES)):
            try:
                done = self.condense(condenser)
                break
            except ConcurrentCondensation:
                if not tries_left:
                    raise
        if done.error is not None:
            raise done.error
        if done.condensation is not None:
            return self.view()
        assert done.result is not None
        return done.result  # type: ignore[return-value]


#: How many times ``Conversation.step`` condenses, each from a fresh view, while other
#: writers' condensations keep landing under it. Each refusal means another agent's
#: condensation did land (the fleet progressed), and the next view is usually below the
#: strategy's threshold, so one retry is almost always enough. But agents sharing a
#: conversation with a small ``max_size`` on busy cores can outgrow it again while one
#: decides, and a step refused twice is refused again more often than a first try is (the
#: load test's four agents a conversation at ``max_size=30`` were refused four times in a
#: row now and then). A retry costs a view and, where the fresh view still needs it, the
#: strategy's decision (a model call for a model's strategy: one the fleet needs anyway).
#: Ten keeps a step from looping on a conflict that keeps coming back.
STEP_TRIES = 10


def _seq_of(view: View, uid: str) -> int | None:
    return next(e.seq for e in view.events if e.id == uid)


def _chained(events: Sequence[Event]) -> bool:
    """Whether each event after the first has the one before it as parent (named, or by
    default): then the rows need no parent of their own unless the first one does, which the
    recorder's one-statement append checks (``Recorder.append``'s ``parent``)."""
    if events[0].parent_id == tree.ROOT_PARENT_ID:
        return False
    return all(e.parent_id is None or e.parent_id == prev.id for prev, e in zip(events, events[1:]))


def duplicate_uid(db: Session, cid: str, events: Iterable[Event], before: int | None = None) -> str | None:
    """The first external id in ``events`` that repeats within them or is already stored
    (``before``: only events with smaller ids count as stored)."""
    seen: set[str] = set()
    uids = []
    for e in events:
        if e.id in seen:
            return e.id
        seen.add(e.id)
        uids.append(e.id)
    found = db.seqs_of(cid, END if before is None else before, uids)
    return found[0][1] if found else None
