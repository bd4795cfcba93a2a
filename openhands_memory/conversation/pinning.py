"""Making pins: the checks a pin or unpin passes inside its write transaction, and the budget.

What pins do to a view is the view's (``view/pins.py``); this module writes them. A pin is
refused, with what to do instead, when its event is not on the current branch, is never shown
to the model, or (``keep``) was forgotten already; an unpin when the event is not pinned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .. import ranges
from ..errors import EventNotFound, PinBudgetExceeded, PinRefused
from ..events import Event, PinEvent, PinMode
from ..storage import Session
from ..storage.codec import decode
from ..view import query
from ..view.pins import DERIVED_KINDS, Pin, Pins
from ..view.tokens import CharEstimate, TokenCounter, count_event

MODES = ("keep", "reinject")


def target(db: Session, cid: str, seq: int, path: list[ranges.Run]) -> Event:
    """Event ``seq``, which a pin may name: stored, on the current branch, shown to the model."""
    row = db.event(cid, seq) if seq >= 0 else None
    if row is None:
        raise EventNotFound(cid, seq)
    if not ranges.covers(path, seq):
        raise PinRefused(f"event {seq} is not on the current branch (HEAD is "
                         f"{path[-1][1] if path else 'empty'}); navigate to its branch to pin it")
    event = decode(row[0], row[1], seq)
    if not type(event).llm_visible or event.kind in DERIVED_KINDS:
        raise PinRefused(f"event {seq} is a {event.kind}, which the model is never shown: nothing to pin")
    return event


@dataclass(frozen=True)
class PinRequest:
    """One pin to make: event ``seq``, how, and the rule that asks for it (if one does)."""

    seq: int
    mode: PinMode = "keep"
    label: str | None = None
    group: str | None = None
    rule: str | None = None


def pin_events(
    db: Session, cid: str, requests: Sequence[PinRequest], *, budget: int | None = None,
    counter: TokenCounter | None = None,
) -> list[PinEvent]:
    """The pin events for ``requests``, checked against the view at HEAD (read in ``db``'s
    transaction, which holds the conversation's lock), and the budget for what is pinned
    after them all."""
    if db.base_state(cid) is not None:
        raise PinRefused(
            f"conversation {cid!r} is an OpenHands SDK agent's (DatabaseFileStore): its event log "
            "cannot hold a pin event, which the SDK could not load; pin through SDKCondenser's "
            "[[condenser.pins]] rules instead"
        )
    data = query.load(db, cid)
    path = data.path or [(0, data.upto)]
    after = dict(data.pins.by_seq)
    made = []
    for r in requests:
        if r.mode not in MODES:
            raise PinRefused(f"a pin's mode is keep or reinject, not {r.mode!r}")
        event = target(db, cid, r.seq, path)
        if r.mode == "keep" and r.seq not in data.events:
            raise PinRefused(f"event {r.seq} was already forgotten by a condensation: pin it with mode "
                             "reinject to show it again after the summary")
        if r.group is not None:
            after = {s: p for s, p in after.items() if p.group != r.group}
        after[r.seq] = Pin(r.seq, r.mode, -1, r.label, r.group, r.rule)
        made.append(PinEvent(event_id=event.id, event_seq=r.seq, mode=r.mode, label=r.label, group=r.group,
                             rule=r.rule))
    if budget is not None:
        pinned = {s: data.event(s) for s in after if s in data.events}  # (the view keeps their JSON)
        check_budget(db, cid, Pins(after), {**(data.pinned or {}), **pinned}, budget, counter)
    return made


def unpin_event(db: Session, cid: str, seq: int) -> PinEvent:
    pins = query.pins_at(db, cid)
    if seq not in pins:
        if db.event(cid, seq) is None:
            raise EventNotFound(cid, seq)
        raise PinRefused(f"event {seq} is not pinned on the current branch")
    uid = db.uid_of(cid, seq)
    assert uid is not None
    return PinEvent(event_id=uid, event_seq=seq, mode=None)


def check_budget(db: Session, cid: str, pins: Pins, events: dict[int, Event], budget: int,
                 counter: TokenCounter | None = None) -> None:
    """Refuse pins whose events take more than ``budget`` tokens, naming them."""
    counter = counter or CharEstimate()
    missing = [p.seq for p in pins if p.seq not in events]
    for seq, _, kind, _, _, payload in db.event_rows(cid, missing) if missing else []:
        events[seq] = decode(kind, payload, seq)
    sizes = [(p.seq, count_event(counter, events[p.seq])) for p in pins if p.seq in events]
    total = sum(n for _, n in sizes)
    if total > budget:
        raise PinBudgetExceeded(total, budget, sizes)
