"""What each page of the inspector shows, as data: the HTML templates render these models,
and each page's ``.json`` twin is the same model dumped.

Every builder reads through a read-only store and asks the library for its answers (the
view at an event, the history, the branches, pins, search); the inspector's own statements
(``storage/statements/inspector.py``) add only what pages list a page at a time.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .. import ranges
from ..errors import EventNotFound
from ..inspection.branches import tree_order
from ..inspection.history import on_path
from ..storage.codec import decode
from ..view.rendering import clip, describe
from .reading import (LIST_TEXT, ForgottenGroup, Missing, forgotten_group, hiders_of, open_conversation, ranges_of,
                      runs_text, sweep_of)
from .timeline import Timelines, call_at

if TYPE_CHECKING:
    from ..conversation import EventStore

CONVERSATIONS_PAGE = 50
EVENTS_PAGE = 200
CONDENSATIONS_PAGE = 50
CHART_POINTS = 1_000


# --- the list of conversations ------------------------------------------------------------


class ConversationItem(BaseModel):
    id: str
    created_at: str
    events: int
    calls: int
    condensations: int
    branches: int
    pins: int
    last_activity: str | None


class IndexPage(BaseModel):
    conversations: list[ConversationItem]
    q: str | None
    after: str | None
    next_after: str | None


def index_page(store: "EventStore", timelines: Timelines, after: str = "", q: str | None = None) -> IndexPage:
    with store.reading() as db:
        rows = db.conversation_page(after, CONVERSATIONS_PAGE + 1, q or None)
    more = len(rows) > CONVERSATIONS_PAGE
    items = []
    for cid, created, _meta, _head, last in rows[:CONVERSATIONS_PAGE]:
        sweep = sweep_of(store, timelines, cid)
        with store.reading() as db:
            conds, jumps, pins = db.conversation_counts(cid)
            stamp = db.timestamp_of(cid, last) if last is not None else None
        items.append(ConversationItem(
            id=cid, created_at=created, events=0 if last is None else last + 1, calls=len(sweep.calls),
            condensations=conds, branches=jumps + 1 if last is not None else 0, pins=pins, last_activity=stamp,
        ))
    return IndexPage(conversations=items, q=q, after=after or None,
                     next_after=items[-1].id if more and items else None)


# --- one conversation ---------------------------------------------------------------------


class ChartPoint(BaseModel):
    call: int
    seq: int
    tokens: int


class CondensationItem(BaseModel):
    seq: int
    strategy: str | None
    reason: str | None
    forgotten: int
    forgotten_ranges: str
    tokens_before: int | None
    tokens_after: int | None
    summary: bool
    cost_usd: float | None
    cumulative_cost_usd: float  # the summarizer's cost up to and with this condensation
    before_call: int


class BranchItem(BaseModel):
    leaf: int
    length: int
    fork: int | None
    head: bool
    drawing: str
    path: str


class PinItem(BaseModel):
    seq: int
    mode: str
    at: int
    label: str | None


class ConversationPage(BaseModel):
    id: str
    metadata: dict[str, Any]
    events: int
    head: int | None
    branch: int | None  # the leaf whose path the calls are on (None: HEAD's)
    calls: int
    condensation_count: int
    estimated_tokens: int  # events whose tokens are estimated, not counted
    chart: list[ChartPoint]
    marks: list[int]  # the calls each condensation came before
    context_limit: int | None
    summarizer_cost_usd: float
    condensations: list[CondensationItem]
    condensations_after: int | None
    condensations_next: int | None
    branches: list[BranchItem]
    pins: list[PinItem]


def conversation_page(store: "EventStore", timelines: Timelines, cid: str, cond_after: int = -1,
                      branch: int | None = None) -> ConversationPage:
    conv = open_conversation(store, cid)
    sweep = sweep_of(store, timelines, cid, branch)
    timeline = timelines.get(cid)
    head = conv.head
    with store.reading() as db:
        last = db.last_seq(cid)
        cost = db.summarizer_cost(cid)
        sizes = db.condensation_sizes(cid, cond_after, CONDENSATIONS_PAGE + 1)
        runs = {seq: db.ranges_of(cid, seq) for seq, *_ in sizes[:CONDENSATIONS_PAGE]}
        ledger = db.llm_calls_of(cid, list(runs))
        earlier = db.summarizer_cost(cid, before=sizes[0][0]) if sizes else 0.0
        cond_count = db.condensation_count(cid)
        limit_config = db.condensation_detail(cid, sizes[-1][0])[4] if sizes else None
    cost_by: dict[int, float] = {}
    for row in ledger:
        if row[6] is not None:
            cost_by[row[0]] = cost_by.get(row[0], 0.0) + row[6]
    conds, running = [], earlier
    for seq, strategy, reason, length, _offset, before, after in sizes[:CONDENSATIONS_PAGE]:
        forgot = runs.get(seq, [])
        running += cost_by.get(seq, 0.0)
        conds.append(CondensationItem(
            seq=seq, strategy=strategy, reason=reason, forgotten=ranges.count(forgot),
            forgotten_ranges=runs_text(forgot), tokens_before=before, tokens_after=after,
            summary=length is not None, cost_usd=cost_by.get(seq), cumulative_cost_usd=round(running, 6),
            before_call=call_at(sweep, seq) + 1,
        ))
    branches = conv.branches()
    return ConversationPage(
        id=cid, metadata=conv.metadata, events=last + 1, head=head, branch=branch, calls=len(sweep.calls),
        condensation_count=cond_count,
        estimated_tokens=timeline.rows.estimated,
        chart=[ChartPoint(call=p.n, seq=p.seq, tokens=p.tokens) for p in sweep.sampled(CHART_POINTS)],
        marks=sweep.marked(CHART_POINTS),
        context_limit=_context_limit(limit_config),
        summarizer_cost_usd=round(cost, 6),
        condensations=conds, condensations_after=cond_after if cond_after >= 0 else None,
        condensations_next=conds[-1].seq if len(sizes) > CONDENSATIONS_PAGE and conds else None,
        branches=[BranchItem(leaf=b.leaf, length=b.length, fork=b.fork, head=b.head,
                             drawing=f"{indent}{connector}{b.leaf}", path=runs_text(b.path))
                  for b, indent, connector in tree_order(branches)],
        pins=[PinItem(seq=p.seq, mode=p.mode, at=p.at, label=p.label) for p in conv.pins()],
    )


def _context_limit(config: dict[str, Any] | None) -> int | None:
    """The token limit the latest condensation's strategy was given, if it had one."""
    if not isinstance(config, dict):
        return None
    for key in ("max_tokens", "max_input_tokens", "token_limit"):
        value = config.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return None


