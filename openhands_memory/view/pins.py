"""Pins: events the model must never lose.

A pin is an event row (``PinEvent``) naming another event by its external id, so the pins in
force at any point are a fold of the pin events on the path up to it: ``view(at=N)`` sees the
pins made up to N, and a pin made on one branch is not on another.

* ``keep``: no condensation forgets the event (``properties/pinned.py`` carries it, with its
  tool pair, out of every forgotten range; ``carve`` is the last guard);
* ``reinject``: a condensation may forget it; the view then shows it again right after the
  summary, as text framed as standing context (``PinnedContextEvent``), never as a new
  request;
* ``group``: a newer pin in the same group replaces the older one (the latest task list).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, NamedTuple, Sequence

from ..events import (
    VISIBLE_KINDS,
    Event,
    MessageEvent,
    ObservationBase,
    PinEvent,
    PinMode,
    PinnedContextEvent,
    Source,
)
from ..settings import SettingError, settings

# Kinds the view makes itself: nothing to pin.
DERIVED_KINDS = frozenset({"CondensationSummaryEvent", "PinnedContextEvent"})


class Pin(NamedTuple):
    """One pin in force: event ``seq`` is pinned by the pin event ``at``. (A named tuple: a
    view with pins builds one per pin, and a tuple is the cheapest value to build.)"""

    seq: int
    mode: PinMode
    at: int
    label: str | None = None
    group: str | None = None
    rule: str | None = None


@dataclass(frozen=True)
class Pins:
    """The pins in force at one point of a history, by the pinned event's id."""

    by_seq: Mapping[int, Pin] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.by_seq)

    def __len__(self) -> int:
        return len(self.by_seq)

    def __iter__(self) -> Iterator[Pin]:
        return iter(sorted(self.by_seq.values(), key=lambda p: p.seq))

    def __contains__(self, seq: object) -> bool:
        return seq in self.by_seq

    def get(self, seq: int) -> Pin | None:
        return self.by_seq.get(seq)

    @property
    def keep(self) -> frozenset[int]:
        return frozenset(s for s, p in self.by_seq.items() if p.mode == "keep")


NO_PINS = Pins()


def fold(pin_events: Iterable[tuple[int, Mapping[str, Any]]]) -> dict[str, tuple[int, Mapping[str, Any]]]:
    """The pins in force after ``pin_events`` (each pin event's id and JSON fields, oldest
    first), by the external id of the event each pins: (the pin event's id, its fields).
    Folded by external id, so that only the few pins left need their events' ids looked up.

    Read newest first: a pin event is in force unless a later one names the same event (a
    newer pin, or an unpin) or a later pin is in its group (which replaced it)."""
    state: dict[str, tuple[int, Mapping[str, Any]]] = {}
    seen: set[str] = set()
    later_groups: set[str] = set()
    for at, ev in reversed(list(pin_events)):
        uid, group = ev["event_id"], ev.get("group")
        if uid not in seen and ev.get("mode") is not None and (group is None or group not in later_groups):
            state[uid] = (at, ev)
        seen.add(uid)
        if group is not None and ev.get("mode") is not None:
            later_groups.add(group)
    return state


def resolve(folded: Mapping[str, tuple[int, Mapping[str, Any]]], seq_of: Mapping[str, int]) -> Pins:
    """``fold``'s pins as :class:`Pins`, given the ids of the events they name (``seq_of``);
    a pin of an event not there (not on this path), or not before its pin, is none."""
    pins: dict[int, Pin] = {}
    for uid, (at, ev) in folded.items():
        seq = seq_of.get(uid)
        if seq is None or seq > at:
            continue
        pins[seq] = Pin(seq, ev["mode"], at, ev.get("label"), ev.get("group"), ev.get("rule"))
    return Pins(pins)


def pin_text(pin: Pin, event: Event, name: str | None = None) -> str:
    """How a re-injected pin reads: what it is, that it is context and not a request, then the
    event in full (a tool call or result as text, so no tool pair can break). ``name``: how
    to name the event (default: ``event N``, its id in the store)."""
    from .rendering import describe

    what = f" ({pin.label})" if pin.label else ""
    head = (
        f"[Pinned at {name or f'event {pin.seq}'}{what}: shown again after a condensation as standing "
        "context. It is not a new request; act on it only as far as the task still needs.]"
    )
    return f"{head}\n{describe(event)}"


def reinjected(pins: Pins, shown: set[int], events: Mapping[int, Event], *, by_uid: bool = False) -> list[PinnedContextEvent]:
    """The pinned events to show again: every pin whose event the view does not show (a
    ``keep`` pin too, should a condensation made elsewhere have forgotten it), in id order.
    ``events``: the pinned events the view does not show, decoded. ``by_uid``: name them by
    external id (for a view whose ids are not the store's)."""
    out: list[PinnedContextEvent] = []
    for pin in pins:
        event = events.get(pin.seq)
        if pin.seq in shown or event is None:
            continue
        out.append(PinnedContextEvent(
            id=f"{event.id}-pinned", timestamp=event.timestamp, source="user",
            pinned_seq=pin.seq, text=pin_text(pin, event, f"event {event.id}" if by_uid else None),
        ))
    return out


