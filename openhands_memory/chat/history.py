"""A chat-messages history for any agent loop, over a conversation of events.

    h = ChatHistory("agent.db", "run-1", condenser="llm_summarizing", max_tokens=60_000)
    h.append({"role": "user", "content": "Fix the failing date test"})   # or h.extend([...])
    messages = h.messages()     # what to send now: condensed, tool calls never split

Each message or Responses item is stored as events (``items.py``), so that the view, the
condensers, search and the recall tools, pins, replay, branches and the command line work on
it as on any conversation; ``messages()`` renders the view back into the items as they were
given, with the summary and re-injected pins where the view has them.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, Union

import msgspec

from .. import config
from ..allocation import collector_paused
from ..conversation import CondenseOutcome, Conversation, EventStore
from ..errors import ConfigError, ConversationExists, MalformedEvent
from ..events import (
    Condensation,
    CondensationNote,
    CondensationRequest,
    Event,
    ObservationBase,
    event_from_dict,
)
from ..storage import Session, tree
from ..strategy import Strategy
from ..view import View
from ..view.messages import Options, events_to_messages, result_turn, serialize, single_turn
from ..view.observations import Text
from ..view.stored import Pending, items_of
from .items import CHAT, OUTPUT_TYPES, Item, Parts, as_item, kind_of, made, parts, rebuild, to_events
from .newest import Trace, backwards, newest
from .units import tail

#: The kinds of event a ChatHistory writes (the others on a path are condensations, pins,
#: requests, or events appended by other means).
CHAT_KINDS = frozenset({"SystemPromptEvent", "MessageEvent", "ActionEvent", "ObservationEvent"})
#: The rows a ``pop`` carries onto the branch it makes, when they come after the popped item.
CARRIED_KINDS = frozenset({"Condensation", "PinEvent", "CondensationRequest"})
#: Items rendered and kept in memory beyond what the view shows (appended, not yet sent).
CACHE_LIMIT = 20_000
#: Derived messages (a summary, a pinned event shown again) as plain text: valid both as a
#: chat message and as a Responses input item.
AS_TEXT = Options(string_content=True)


@dataclass(frozen=True)
class Entry:
    """One item on the current branch, with the id of the event that holds it (what
    ``navigate``, ``fork``, ``pin`` and the command line take)."""

    seq: int
    item: Item


def strategy_of(condenser: Any, max_tokens: int | None) -> Strategy | None:
    """The strategy ``condenser`` names: None, a condenser type (``"llm_summarizing"``), a
    ``[condenser]`` section as a mapping, or a strategy object. ``max_tokens`` joins a type's
    or a section's settings."""
    if condenser is None:
        if max_tokens is not None:
            raise ConfigError("max_tokens goes with a condenser: name one (condenser=\"llm_summarizing\")")
        return None
    if isinstance(condenser, str):
        condenser = {"type": condenser}
    if isinstance(condenser, Mapping):
        section = dict(condenser)
        if max_tokens is not None:
            if "max_tokens" in section:
                raise ConfigError("max_tokens is given twice: as an argument and in the condenser's settings")
            section["max_tokens"] = max_tokens
        return config.condenser_from_section(section, {}, "condenser")
    if callable(getattr(condenser, "condense", None)):
        if max_tokens is not None:
            raise ConfigError("max_tokens goes in the condenser object's own settings, not beside it")
        return condenser  # type: ignore[no-any-return]
    raise ConfigError(f"condenser must be a condenser type, a settings mapping or a condenser, "
                      f"not {type(condenser).__name__}")


