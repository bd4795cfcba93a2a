"""What the inspector's pages share: a conversation opened (or a 404 saying what is
missing), its model calls on a path from the timeline, which condensation hid an event, and
a condensation's forgotten events as a group."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

from .. import ranges
from ..view.rendering import clip, describe
from .timeline import Sweep, Timelines

if TYPE_CHECKING:
    from ..conversation import Conversation, EventStore


#: Characters of an event's text shown in lists; the event's own page shows it whole.
LIST_TEXT = 2_000
FORGOTTEN_EVENTS_SHOWN = 20


class Missing(LookupError):
    """What a URL names does not exist: the page says what is missing (HTTP 404)."""


def sweep_of(store: "EventStore", timelines: Timelines, cid: str, branch: int | None = None) -> Sweep:
    """The calls on HEAD's path, or on the path to event ``branch`` (a leaf of another
    branch)."""
    timeline = timelines.get(cid)
    with timeline.lock:
        with store.reading() as db:
            timeline.refresh(db)
            if branch is not None and not 0 <= branch <= db.last_seq(cid):
                raise Missing(f"conversation {cid!r} has no event {branch} for a branch to end at")
            path = db.path(cid, branch)
        return timeline.sweep(path)


def open_conversation(store: "EventStore", cid: str) -> "Conversation":
    if not store.has_conversation(cid):
        raise Missing(f"no conversation {cid!r} in this database")
    return store.conversation(cid)


def runs_text(runs: list[ranges.Run]) -> str:
    return ", ".join(f"{s}..{e}" if e > s else f"{s}" for s, e in runs)


class ForgottenEvent(BaseModel):
    seq: int
    kind: str
    tool: str | None
    text: str
    clipped: bool


class ForgottenGroup(BaseModel):
    condensation: int
    strategy: str | None
    reason: str | None
    ranges: str
    count: int
    events: list[ForgottenEvent]


def forgotten_group(store: "EventStore", conv: "Conversation", cond: int, runs: list[ranges.Run]) -> ForgottenGroup:
    with store.reading() as db:
        detail = db.condensation_detail(conv.id, cond)
    strategy, reason = (detail[0], detail[1]) if detail else (None, None)
    shown: list[ForgottenEvent] = []
    for s, e in runs:
        for event in conv.events(s, min(e + 1, s + FORGOTTEN_EVENTS_SHOWN - len(shown))):
            text = describe(event)
            cut = clip(text, LIST_TEXT)
            shown.append(ForgottenEvent(seq=event.seq or 0, kind=event.kind, tool=getattr(event, "tool_name", None),  # type: ignore[attr-defined]
                                        text=cut, clipped=len(cut) < len(text)))
        if len(shown) >= FORGOTTEN_EVENTS_SHOWN:
            break
    return ForgottenGroup(condensation=cond, strategy=strategy, reason=reason, ranges=runs_text(runs),
                          count=ranges.count(runs), events=shown)


def ranges_of(store: "EventStore", cid: str, cond: int) -> list[ranges.Run]:
    with store.reading() as db:
        return db.ranges_of(cid, cond)


def hiders_of(store: "EventStore", timelines: Timelines, cid: str, seqs: list[int]) -> dict[int, int | None]:
    """Which condensation first hid each event (``inspection.history``'s rule), from the
    conversation's timeline rather than a read of every forgotten range."""
    timeline = timelines.get(cid)
    with timeline.lock:
        with store.reading() as db:
            timeline.refresh(db)
            path = db.path(cid)
        return timeline.hidden_by(seqs, path)
