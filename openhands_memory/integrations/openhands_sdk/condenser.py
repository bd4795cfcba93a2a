"""``SDKCondenser``: any of this library's condensers, as an OpenHands SDK condenser.

The SDK hands a condenser its ``View`` (the events the model would see) and takes back a
``View`` to send or a ``Condensation`` to store. This adapter converts the SDK's view into
ours, runs the strategy, and converts the answer back:

* Our events are parsed from the SDK's JSON (the same shape: see ``events.py``) and kept from
  step to step by event id, so a step converts only new events. Each gets its position in
  the view as its id: a strategy's forgotten id ranges are then view positions.
* Our Condensation becomes the SDK's: ``forgotten_event_ids`` are the UUIDs of the events at
  the forgotten positions. Our views keep only the newest summary; the SDK keeps a summary
  event until a condensation forgets it. So a new summary forgets the old one, and a
  condensation that forgets events before the old summary moves it (forgets it and places
  its text again at its new position). The SDK's view and this library's view of the stored
  rows then agree, id for id.
* A rewritten view (masking) comes back with the SDK's own event objects wherever the
  strategy kept an event as it was.
* Why the condensation was made, and the ledger of the model calls behind it, go to the
  DatabaseFileStore that stores it (``handoff.py``).
* Pin rules (``[[condenser.pins]]``) are judged on the SDK's view at every step, since the
  SDK's log holds no pin rows: a ``keep`` pin's event (with its tool pair) is left out of
  every Condensation, so the SDK's view of its log keeps it. A ``reinject`` pin's event is
  remembered when seen; once forgotten, the view this condenser hands back shows it again
  after the summary, as a user message framed as standing context (the SDK's stored view
  does not: it is what is sent, as a masking strategy's view is). What is remembered lives
  as long as this condenser object: a resumed agent re-learns what it sees.
"""

from __future__ import annotations

import tomllib
import uuid
from typing import Any

from openhands.sdk.context.condenser.base import CondenserBase
from openhands.sdk.context.view import View as SDKView
from openhands.sdk.event import Condensation as SDKCondensation
from openhands.sdk.event import CondensationSummaryEvent as SDKSummary
from openhands.sdk.event import MessageEvent as SDKMessageEvent
from openhands.sdk.event.base import Event as SDKEvent
from openhands.sdk.llm import LLM, Message, TextContent
from pydantic import Field, PrivateAttr

from ...condensers.base import Condenser
from ...config import condenser_from_section, condenser_from_toml
from ...errors import ConfigError
from ...events import Condensation, CondensationSummaryEvent, Event, event_from_json
from ...strategy import ModelCalls
from ...view import View
from ...view.pins import Pin, Pins, insert_at, judged, reinjected
from ...view.tokens import FRESH
from ...view.view import carve
from . import handoff


