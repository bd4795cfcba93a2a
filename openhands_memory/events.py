"""Typed events: the OpenHands SDK event family plus the legacy kinds the V0 strategies know.

Every event serialises to the SDK's JSON shape: a ``kind`` field naming the class, ``None``
fields left out (``model_dump(exclude_none=True)``), empty lists kept. Unknown fields are kept
verbatim (``extra="allow"``) so that a file written by a newer SDK round-trips unchanged;
missing or mistyped fields are an error naming the field.

``Event.id`` is the *external* id (the SDK's UUID string). The store's per-conversation
sequence number is ``Event.seq``, set on events read back from the database.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from .errors import MalformedEvent, UnknownEventKind

Source = Literal["agent", "user", "environment", "hook"]


class _Part(BaseModel):
    """Nested payload parts: permissive, so provider-specific keys survive a round trip.

    Validators are built on first use (``defer_build``), not at import: a command that never
    reads an event does not pay for building every model's schema."""

    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)


class TextContent(_Part):
    cache_prompt: bool = False
    type: Literal["text"] = "text"
    text: str


class ImageContent(_Part):
    cache_prompt: bool = False
    type: Literal["image"] = "image"
    image_urls: list[str]


Content = Annotated[Union[TextContent, ImageContent], Field(discriminator="type")]


class ThinkingBlock(_Part):
    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = None


class RedactedThinkingBlock(_Part):
    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


Thinking = Annotated[Union[ThinkingBlock, RedactedThinkingBlock], Field(discriminator="type")]


class MessageToolCall(_Part):
    id: str
    name: str
    arguments: str  # the JSON text exactly as the model produced it
    origin: Literal["completion", "responses"] = "completion"
    responses_item_id: str | None = None