class ChatHistory:
    """Chat-completions messages and Responses API items, kept as one conversation's events.

    ``location``: an SQLite file, a ``postgresql://`` URL, or an open ``EventStore`` (which
    this history then does not close). The conversation is made on first use unless
    ``create=False``. ``condenser``: see ``strategy_of``; with one, ``messages()`` condenses
    when the strategy says so before rendering.
    """

    def __init__(self, location: str | Path | EventStore, conversation_id: str, condenser: Any = None, *,
                 max_tokens: int | None = None, create: bool = True):
        self.condenser = strategy_of(condenser, max_tokens)
        self._owns_store = not isinstance(location, EventStore)
        self.store = EventStore(location) if self._owns_store else location  # type: ignore[arg-type]
        try:
            self.conversation = _open(self.store, conversation_id, create)
        except BaseException:
            self.close()
            raise
        # Items are rendered from their events' JSON (``_render``), not from the view's own
        # rendering: a long view keeps the JSON for it rather than render every row.
        self.conversation.views.rendered = False
        # Items by the id of the event holding them, as skeletons and their strings (events
        # never change): what the view shows and what was appended since, so that a step
        # reads and parses only new events.
        self._cache: dict[int, list[Parts]] = {}
        # Calls appended here and not answered yet: id -> (tool name, action's uid).
        self._calls: dict[str, tuple[str, str]] = {}

    def __repr__(self) -> str:
        return f"ChatHistory({self.store.location.label!r}, {self.conversation.id!r})"

    def close(self) -> None:
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> "ChatHistory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writing -----------------------------------------------------------------------

    def append(self, item: Any) -> int:
        """Store one message or item; the id of the event that holds it."""
        return self.extend([item])[0]

    def extend(self, items: Iterable[Any]) -> list[int]:
        """Store messages or items in one transaction (all, or none); for each, the id of
        the event that holds it."""
        given = [as_item(k, x) for k, x in enumerate(items)]
        if not given:
            return []
        first = kind_of(given[0]) == "system" and self.conversation.head is None
        mapped = to_events(given, self._known_call, first)
        seqs = self.conversation.append_many(mapped.events)
        self._learn(mapped.events, seqs, mapped.held)
        return [seqs[h] for h in mapped.holders]

    def _learn(self, events: Sequence[Event], seqs: Sequence[int], held: Sequence[list[Parts]]) -> None:
        """What stored events tell this history: their items, and the calls still open."""
        for seq, items in zip(seqs, held):
            self._cache[seq] = items
        for e in events:
            if e.kind == "ActionEvent":
                self._calls[e.tool_call_id] = (e.tool_name, e.id)  # type: ignore[attr-defined]
            elif isinstance(e, ObservationBase):
                self._calls.pop(e.tool_call_id, None)
        if len(self._cache) > CACHE_LIMIT:  # appended and never rendered: read again when they are
            self._cache.clear()

    @property
    def open_calls(self) -> list[str]:
        """The ids of the calls appended here whose results have not been appended yet (the
        view leaves them out until then)."""
        return list(self._calls)

    def _known_call(self, call_id: str) -> tuple[str, str] | None:
        """The tool name and action uid of a call appended before, here or elsewhere (then
        found in the view, newest first)."""
        known = self._calls.get(call_id)
        if known is not None:
            return known
        view = self.conversation.view()
        items = items_of(view.events)
        for pos in range(len(items) - 1, -1, -1):
            x = items[pos]
            if x.kind == "ActionEvent" and x.tool_call_id == call_id:
                event = view.events[pos]
                return event.tool_name, event.id  # type: ignore[attr-defined]
        return None

    # --- reading -----------------------------------------------------------------------

    def messages(self, *, condense: bool = True, limit: int | None = None) -> list[Item]:
        """What to send now: the view (condensed first when a condenser is set, unless
        ``condense=False``) as the items that were appended, with the summary and
        re-injected pins as user messages. A fresh list of fresh objects on every call.

        Without any condensation, that is every item appended on the current branch, as it
        was given, except a tool call whose result has not been appended yet (and a result
        whose call is missing): providers refuse either, so the view leaves them out until
        their pair is there.

        ``limit``: only the newest ``limit`` items (``tail``: started earlier rather than
        split a call from its result). On a branch nothing condensed or pinned, they are
        read from its end (``newest.py``): a window costs the window, not the history."""
        if limit is None or limit < 0:
            return self.render(self.view(condense=condense))
        if not (condense and self.condenser is not None):
            with collector_paused(), self.store.reading() as db:
                got = newest(db, self.conversation.id, limit, self._render)
            if got is not None:
                return got
        return tail(self.render(self.view(condense=condense)), limit)

    def view(self, at: int | None = None, *, condense: bool = False) -> View:
        """The view now, or right after event ``at``; with ``condense``, the condenser (if
        any) runs first (``Conversation.step``)."""
        if at is not None or self.condenser is None or not condense:
            return self.conversation.view(at)
        return self.conversation.step(self.condenser)

    def condense(self, *, force: bool = False) -> CondenseOutcome:
        """Run the condenser now (``force``: it must act, as after a context-window error)."""
        if self.condenser is None:
            raise ConfigError("this history has no condenser: give one (condenser=\"llm_summarizing\")")
        if force:
            self.conversation.request_condensation()
        done = self.conversation.condense(self.condenser)
        if done.error is not None:
            raise done.error
        return done

    def render(self, view: View) -> list[Item]:
        """A view as items: what was appended, the summary and re-injected pins as user
        messages, a result a strategy rewrote (masked) with its new text."""
        with collector_paused():  # (a long view's items all live on: as the view's own rendering)
            return self._render(view)

    def _render(self, view: View, trace: Trace | None = None) -> list[Item]:
        """``render``; with ``trace`` (a window's render: ``newest.py``), where each view
        position's items start in the list, and whether it was rendered as an event written
        by other means (``newest.Trace``), and nothing is kept in the cache."""
        items = items_of(view.events)
        sources = self._sources(view, items)
        out: list[Item] = []
        foreign: list[int] = []  # positions of events written by other means, rendered as the view does
        kept: dict[int, list[Parts]] = {}

        def flush() -> None:
            if foreign:
                if trace is not None:  # (a run is rendered as one: each of it starts where it does)
                    trace.extend((len(out), True) for _ in foreign)
                out.extend(events_to_messages([view.events[p] for p in foreign]))
                foreign.clear()

        def start() -> None:
            flush()
            if trace is not None:
                trace.append((len(out), False))

        for pos, x in enumerate(items):
            seq = x.seq
            if seq is None:  # the summary, a pinned event shown again
                start()
                turn = single_turn(view.events[pos])
                if turn is not None:
                    out.append(serialize(turn, AS_TEXT))
                continue
            if seq in view.replaced:
                start()
                out.extend(_rewritten(view.events[pos], sources))
                continue
            held = self._cache.get(seq)
            if held is None:
                src = sources[seq]
                chat = _chat_of(src)
                held = None if chat is None else parts(chat, _at(sources, seq, src))
                if held is None:
                    foreign.append(pos)
                    continue
            start()
            out.extend(made(held))
            kept[seq] = held
        flush()
        if trace is not None:
            # A window's render (newest.py) keeps nothing in the cache: it may hold a batch's
            # later events without the first, whose item holds their strings' places, and a
            # later render reads only the events the cache lacks, so it would miss them.
            return out
        for seq in self._cache.keys() - kept.keys():  # appended, not in this view yet
            if seq > view.upto:
                kept[seq] = self._cache[seq]
        self._cache = kept
        return out

    def _sources(self, view: View, items: Sequence[Any]) -> dict[int, Any]:
        """For each event of the view not rendered before: its JSON (parsed) or the event."""
        out: dict[int, Any] = {}
        unread: list[int] = []
        for x in items:
            seq = x.seq
            if seq is None or seq in self._cache:
                continue
            if type(x) is Pending:
                if x.event is not None:
                    out[seq] = x.event
                elif x.payload is not None:
                    out[seq] = _decode(x.payload)
                    if x.long:
                        x.payload = None  # (its items are kept here: a long view lets the JSON go)
                else:
                    unread.append(seq)
            else:
                out[seq] = x
        if unread:  # a long view keeps no JSON: read the rows again, by ranges of ids
            wanted = set(unread)
            cid = self.conversation.id
            with self.store.reading() as db:
                for s, e in view.intervals:
                    lo, hi = bisect.bisect_left(unread, s), bisect.bisect_right(unread, e)
                    if lo == hi:
                        continue
                    for seq, _, payload in _rows(db, cid, unread[lo], unread[hi - 1], page=4096):
                        if seq in wanted:
                            out[seq] = _decode(payload)
        return out

    def entries(self) -> list[Entry]:
        """Every item on the current branch, oldest first, with the id of its event, whatever
        condensations hid (events written by other means are not items and are left out)."""
        with self.store.reading() as db:
            rows = [row for s, e in db.path(self.conversation.id) for row in _rows(db, self.conversation.id, s, e)]
        parsed = {seq: json.loads(payload) for seq, kind, payload in rows if kind in CHAT_KINDS}
        out: list[Entry] = []
        for seq, data in parsed.items():
            chat = data.get(CHAT)
            if chat:
                out.extend(Entry(seq, item) for item in rebuild(chat, _at(parsed, seq, data)) or ())
        return out

    # --- rewinding ---------------------------------------------------------------------

    def pop(self) -> Item | None:
        """Take the newest item off the current branch and return it (None when there is
        none, or when the newest is an event written by other means). Nothing is deleted:
        HEAD moves back to the event before it, as ``navigate`` does, so the item stays
        stored on the branch left behind; condensations, pins and requests made after it
        are carried onto the new branch (those that forgot or pinned the item are not). One
        transaction."""
        conv = self.conversation
        popped: Item | None = None
        with conv.writing() as w:
            tail = _Tail.read(w.db, conv.id)
            if tail is None:
                return None
            items = rebuild(tail.chat, _at(tail.parsed, tail.head, tail.parsed[tail.head]))
            if not items:
                raise MalformedEvent(f"event {tail.head} of conversation {conv.id!r} holds chat items that "
                                     "cannot be read back; nothing was changed")
            popped, residue = items[-1], items[:-1]
            w.navigate(tail.before)
            again = to_events(residue, self._known_call, tail.before is None) if residue else None
            new = (again.events if again else []) + tail.carried()
            seqs = w.append(new) if new else []
        for seq in tail.parsed:  # off the branch now
            self._cache.pop(seq, None)
        if again is not None:
            self._learn(again.events, seqs, again.held)
        self._calls.clear()  # the calls open on the branch left behind
        return popped

    def clear(self) -> None:
        """Start again from nothing: HEAD moves to an empty root, as ``navigate(None)`` does,
        and the next item starts a new branch. Nothing is deleted: the items before stay
        stored and readable (``branches()``, ``view(at=...)``, the command line)."""
        self.conversation.navigate(None)
        self._moved()

    def _moved(self) -> None:
        """HEAD moved: what was appended here is on the branch left behind (the calls it left
        open, the items rendered for it)."""
        self._calls.clear()
        self._cache.clear()

    def navigate(self, to: int | None) -> None:
        """Move HEAD to event ``to`` (an ``Entry.seq``; None: empty): the next item starts a
        branch there, the rest stays stored (``Conversation.navigate``)."""
        self.conversation.navigate(to)
        self._moved()

    def fork(self, at: int | None = None, conversation_id: str | None = None) -> "ChatHistory":
        """A new history holding the current branch up to event ``at`` (None: HEAD), with
        this one's condenser, in the same database (``Conversation.fork``)."""
        copy = self.conversation.fork(at, conversation_id)
        return ChatHistory(self.store, copy.id, self.condenser)

    # --- the rest of the conversation's API --------------------------------------------

    def branches(self) -> list[tree.Branch]:
        return self.conversation.branches()

    def search(self, query: str, limit: int = 10, scope: str = "forgotten", **filters: Any) -> list[Any]:
        """``Conversation.search``: what condensations hid (``scope``: "visible", "all")."""
        return self.conversation.search(query, limit, scope, **filters)  # type: ignore[arg-type]

    def read(self, seq: int, window: int = 2, max_chars: int = 4000) -> Any:
        return self.conversation.read(seq, window, max_chars)

    def pin(self, seq: int, mode: str = "keep", label: str | None = None, group: str | None = None) -> int:
        """Pin event ``seq`` (``Entry.seq``; ``Conversation.pin``): ``keep`` or ``reinject``."""
        return self.conversation.pin(seq, mode, label, group)  # type: ignore[arg-type]

    def call_recall_tool(self, name: str, arguments: str | Mapping[str, Any] | None) -> str:
        """Run a recall tool (``RECALL_TOOL_SPECS``) as the model asked; the text to send back."""
        from ..conversation.recall_tools import call_recall_tool

        return call_recall_tool(self.conversation, name, arguments)


