"""Stored tool calls decoded only as far as their messages need.

A long view (no condenser, or masking) sends every event, and decoding each one into its
pydantic model costs ~7 us and ~5 KB that the collector must track, most of it fields no message shows
(ids, timestamps, the parsed action that repeats the call's arguments). An action is read here
into a typed ``msgspec`` record instead: the decoder skips what the record does not name
without building it (measured on 100k SDK-shaped events: 91 ms for the actions against 158 ms
with ``orjson`` and 296 ms with ``json``, before pydantic's own pass). The records carry the
attribute names the renderers read (``messages.batch_turn``), so one renderer serves events
and records alike. An observation is read the same way, its ``observation`` kept as a dict
(its shape is per tool; ``observations.render`` reads it as it reads an event's); so are a
message (``MessageEvent``: a chat history is mostly these), an agent error and a rejection.

Only what was written through ``codec.event_row`` is read here: it was validated as the
event it is when it was written, so no validation is repeated.
"""

from __future__ import annotations

from typing import Any, ClassVar, Union

import msgspec


class TextRecord(msgspec.Struct, tag="text", tag_field="type"):
    text: str
    cache_prompt: bool = False


class ImageRecord(msgspec.Struct, tag="image", tag_field="type"):
    image_urls: list[str]
    cache_prompt: bool = False


class ThinkingRecord(msgspec.Struct, tag="thinking", tag_field="type"):
    thinking: str
    signature: Union[str, None] = None
    type: ClassVar[str] = "thinking"


class RedactedThinkingRecord(msgspec.Struct, tag="redacted_thinking", tag_field="type"):
    data: str
    type: ClassVar[str] = "redacted_thinking"


class ToolCallRecord(msgspec.Struct):
    id: str
    name: str
    arguments: str


class ActionRecord(msgspec.Struct):
    """What an ``ActionEvent``'s assistant turn shows (its ids are the row's facts)."""

    tool_call: ToolCallRecord
    thought: list[Union[TextRecord, ImageRecord]] = []
    reasoning_content: Union[str, None] = None
    thinking_blocks: list[Union[ThinkingRecord, RedactedThinkingRecord]] = []
    kind: ClassVar[str] = "ActionEvent"


class ObservationRecord(msgspec.Struct):
    """What an ``ObservationEvent``'s tool turn shows."""

    tool_call_id: str
    tool_name: str
    observation: dict[str, Any]
    extended_content: list[TextRecord] = []
    kind: ClassVar[str] = "ObservationEvent"


class TerminalMetadataRecord(msgspec.Struct):
    """What a terminal observation's ``metadata`` adds to its output (any JSON value, as its
    dict would give it: ``observations.terminal_parts`` reads them as it reads the dict's)."""

    prefix: Any = None
    suffix: Any = None
    working_dir: Any = None
    py_interpreter_path: Any = None
    exit_code: Any = -1


class TerminalRecord(msgspec.Struct, tag="TerminalObservation", tag_field="kind"):
    """A ``TerminalObservation`` whose content is texts only (what the terminal writes)."""

    content: list[TextRecord]
    is_error: Any = False
    metadata: Union[TerminalMetadataRecord, None] = None
    full_output_save_dir: Any = None


class TerminalObservationRecord(msgspec.Struct):
    """An ``ObservationEvent`` of the terminal, read without a dict for its observation."""

    tool_call_id: str
    tool_name: str
    observation: TerminalRecord
    extended_content: list[TextRecord] = []
    kind: ClassVar[str] = "ObservationEvent"


class LLMMessageRecord(msgspec.Struct):
    """What a ``MessageEvent``'s turn shows of its ``llm_message``."""

    role: str
    content: list[Union[TextRecord, ImageRecord]] = []
    tool_calls: Union[list[ToolCallRecord], None] = None
    tool_call_id: Union[str, None] = None
    name: Union[str, None] = None
    reasoning_content: Union[str, None] = None
    thinking_blocks: list[Union[ThinkingRecord, RedactedThinkingRecord]] = []


class MessageRecord(msgspec.Struct):
    """What a ``MessageEvent``'s turn shows: a chat history's every user and assistant text."""

    llm_message: LLMMessageRecord
    extended_content: list[TextRecord] = []
    kind: ClassVar[str] = "MessageEvent"


class AgentErrorRecord(msgspec.Struct):
    """What an ``AgentErrorEvent``'s tool turn shows."""

    tool_call_id: str
    tool_name: str
    error: str
    kind: ClassVar[str] = "AgentErrorEvent"


class RejectionRecord(msgspec.Struct):
    """What a ``UserRejectObservation``'s tool turn shows."""

    tool_call_id: str
    tool_name: str
    rejection_reason: str = "User rejected the action"
    kind: ClassVar[str] = "UserRejectObservation"


#: Most observations of a coding agent are the terminal's: they are read as a typed record
#: (a third less time, read and rendered, than as a dict), when their JSON says that kind
#: as the SDK writes it. Any other shape is not valid for the record, and is read as a dict.
TERMINAL_KIND = '"kind":"TerminalObservation"'
TERMINAL = msgspec.json.Decoder(TerminalObservationRecord)

DECODERS: dict[str, msgspec.json.Decoder] = {
    "ActionEvent": msgspec.json.Decoder(ActionRecord),
    "ObservationEvent": msgspec.json.Decoder(ObservationRecord),
}
#: The other kinds a long view holds many of, read as records when their JSON has the shape
#: the record reads (a content part of a type the record does not know: decoded as the event).
RESULTS: dict[str, msgspec.json.Decoder] = {
    "AgentErrorEvent": msgspec.json.Decoder(AgentErrorRecord),
    "UserRejectObservation": msgspec.json.Decoder(RejectionRecord),
}
MESSAGE = msgspec.json.Decoder(MessageRecord)
TEXTS = (TextRecord,)
IMAGES = (ImageRecord,)