# --- one event ----------------------------------------------------------------------------


class EventPage(BaseModel):
    conversation: str
    seq: int
    kind: str
    source: str
    timestamp: str
    tool: str | None
    text: str
    json_text: str
    partner: int | None  # its tool call or its result
    previous: int | None
    next: int | None
    hidden_by: int | None
    first_call_without: int | None
    branches: list[int]  # leaves of the branches it lies on
    pinned_by: int | None


def event_page(store: "EventStore", timelines: Timelines, cid: str, seq: int) -> EventPage:
    conv = open_conversation(store, cid)
    try:
        event = conv.get(seq)
    except EventNotFound:
        raise Missing(f"conversation {cid!r} has no event {seq}") from None
    with store.reading() as db:
        raw = db.event(cid, seq)
        last = db.last_seq(cid)
        call_id = getattr(event, "tool_call_id", None)
        partner = db.tool_partner(cid, seq, call_id) if call_id else None
    leaves = [b.leaf for b in conv.branches() if on_path(b.path, seq)]
    pins = {p.seq: p.at for p in conv.pins()}
    sweep = sweep_of(store, timelines, cid)
    hidden_by = hiders_of(store, timelines, cid, [seq])[seq]
    first_without = None
    if hidden_by is not None:
        k = call_at(sweep, hidden_by)
        first_without = k + 1 if k < len(sweep.calls) else None
    return EventPage(
        conversation=cid, seq=seq, kind=event.kind, source=event.source, timestamp=event.timestamp,  # type: ignore[attr-defined]
        tool=getattr(event, "tool_name", None), text=describe(event),
        json_text=json.dumps(json.loads(raw[1]), indent=2, ensure_ascii=False) if raw else "",
        partner=partner, previous=seq - 1 if seq > 0 else None, next=seq + 1 if seq < last else None,
        hidden_by=hidden_by, first_call_without=first_without, branches=leaves, pinned_by=pins.get(seq),
    )