def insert_at(events: Sequence[Event]) -> int:
    """Where re-injected pins go: right after the summary, or, without one, right after the
    system prompt (where the forgotten events were)."""
    kinds = [e.kind for e in events]  # (a view's items answer without being decoded)
    for kind in ("CondensationSummaryEvent", "SystemPromptEvent"):
        if kind in kinds:
            return kinds.index(kind) + 1
    return 0


# --- rules: pins nobody has to make by hand --------------------------------------------

#: The share of a strategy's token limit that pinned events may take (``pin_budget``).
DEFAULT_PIN_BUDGET = 0.5

@settings("pin rule", subject="a [[condenser.pins]] rule")
class PinRule:
    """One ``[[condenser.pins]]`` table: which events to pin as they appear.

    Exactly one of: ``first_user_message = true`` (the task as first given); ``tool = NAME``
    (the latest result of that tool: each newer one replaces the older, e.g. the task
    tracker); ``kind = KIND`` (every event of that kind, optionally only from ``source``).
    """

    first_user_message: bool = False
    tool: str | None = None
    kind: str | None = None
    source: Source | None = None
    mode: PinMode = "keep"
    group: str | None = None
    label: str | None = None

    def __post_init__(self) -> None:
        chosen = [n for n in ("first_user_message", "tool", "kind") if getattr(self, n)]
        if len(chosen) != 1:
            raise SettingError(
                "first_user_message" if not chosen else chosen[1],
                "a rule names exactly one of first_user_message = true, tool = NAME or kind = KIND"
                + (f" (this one names {' and '.join(chosen)})" if chosen else ""),
            )
        if self.kind is not None and self.kind not in VISIBLE_KINDS:
            raise SettingError("kind", f"{self.kind!r} is no kind the model is shown; one of: "
                               f"{', '.join(sorted(VISIBLE_KINDS - DERIVED_KINDS))}")

    @property
    def name(self) -> str:
        if self.first_user_message:
            return "first_user_message"
        if self.tool is not None:
            return f"tool:{self.tool}"
        return f"kind:{self.kind}" + (f"/{self.source}" if self.source else "")

    @property
    def pin_group(self) -> str | None:
        # The latest result of a tool replaces the one before unless a group is given.
        return self.group if self.group is not None else (self.name if self.tool is not None else None)

    def matches(self, events: Sequence[Event], since: int) -> list[Event]:
        """The events of ``events`` (a view's, oldest first) this rule pins, among those with
        ids above ``since`` (the rest were judged before)."""
        if self.first_user_message:
            for e in events:
                if isinstance(e, MessageEvent) and e.source == "user":
                    return [e] if e.seq is not None and e.seq > since else []
            return []
        if self.tool is not None:
            for e in reversed(events):
                if e.seq is not None and e.seq <= since:
                    return []
                if isinstance(e, ObservationBase) and e.tool_name == self.tool:
                    return [e]
            return []
        out = []
        for e in reversed(events):
            if e.seq is not None and e.seq <= since:
                break
            if e.kind == self.kind and e.seq is not None and (self.source is None or e.source == self.source):
                out.append(e)
        return out[::-1]


def rule_pins(rules: Sequence[PinRule], events: Sequence[Event], pins: Pins, since: int) -> list[PinEvent]:
    """The pin events ``rules`` make for a view's ``events`` with ids above ``since``, given
    the ``pins`` in force (an event pinned the same way already gets none)."""
    out: list[PinEvent] = []
    for rule in rules:
        for e in rule.matches(events, since):
            have = pins.get(e.seq)  # type: ignore[arg-type]
            if have is not None and have.mode == rule.mode and have.group == rule.pin_group:
                continue
            out.append(PinEvent(event_id=e.id, event_seq=e.seq, mode=rule.mode, label=rule.label,
                                group=rule.pin_group, rule=rule.name))
    return out


def judged(rules: Sequence[PinRule], events: Sequence[Event], pins: Pins = NO_PINS) -> Pins:
    """``pins`` plus the pins ``rules`` make on a view's ``events``, judged afresh and held in
    memory only: for a view whose conversation holds no pin rows (an OpenHands SDK agent's
    log cannot), and for a dry run, which writes nothing."""
    made = dict(pins.by_seq)
    for rule in rules:
        for e in rule.matches(events, -1):
            assert e.seq is not None
            made[e.seq] = Pin(e.seq, rule.mode, e.seq, rule.label, rule.pin_group, rule.name)
    return Pins(made)