class SDKCondenser(CondenserBase):
    """One of openhands-memory's strategies (``settings``: its ``[condenser]`` section, as
    OpenHands TOML spells it), run inside an SDK agent."""

    settings: dict[str, Any] = Field(
        description="The strategy's settings, as a [condenser] section of OpenHands TOML "
        "(API keys are never stored here: they come from the TOML or the environment)."
    )
    _strategy: Condenser | None = PrivateAttr(default=None)
    _ours: dict[str, Event] = PrivateAttr(default_factory=dict)
    # Reinject pins seen so far: (rule, group or event id) -> the event, as ours.
    _remembered: dict[tuple[str, str], Event] = PrivateAttr(default_factory=dict)

    @classmethod
    def from_toml(cls, text: str, name: str | None = None) -> SDKCondenser:
        """From OpenHands TOML text: its ``[condenser]`` section (or ``[condenser.NAME]``),
        with the ``[llm.*]`` sections it names, exactly as the CLI reads them."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"not valid TOML: {e}") from None
        return cls.from_condenser(condenser_from_toml(data, name))

    @classmethod
    def from_condenser(cls, strategy: Condenser) -> SDKCondenser:
        made = cls(settings=_section(strategy.config()))
        made._strategy = strategy
        return made

    @property
    def strategy(self) -> Condenser:
        """The strategy; rebuilt from ``settings`` when the SDK loaded this condenser from a
        saved ``base_state.json``."""
        if self._strategy is None:
            self._strategy = condenser_from_section(self.settings, {})
        return self._strategy

    def handles_condensation_requests(self) -> bool:
        return self.strategy.handles_condensation_requests()

    def condense(self, view: SDKView, agent_llm: LLM | None = None) -> SDKView | SDKCondensation:
        ours = self._our_view(view)
        calls = ModelCalls()
        result = self.strategy.condense(ours, FRESH, calls)
        if isinstance(result, Condensation):
            made = _sdk_condensation(carve(ours, result), view)
            handoff.leave(made.id, handoff.Handoff(result.note, [c for c in calls.calls if c.produced]))
            return made
        again = self._reinjected(result)
        if result is ours and not again:
            return view
        return _sdk_view(result, view, ours, again)

    def _pins(self, events: list[Event]) -> Pins:
        """The pins the rules make on the SDK's view (ids are view positions); reinject pins'
        events are remembered for when a condensation forgets them."""
        pins = judged(self.strategy.pin_rules, events)
        by_seq = {e.seq: e for e in events}
        for pin in pins:
            if pin.mode == "reinject":
                event = by_seq[pin.seq]
                self._remembered[(pin.rule or "", pin.group or event.id)] = event
        return pins

    def _reinjected(self, view: View) -> list[Event]:
        """The remembered reinject pins ``view`` no longer shows, as text (``pins.reinjected``)."""
        shown = {e.id for e in view.events}
        lost = {k: e for k, (_, e) in enumerate(self._remembered.items()) if e.id not in shown}
        pins = Pins({k: Pin(k, "reinject", k) for k in lost})
        return list(reinjected(pins, set(), lost, by_uid=True))

    def _our_view(self, view: SDKView) -> View:
        kept: dict[str, Event] = {}
        events: list[Event] = []
        for position, e in enumerate(view.events):
            mine = self._ours.get(e.id)
            if mine is None:
                mine = event_from_json(e.model_dump_json(exclude_none=True))
            if not isinstance(mine, CondensationSummaryEvent):
                # In place: the cached event is used by this step only, so its id from an
                # earlier step does not matter. The summary keeps none, as in our views.
                mine.with_seq(position)
            kept[e.id] = mine
            events.append(mine)
        self._ours = kept  # only what is still in view
        made = View(events=events, unhandled_condensation_request=view.unhandled_condensation_request)
        if self.strategy.pin_rules:
            made.pins = self._pins(events)
        return made


def _section(config: Any) -> Any:
    """A strategy's ``config()`` as a TOML section: unset (None) settings are left out, as a
    TOML file leaves them out (TOML has no null)."""
    if isinstance(config, dict):
        return {k: _section(v) for k, v in config.items() if v is not None}
    if isinstance(config, list):
        return [_section(v) for v in config]
    return config


def _sdk_condensation(cond: Condensation, view: SDKView) -> SDKCondensation:
    events = view.events
    gone = {p for s, t in cond.forgotten_ranges or [] for p in range(s, min(t, len(events) - 1) + 1)}
    gone |= {p for p, e in enumerate(events) if e.id in set(cond.forgotten_event_ids)}
    gone = {p for p in gone if not isinstance(events[p], SDKSummary)}
    summary, offset = cond.summary, cond.summary_offset
    old = [p for p, e in enumerate(events) if isinstance(e, SDKSummary)]
    if old:
        if summary is not None:
            gone.update(old)  # the new summary replaces the old one
        elif any(p < old[-1] for p in gone):
            # The SDK would shift the old summary left; ours stays at its offset. Move it.
            old_event = events[old[-1]]
            assert isinstance(old_event, SDKSummary)
            summary = old_event.summary
            offset = old[-1] - sum(1 for p in gone if p < old[-1]) - (len(old) - 1)
            gone.update(old)
    return SDKCondensation(
        id=cond.id,
        forgotten_event_ids={events[p].id for p in gone},
        summary=summary,
        summary_offset=offset if summary is not None else None,
        llm_response_id=str(uuid.uuid4()),
    )


def _sdk_view(result: View, view: SDKView, ours: View, again: list[Event] = ()) -> SDKView:  # type: ignore[assignment]
    """The SDK's events for ``result``: its own objects wherever the strategy kept ours;
    ``again``: re-injected pins, placed after the summary as user messages."""
    originals = {id(mine): sdk for mine, sdk in zip(ours.events, view.events)}
    events = []
    for e in result.events:
        sdk = originals.get(id(e))
        events.append(sdk if sdk is not None else SDKEvent.model_validate(e.to_json_dict()))
    if again:
        at = insert_at(result.events)
        events[at:at] = [_user_message(e) for e in again]
    return SDKView(events=events, unhandled_condensation_request=result.unhandled_condensation_request)


def _user_message(pinned: Event) -> SDKEvent:
    return SDKMessageEvent(
        id=pinned.id, timestamp=pinned.timestamp, source="user",
        llm_message=Message(role="user", content=[TextContent(text=pinned.text)]),  # type: ignore[attr-defined]
    )
