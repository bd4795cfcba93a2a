"""The heart of the inspector: the view the model got at call N, what had been forgotten by
then, and what changed since call N-1."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .. import ranges
from ..inspection.history import on_path
from ..view.rendering import clip, describe
from .reading import (LIST_TEXT, ForgottenGroup, Missing, forgotten_group, open_conversation, ranges_of,
                      runs_text, sweep_of)
from .timeline import CHARS_PER_TOKEN, Timelines

if TYPE_CHECKING:
    from ..conversation import Conversation, EventStore
    from ..events import Event


FORGOTTEN_GROUPS_PAGE = 10
VIEW_HEAD, VIEW_TAIL = 40, 400  # a view longer than both is shown by its ends, paged between


class ViewItem(BaseModel):
    position: int
    seq: int | None
    kind: str
    role: str  # system, summary, pin (re-injected), event
    tool: str | None
    tokens: int
    estimated: bool
    text: str
    clipped: bool


class Change(BaseModel):
    added: str  # ids new in this view, as runs
    added_count: int
    forgotten: list[ForgottenGroup]  # condensations between the two calls
    summary_written: bool


class CallPage(BaseModel):
    conversation: str
    branch: int | None
    call: int
    calls: int
    seq: int  # the first event of the model's answer
    at: int  # the view is the one right after this event
    tokens: int
    estimated: bool
    makeup: dict[str, int]  # tokens by kind
    view_length: int
    view: list[ViewItem]
    view_gap: tuple[int, int] | None  # positions left out of a long view's listing
    forgotten: list[ForgottenGroup]
    forgotten_groups: int
    forgotten_before: int | None  # the next page of groups: those before this condensation
    change: Change | None
    previous: int | None
    next: int | None


def call_page(store: "EventStore", timelines: Timelines, cid: str, n: int,
              forgot_before: int | None = None, branch: int | None = None) -> CallPage:
    conv = open_conversation(store, cid)
    sweep = sweep_of(store, timelines, cid, branch)
    if not 1 <= n <= len(sweep.calls):
        raise Missing(f"conversation {cid!r} has {len(sweep.calls):,} model calls; there is no call {n}")
    seq = sweep.calls[n - 1].seq
    at = seq - 1
    view = conv.view(at=at) if at >= 0 else None
    items = _items(store, cid, view)
    makeup: dict[str, int] = {}
    for item in items:
        makeup[item.kind] = makeup.get(item.kind, 0) + item.tokens
    shown, gap = items, None
    if len(items) > VIEW_HEAD + VIEW_TAIL:
        shown, gap = items[:VIEW_HEAD] + items[-VIEW_TAIL:], (VIEW_HEAD, len(items) - VIEW_TAIL - 1)
    groups, total, nxt = _forgotten(store, conv, at, forgot_before)
    change = None
    if n > 1:
        change = _change(store, conv, sweep.calls[n - 2].seq - 1, at, view)
    return CallPage(
        conversation=cid, branch=branch, call=n, calls=len(sweep.calls), seq=seq, at=at,
        tokens=sum(i.tokens for i in items), estimated=any(i.estimated for i in items), makeup=makeup,
        view_length=len(items), view=shown, view_gap=gap, forgotten=groups, forgotten_groups=total,
        forgotten_before=nxt, change=change,
        previous=n - 1 if n > 1 else None, next=n + 1 if n < len(sweep.calls) else None,
    )


def _items(store: "EventStore", cid: str, view: Any) -> list[ViewItem]:
    """The view's items. A stored event's kind, tool and size come from its row; only the
    items the page lists (a long view's ends) and the derived ones (the summary, re-injected
    pins) are decoded and rendered, so a view sent whole costs its rows, not its models."""
    if view is None:
        return []
    with store.reading() as db:
        rows = {r[0]: r[1:] for r in db.view_item_rows(cid, view.intervals)}
    seqs = view.seqs
    listed = set(range(len(seqs))) if len(seqs) <= VIEW_HEAD + VIEW_TAIL else \
        set(range(VIEW_HEAD)) | set(range(len(seqs) - VIEW_TAIL, len(seqs)))
    items = []
    for i, seq in enumerate(seqs):
        row = rows.get(seq) if seq is not None else None
        if row is not None and i not in listed:
            kind, tool, count, size = row
            tokens, estimated = (count, False) if count is not None else (-(-(size or 0) // CHARS_PER_TOKEN), True)
            items.append(ViewItem(position=i, seq=seq, kind=kind, role=_role(kind), tool=tool, tokens=tokens,
                                  estimated=estimated, text="", clipped=False))
        else:
            items.append(_view_item(i, view.events[i], row))
    return items


def _role(kind: str) -> str:
    return {"SystemPromptEvent": "system", "CondensationSummaryEvent": "summary",
            "PinnedContextEvent": "pin"}.get(kind, "event")


def _view_item(position: int, e: "Event", row: tuple | None) -> ViewItem:
    """An item rendered: its text, and its size as the timeline reckons it (the cached count,
    else a token per four bytes of its JSON; a derived item's text, by the same rule)."""
    text = describe(e)
    if row is not None and row[2] is not None:
        tokens, estimated = row[2], False
    else:
        size = row[3] if row is not None else len(text.encode())
        tokens, estimated = -(-(size or 0) // CHARS_PER_TOKEN), True
    shown = clip(text, LIST_TEXT)
    return ViewItem(
        position=position, seq=e.seq, kind=e.kind, role=_role(e.kind), tool=getattr(e, "tool_name", None),  # type: ignore[attr-defined]
        tokens=tokens, estimated=estimated, text=shown, clipped=len(shown) < len(text),
    )


def _forgotten(store: "EventStore", conv: "Conversation", at: int,
               before: int | None) -> tuple[list[ForgottenGroup], int, int | None]:
    """What was forgotten by event ``at`` on its path: each condensation with the ranges it
    forgot, newest first, a page at a time (read by key: the page's cost does not grow with
    the history)."""
    if at < 0:
        return [], 0, None
    bound = at + 1 if before is None else min(before, at + 1)
    with store.reading() as db:
        path = db.path(conv.id, at)
        total = db.condensations_upto(conv.id, at)
        found = [c for c in db.condensations_before(conv.id, bound, 3 * FORGOTTEN_GROUPS_PAGE) if on_path(path, c)]
        page = found[:FORGOTTEN_GROUPS_PAGE]
        runs = {c: db.ranges_of(conv.id, c) for c in page}
    groups = [forgotten_group(store, conv, c, runs[c]) for c in page if runs[c]]
    return groups, total, page[-1] if len(found) > FORGOTTEN_GROUPS_PAGE else None


def _change(store: "EventStore", conv: "Conversation", before_at: int, at: int, view: Any) -> Change:
    """What changed between the views right after ``before_at`` and right after ``at``."""
    earlier = conv.view(at=before_at) if before_at >= 0 else None
    old_ids = set() if earlier is None else {e.seq for e in earlier.events if e.seq is not None}
    new_ids = [e.seq for e in view.events if e.seq is not None] if view is not None else []
    added = [s for s in new_ids if s not in old_ids]
    with store.reading() as db:
        path = db.path(conv.id, at)
        conds = [c for c in db.condensation_ids(conv.id, before_at) if c <= at and on_path(path, c)]
    groups = [forgotten_group(store, conv, c, ranges_of(store, conv.id, c)) for c in sorted(conds)]
    summary = any(_has_summary(store, conv.id, c) for c in conds)
    return Change(added=runs_text(ranges.runs_of(added)), added_count=len(added), forgotten=groups,
                  summary_written=summary)


def _has_summary(store: "EventStore", cid: str, cond: int) -> bool:
    with store.reading() as db:
        detail = db.condensation_detail(cid, cond)
    return bool(detail and detail[2] is not None)