# --- one condensation ---------------------------------------------------------------------


class LedgerCall(BaseModel):
    strategy: str
    purpose: str
    model: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    latency_s: float
    outcome: str
    error: str | None
    attempts: int


class CondensationPage(BaseModel):
    conversation: str
    seq: int
    strategy: str | None
    reason: str | None
    config: dict[str, Any] | None
    tokens_before: int | None
    tokens_after: int | None
    summary: str | None
    summary_offset: int | None
    forgotten: ForgottenGroup
    calls: list[LedgerCall]
    before_call: int | None


def condensation_page(store: "EventStore", timelines: Timelines, cid: str, seq: int) -> CondensationPage:
    conv = open_conversation(store, cid)
    with store.reading() as db:
        detail = db.condensation_detail(cid, seq)
        ledger = db.llm_calls_of(cid, [seq])
    if detail is None:
        raise Missing(f"conversation {cid!r} has no condensation {seq}")
    strategy, reason, summary, offset, config, before, after = detail
    sweep = sweep_of(store, timelines, cid)
    k = call_at(sweep, seq)
    return CondensationPage(
        conversation=cid, seq=seq, strategy=strategy, reason=reason, config=config, tokens_before=before,
        tokens_after=after, summary=summary, summary_offset=offset,
        forgotten=forgotten_group(store, conv, seq, ranges_of(store, cid, seq)),
        calls=[LedgerCall(strategy=r[1], purpose=r[2], model=r[3], prompt_tokens=r[4], completion_tokens=r[5],
                          cost_usd=r[6], latency_s=r[7], outcome=r[8], error=r[9], attempts=r[10]) for r in ledger],
        before_call=k + 1 if k < len(sweep.calls) else None,
    )


# --- the history, a page at a time --------------------------------------------------------


class HistoryItem(BaseModel):
    seq: int
    kind: str
    source: str
    timestamp: str
    tool: str | None
    tokens: int | None
    state: str  # view, forgotten, off-path, not-sent
    forgotten_by: int | None
    pinned: bool
    text: str
    clipped: bool


class EventsPage(BaseModel):
    conversation: str
    after: int
    kinds: list[str]
    events: list[HistoryItem]
    next_after: int | None


def events_page(store: "EventStore", timelines: Timelines, cid: str, after: int = -1,
                kinds: tuple[str, ...] = ()) -> EventsPage:
    conv = open_conversation(store, cid)
    with store.reading() as db:
        rows = db.event_list(cid, after, EVENTS_PAGE + 1, kinds)
        path = db.path(cid)
    page = rows[:EVENTS_PAGE]
    hiders = hiders_of(store, timelines, cid, [r[0] for r in page])
    pinned = {p.seq for p in conv.pins()}
    items = []
    for seq, kind, source, stamp, tool, visible, tokens, payload in page:
        hidden_by = hiders.get(seq)
        if not on_path(path, seq):
            state = "off-path"
        elif hidden_by is not None:
            state = "forgotten"
        elif visible:
            state = "view"
        else:
            state = "not-sent"
        text = describe(decode(kind, payload, seq))
        cut = clip(text, LIST_TEXT)
        items.append(HistoryItem(seq=seq, kind=kind, source=source, timestamp=stamp, tool=tool, tokens=tokens,
                                 state=state, forgotten_by=hidden_by, pinned=seq in pinned, text=cut,
                                 clipped=len(cut) < len(text)))
    return EventsPage(conversation=cid, after=after, kinds=list(kinds), events=items,
                      next_after=page[-1][0] if len(rows) > EVENTS_PAGE else None)


