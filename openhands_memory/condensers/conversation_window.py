"""ConversationWindow: on request, keep the essentials and the newer half of the rest.

Essentials are the system prompt, the first user message and, in legacy histories, the recall
pair that answered it. Unlike the legacy strategy it never writes a condensation that forgets
nothing (that marked the request handled without shrinking anything, and looped).
"""

from __future__ import annotations

from ..errors import NoCondensationAvailable
from ..events import (
    Condensation,
    CondensationNote,
    Event,
    MessageEvent,
    ObservationBase,
    RecallAction,
    RecallObservation,
    SystemPromptEvent,
    TextContent,
)
from ..settings import settings
from ..strategy import ModelCalls
from ..view import View
from ..view.tokens import FRESH, TokenSource
from .base import Condenser, runs_at


def _text(e: MessageEvent) -> str:
    return "".join(c.text for c in e.llm_message.content if isinstance(c, TextContent))


def essential_positions(events: list[Event]) -> set[int]:
    keep: set[int] = set()
    system = next((i for i, e in enumerate(events) if isinstance(e, SystemPromptEvent)), None)
    if system is not None:
        keep.add(system)
    first_user = next(
        (i for i, e in enumerate(events) if isinstance(e, MessageEvent) and e.source == "user"), None
    )
    if first_user is None:
        return keep
    keep.add(first_user)
    query = _text(events[first_user])  # type: ignore[arg-type]
    recall = next(
        (i for i in range(first_user + 1, len(events))
         if isinstance(events[i], RecallAction) and events[i].query == query),  # type: ignore[attr-defined]
        None,
    )
    if recall is not None:
        keep.add(recall)
        answer = next(
            (j for j in range(recall + 1, len(events))
             if isinstance(events[j], RecallObservation) and events[j].action_id == events[recall].id),  # type: ignore[attr-defined]
            None,
        )
        if answer is not None:
            keep.add(answer)
    return keep


@settings()
class ConversationWindowCondenser(Condenser):
    type = "conversation_window"

    def handles_condensation_requests(self) -> bool:
        return True

    def condense(self, view: View, tokens: TokenSource = FRESH, calls: ModelCalls | None = None) -> View | Condensation:
        if not view.unhandled_condensation_request:
            return view
        events = view.events
        essential = essential_positions(events)
        keep_recent = max(1, (len(events) - len(essential)) // 2)
        start = view.find_next(len(events) - keep_recent)
        if start is None:
            raise NoCondensationAvailable("no cut point: a tool call is still waiting for its result")
        # A result whose call is gone would dangle; so would a recall answer whose query is
        # forgotten (legacy trims every Observation here, RecallObservation included).
        while start < len(events) and isinstance(events[start], (ObservationBase, RecallObservation)):
            start += 1
        forgotten = [i for i in range(start) if i not in essential]
        if not forgotten:
            raise NoCondensationAvailable(
                f"the view holds only its essential events and the recent half ({len(events)} "
                "events); nothing can be forgotten, so the overflow must come from elsewhere "
                "(a single huge event, or an output budget larger than the context)"
            )
        cond = Condensation(forgotten_ranges=runs_at(view, forgotten))
        return cond.with_note(CondensationNote(self.type, "request", self.config()))