def _open(store: EventStore, conversation_id: str, create: bool) -> Conversation:
    if create and not store.has_conversation(conversation_id):
        try:
            return store.create_conversation(conversation_id)
        except ConversationExists:  # another process made it meanwhile
            pass
    return store.conversation(conversation_id)


class _Part(msgspec.Struct):
    text: Any = None
    image_urls: Any = None
    thinking: Any = None
    signature: Any = None
    data: Any = None


class _Call(msgspec.Struct):
    arguments: Any = None


class _Message(msgspec.Struct):
    content: list[_Part] = []
    reasoning_content: Any = None
    thinking_blocks: list[_Part] = []


class _Observation(msgspec.Struct):
    content: list[_Part] = []


class _Row(msgspec.Struct):
    """What ``items.parts`` reads of an event's JSON: its ``chat`` field and the fields its
    holes point into (msgspec skips the rest without building it: ids, times, actions)."""

    chat: Any = None
    tool_call: Union[_Call, None] = None
    thought: list[_Part] = []
    reasoning_content: Any = None
    thinking_blocks: list[_Part] = []
    llm_message: Union[_Message, None] = None
    observation: Union[_Observation, None] = None
    system_prompt: Union[_Part, None] = None


_ROW = msgspec.json.Decoder(_Row)