# --- search -------------------------------------------------------------------------------


class SearchHit(BaseModel):
    conversation: str
    seq: int
    kind: str
    tool: str | None
    timestamp: str
    snippet: str
    hidden_by: int | None
    first_call_without: int | None


class SearchPage(BaseModel):
    q: str
    conversation: str | None
    scope: str
    hits: list[SearchHit]
    error: str | None


SEARCH_CONVERSATIONS = 20
SEARCH_HITS = 50


def search_page(store: "EventStore", timelines: Timelines, q: str, cid: str | None, scope: str) -> SearchPage:
    from ..conversation.recall import SearchError

    if cid is not None:
        open_conversation(store, cid)
        ids = [cid]
    else:
        with store.reading() as db:
            ids = [r[0] for r in db.conversation_page("", SEARCH_CONVERSATIONS)]
    hits: list[SearchHit] = []
    if not q.strip():
        return SearchPage(q=q, conversation=cid, scope=scope, hits=[], error=None)
    try:
        for one in ids:
            found = store.conversation(one).search(q, limit=SEARCH_HITS, scope=scope)  # type: ignore[arg-type]
            sweep = sweep_of(store, timelines, one) if any(h.hidden_by is not None for h in found) else None
            for h in found:
                first = None
                if h.hidden_by is not None and sweep is not None:
                    k = call_at(sweep, h.hidden_by)
                    first = k + 1 if k < len(sweep.calls) else None
                hits.append(SearchHit(conversation=one, seq=h.seq, kind=h.kind, tool=h.tool, timestamp=h.timestamp,
                                      snippet=h.snippet, hidden_by=h.hidden_by, first_call_without=first))
    except SearchError as e:
        return SearchPage(q=q, conversation=cid, scope=scope, hits=[], error=str(e))
    return SearchPage(q=q, conversation=cid, scope=scope, hits=hits[:SEARCH_HITS], error=None)


# --- saved replays ------------------------------------------------------------------------


class ReplayRunItem(BaseModel):
    id: int
    created_at: str
    strategies: list[str]


class ReplaysPage(BaseModel):
    conversation: str
    runs: list[ReplayRunItem]
    before: int | None
    next_before: int | None


REPLAYS_PAGE = 50


def replays_page(store: "EventStore", cid: str, before: int | None = None) -> ReplaysPage:
    from ..replay import saved

    open_conversation(store, cid)
    found = saved.runs(store, cid, before, REPLAYS_PAGE + 1)
    runs = [ReplayRunItem(id=r.id, created_at=r.created_at, strategies=r.strategies) for r in found[:REPLAYS_PAGE]]
    return ReplaysPage(conversation=cid, runs=runs, before=before,
                       next_before=runs[-1].id if len(found) > REPLAYS_PAGE else None)


class ReplayRunPage(BaseModel):
    conversation: str
    id: int
    created_at: str
    replay: Any  # replay.report.Replay
    chart_svg: str  # drawn by replay/chart.py, every text in it escaped


def replay_run_page(store: "EventStore", cid: str, run: int) -> ReplayRunPage:
    from ..replay import saved
    from ..replay.chart import svg_chart

    open_conversation(store, cid)
    found = saved.load(store, cid, run)
    if found is None:
        raise Missing(f"conversation {cid!r} has no saved replay {run} (`replay --save` keeps one)")
    when, replay = found
    return ReplayRunPage(conversation=cid, id=run, created_at=when, replay=replay, chart_svg=svg_chart(replay))