class Message(_Part):
    role: Literal["user", "system", "assistant", "tool"]
    content: list[Content] = Field(default_factory=list)
    tool_calls: list[MessageToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    reasoning_content: str | None = None
    thinking_blocks: list[Thinking] = Field(default_factory=list)
    responses_reasoning_item: dict[str, Any] | None = None


def _new_id() -> str:
    """A UUID version 7: time-ordered, so new ids land at the end of the uid index instead
    of at random places in it (batched appends run about 1.5x faster)."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms << 80) | (0x7 << 76) | (((rand >> 62) & 0xFFF) << 64) | (0b10 << 62) | (rand & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


def _now() -> str:
    # The SDK writes naive local ISO timestamps; we keep its format for round trips.
    return datetime.now().isoformat()


class Event(BaseModel):
    """Base of every event kind. Subclasses set ``kind`` and ``llm_visible``."""

    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)  # as _Part's

    llm_visible: ClassVar[bool] = False

    id: str = Field(default_factory=_new_id)
    timestamp: str = Field(default_factory=_now)
    source: Source = "environment"
    parent_id: str | None = None

    # The store id (``seq``) lives in ``__pydantic_private__`` without being declared a
    # private attribute: a declared one makes pydantic call ``model_post_init`` in Python for
    # every event it decodes (a third of decoding a long view). Undeclared, the dict is None
    # until ``with_seq`` sets it; pydantic still copies and compares it with the model.

    @property
    def seq(self) -> int | None:
        """Per-conversation sequence number, set when the event was read from a store."""
        # Straight from the private dict: pydantic's attribute lookup costs ~3 us, and the
        # view reads this for every event on every step.
        private = self.__pydantic_private__
        return private.get("_seq") if private else None

    def with_seq(self, seq: int) -> "Event":
        private = self.__pydantic_private__
        if private is None:  # skips __setattr__, which a frozen model refuses
            object.__setattr__(self, "__pydantic_private__", {"_seq": seq})
        else:
            private["_seq"] = seq
        return self

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)

    def to_json(self) -> str:
        return self.model_dump_json(exclude_none=True)

    @property
    def has_thinking(self) -> bool:
        return False


# --- LLM-visible SDK kinds -------------------------------------------------------------


class SystemPromptEvent(Event):
    llm_visible: ClassVar[bool] = True
    kind: Literal["SystemPromptEvent"] = "SystemPromptEvent"
    source: Source = "agent"
    system_prompt: TextContent
    tools: list[dict[str, Any]]
    dynamic_context: TextContent | None = None


class MessageEvent(Event):
    llm_visible: ClassVar[bool] = True
    kind: Literal["MessageEvent"] = "MessageEvent"
    source: Source
    llm_message: Message
    llm_response_id: str | None = None
    activated_skills: list[str] = Field(default_factory=list)
    extended_content: list[TextContent] = Field(default_factory=list)
    sender: str | None = None
    critic_result: dict[str, Any] | None = None


class ActionEvent(Event):
    llm_visible: ClassVar[bool] = True
    kind: Literal["ActionEvent"] = "ActionEvent"
    source: Source = "agent"
    thought: list[Content]
    reasoning_content: str | None = None
    thinking_blocks: list[Thinking] = Field(default_factory=list)
    responses_reasoning_item: dict[str, Any] | None = None
    action: dict[str, Any] | None = None  # None: the tool call could not be executed
    tool_name: str
    tool_call_id: str
    tool_call: MessageToolCall
    llm_response_id: str
    security_risk: str = "UNKNOWN"
    critic_result: dict[str, Any] | None = None
    summary: str | None = None

    @property
    def has_thinking(self) -> bool:
        return bool(self.thinking_blocks)


class ObservationBase(Event):
    """An answer to a tool call: an observation, a rejection or an error."""

    llm_visible: ClassVar[bool] = True
    tool_name: str
    tool_call_id: str


class ObservationEvent(ObservationBase):
    kind: Literal["ObservationEvent"] = "ObservationEvent"
    observation: dict[str, Any]
    action_id: str
    extended_content: list[TextContent] = Field(default_factory=list)

    @property
    def browser_url(self) -> str | None:
        """The visited URL when this is a browser tool's output, else None."""
        obs_kind = str(self.observation.get("kind", ""))
        if obs_kind.lower().startswith("browser") or self.tool_name.lower().startswith("browser"):
            url = self.observation.get("url")
            return str(url) if url is not None else ""
        return None


class UserRejectObservation(ObservationBase):
    kind: Literal["UserRejectObservation"] = "UserRejectObservation"
    rejection_reason: str = "User rejected the action"
    rejection_source: Literal["user", "hook"] = "user"
    action_id: str


class AgentErrorEvent(ObservationBase):
    kind: Literal["AgentErrorEvent"] = "AgentErrorEvent"
    source: Source = "agent"
    error: str
    classification: dict[str, Any] = Field(
        default_factory=lambda: {"kind": "unknown", "retryable": False, "user_action": "none"}
    )


class CondensationSummaryEvent(Event):
    """A summary shown to the model in place of forgotten events. Views derive it; it is rarely stored."""

    llm_visible: ClassVar[bool] = True
    kind: Literal["CondensationSummaryEvent"] = "CondensationSummaryEvent"
    summary: str


class PinnedContextEvent(Event):
    """A pinned event shown again after a condensation forgot it (``view/pins.py``): derived
    by the view, never stored. The model reads it as a user turn framed as standing context,
    so that it is not taken for a new request."""

    llm_visible: ClassVar[bool] = True
    kind: Literal["PinnedContextEvent"] = "PinnedContextEvent"
    pinned_seq: int
    text: str


# --- not LLM-visible -------------------------------------------------------------------


PinMode = Literal["keep", "reinject"]


class PinEvent(Event):
    """Pins (or, with ``mode`` None, unpins) the event whose external id is ``event_id``.

    A pin is a row like any event, so ``view(at=N)`` sees the pins made up to N and a pin
    belongs to the branch it was made on. ``keep``: no condensation may forget the event;
    ``reinject``: it may be forgotten, and the view then shows it again after the summary.
    A newer pin with the same ``group`` replaces the older one. ``rule``: the configured
    rule that made it, if one did.
    """

    kind: Literal["PinEvent"] = "PinEvent"
    source: Source = "user"
    event_id: str
    # The pinned event's id in the store when pinned: a hint that spares a view the lookup
    # by external id (which decides: a fork renumbers).
    event_seq: int | None = None
    mode: PinMode | None = None
    label: str | None = None
    group: str | None = None
    rule: str | None = None



@dataclass(frozen=True)
class CondensationNote:
    """Why a condensation was made and what it saved; stored beside it, not in its JSON."""

    strategy: str | None = None
    reason: str | None = None
    config: dict[str, Any] | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    fallback: str | None = None  # the hard fallback that made it (also named in ``reason``)


class Condensation(Event):
    """Forgets events and optionally places a summary at ``summary_offset`` in the view.

    ``forgotten_event_ids`` holds external ids (the SDK's form); ``forgotten_ranges`` holds
    inclusive runs of sequence numbers (this library's form). The store accepts either and
    records the union as id ranges.
    """

    kind: Literal["Condensation"] = "Condensation"
    forgotten_event_ids: list[str] = Field(default_factory=list)
    forgotten_ranges: list[tuple[int, int]] | None = None
    summary: str | None = None
    summary_offset: int | None = Field(default=None, ge=0)
    llm_response_id: str | None = None

    _note: CondensationNote | None = PrivateAttr(default=None)

    @property
    def has_summary_metadata(self) -> bool:
        return self.summary is not None and self.summary_offset is not None

    @property
    def note(self) -> CondensationNote | None:
        """Set by the condenser that made it; the store writes it to the condensation row."""
        return self._note

    def with_note(self, note: CondensationNote) -> "Condensation":
        self._note = note
        return self


class CondensationRequest(Event):
    kind: Literal["CondensationRequest"] = "CondensationRequest"


class PauseEvent(Event):
    kind: Literal["PauseEvent"] = "PauseEvent"
    source: Source = "user"


class InterruptEvent(Event):
    kind: Literal["InterruptEvent"] = "InterruptEvent"
    source: Source = "user"


class ConversationStateUpdateEvent(Event):
    kind: Literal["ConversationStateUpdateEvent"] = "ConversationStateUpdateEvent"
    key: str
    value: Any = None


class ConversationErrorEvent(Event):
    kind: Literal["ConversationErrorEvent"] = "ConversationErrorEvent"
    code: str
    detail: str
    classification: dict[str, Any] | None = None


# Observability kinds the SDK writes into the log; kept so a folder imports whole.
class TokenEvent(Event):
    kind: Literal["TokenEvent"] = "TokenEvent"


class HookExecutionEvent(Event):
    kind: Literal["HookExecutionEvent"] = "HookExecutionEvent"
    source: Source = "hook"


class LLMCompletionLogEvent(Event):
    kind: Literal["LLMCompletionLogEvent"] = "LLMCompletionLogEvent"


class StreamingDeltaEvent(Event):
    kind: Literal["StreamingDeltaEvent"] = "StreamingDeltaEvent"


class ACPToolCallEvent(Event):
    kind: Literal["ACPToolCallEvent"] = "ACPToolCallEvent"


class SecurityAnalysisEvent(Event):
    kind: Literal["SecurityAnalysisEvent"] = "SecurityAnalysisEvent"


# --- legacy (V0) kinds -----------------------------------------------------------------


class RecallAction(Event):
    """Legacy: the agent asked for workspace/microagent knowledge. In the view, sends nothing."""

    llm_visible: ClassVar[bool] = True
    kind: Literal["RecallAction"] = "RecallAction"
    source: Source = "agent"
    query: str = ""


class RecallObservation(Event):
    """Legacy: the knowledge a RecallAction brought back, shown to the model as a user turn."""

    llm_visible: ClassVar[bool] = True
    kind: Literal["RecallObservation"] = "RecallObservation"
    content: str = ""
    action_id: str | None = None


class AgentStateChangedEvent(Event):
    """Legacy bookkeeping that the V0 history filter leaves out of every view."""

    kind: Literal["AgentStateChangedEvent"] = "AgentStateChangedEvent"
    agent_state: str


class NullEvent(Event):
    """Legacy NullAction / NullObservation."""

    kind: Literal["NullEvent"] = "NullEvent"


EVENT_CLASSES: dict[str, type[Event]] = {
    cls.model_fields["kind"].default: cls
    for cls in (
        SystemPromptEvent,
        MessageEvent,
        ActionEvent,
        ObservationEvent,
        UserRejectObservation,
        AgentErrorEvent,
        CondensationSummaryEvent,
        PinnedContextEvent,
        Condensation,
        CondensationRequest,
        PinEvent,
        PauseEvent,
        InterruptEvent,
        ConversationStateUpdateEvent,
        ConversationErrorEvent,
        TokenEvent,
        HookExecutionEvent,
        LLMCompletionLogEvent,
        StreamingDeltaEvent,
        ACPToolCallEvent,
        SecurityAnalysisEvent,
        RecallAction,
        RecallObservation,
        AgentStateChangedEvent,
        NullEvent,
    )
}

VISIBLE_KINDS: frozenset[str] = frozenset(k for k, c in EVENT_CLASSES.items() if c.llm_visible)
OBSERVATION_KINDS: frozenset[str] = frozenset(
    k for k, c in EVENT_CLASSES.items() if issubclass(c, ObservationBase)
)
# The kinds a tool loop is made of: the one home of this set (the view's history, the loop-edge
# index's predicate in schema.py and the statements in storage/ are all written from it).
TOOL_KINDS: frozenset[str] = frozenset({"ActionEvent"}) | OBSERVATION_KINDS


def _describe(error: ValidationError, kind: str) -> str:
    first = error.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "(event)"
    more = len(error.errors()) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"{kind}: field '{field}': {first['msg']}{suffix}"


def event_from_dict(data: Any) -> Event:
    """Build the typed event a JSON object describes, dispatching on its ``kind``."""
    if not isinstance(data, dict):
        raise MalformedEvent(f"an event must be a JSON object, got {type(data).__name__}")
    kind = data.get("kind")
    if kind is None:
        raise MalformedEvent("field 'kind': missing (every event names its kind)")
    if not isinstance(kind, str):
        raise MalformedEvent(f"field 'kind' must be a string, not {type(kind).__name__}")
    cls = EVENT_CLASSES.get(kind)
    if cls is None:
        raise UnknownEventKind(kind, EVENT_CLASSES)
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        raise MalformedEvent(_describe(e, kind)) from None


def event_from_json(text: str | bytes) -> Event:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise MalformedEvent(f"not valid JSON: {e}") from None
    except UnicodeDecodeError as e:
        raise MalformedEvent(f"not valid UTF-8 text (byte {e.start})") from None
    except RecursionError:
        raise MalformedEvent("JSON nested too deeply to read") from None
    except ValueError as e:  # an integer of more than 4,300 digits
        raise MalformedEvent(f"not readable JSON: {e}") from None
    return event_from_dict(data)