def _decode(payload: str) -> Any:
    """An event's JSON as far as its items need it (a ``_Row``); when it is not the shape
    ChatHistory writes, the whole of it as Python values."""
    try:
        return _ROW.decode(payload)
    except msgspec.ValidationError:
        return msgspec.json.decode(payload)


def _chat_of(src: Any) -> dict[str, Any] | None:
    """An event's ``chat`` field, from its JSON (read whole or as a ``_Row``) or the event."""
    if isinstance(src, dict):
        return src.get(CHAT)
    if type(src) is _Row:
        return src.chat  # type: ignore[no-any-return]
    extra = src.__pydantic_extra__
    return extra.get(CHAT) if extra else None


def _at(sources: Mapping[int, Any], seq: int, src: Any) -> Callable[[int], Any]:
    return lambda offset: src if offset == 0 else sources[seq + offset]


def _rewritten(event: Event, sources: Mapping[int, Any]) -> list[Item]:
    """A result a strategy rewrote (masked): its item with the new text where the item's
    text was, else (its text spread over parts the rewrite merged) a result of that text."""
    chat = _chat_of(event)
    got = None if chat is None else rebuild(chat, _at(sources, event.seq or 0, event))
    if got is not None:
        return got
    text = "".join(p.text for p in result_turn(event).content if isinstance(p, Text))  # type: ignore[arg-type]
    call_id = event.tool_call_id  # type: ignore[attr-defined]
    skeleton = json.loads(chat["items"][0]) if chat and chat.get("items") else {}
    if skeleton.get("type") in OUTPUT_TYPES:
        return [{"type": skeleton["type"], "call_id": call_id, "output": text}]
    if chat is None:
        return events_to_messages([event])
    return [{"role": "tool", "tool_call_id": call_id, "content": text}]


def _rows(db: Session, cid: str, start: int, end: int, page: int = 512) -> Iterator[tuple[int, str, str]]:
    """The rows with ids ``start`` to ``end``, oldest first, a page at a time."""
    cursor = start
    while cursor <= end:
        batch = db.event_page(cid, cursor, end + 1, page)
        yield from batch
        if len(batch) < page:
            return
        cursor = batch[-1][0] + 1


@dataclass
class _Tail:
    """The end of the current branch, from the newest item's event: the event (``head``),
    the rows after it, and the event before it (``before``; None: the root)."""

    head: int
    chat: dict[str, Any]
    parsed: dict[int, dict[str, Any]]  # the head and the rows after it, by id
    after: list[tuple[int, str]]  # the rows after the head that are not its batch: (id, kind)
    before: int | None

    @classmethod
    def read(cls, db: Session, cid: str) -> "_Tail | None":
        parsed: dict[int, dict[str, Any]] = {}
        after: list[tuple[int, str]] = []
        rows = backwards(db, cid)
        for seq, kind, payload in rows:
            data = json.loads(payload) if kind in CHAT_KINDS or kind in CARRIED_KINDS else {}
            parsed[seq] = data
            chat = data.get(CHAT)
            if kind in CHAT_KINDS and chat is None:
                return None  # an event written by other means: not an item to pop
            if chat is None:
                after.append((seq, kind))
            elif chat.get("items"):
                before = next(iter(rows), None)
                return cls(seq, chat, parsed, after[::-1], None if before is None else before[0])
        return None

    def carried(self) -> list[Event]:
        """Copies of the condensations, pins and requests after the head that neither forget
        nor pin a popped event (new ids; they follow HEAD)."""
        popped = {seq for seq in self.parsed if seq >= self.head and seq not in dict(self.after)}
        uids = {self.parsed[seq].get("id") for seq in popped}
        out: list[Event] = []
        for seq, kind in self.after:
            if kind not in CARRIED_KINDS:
                continue
            data = {k: v for k, v in self.parsed[seq].items() if k not in ("id", "timestamp", "parent_id")}
            if kind == "Condensation":
                ranges = data.get("forgotten_ranges") or []
                if any(e >= self.head for _, e in ranges) or uids & set(data.get("forgotten_event_ids") or ()):
                    continue
                copy = event_from_dict(data)
                assert isinstance(copy, Condensation)
                copy.with_note(CondensationNote(reason=f"carried onto the branch pop_item made (a copy of event {seq})"))
                out.append(copy)
            elif kind == "PinEvent":
                if data.get("event_id") in uids:
                    continue
                out.append(event_from_dict(data))
            else:
                out.append(CondensationRequest())
        return out


