"""The rows of the two kinds that make an agent's history, read from their JSON with msgspec.

pydantic validating an event (``common.parse_event_json``: the JSON parsed, each model built)
is the largest part of a large import: 6 to 8 us for an event of 1 to 3 KB, and 2 us more to
look for NaN and Infinity, which its parser takes. An ActionEvent or ObservationEvent (some
97 % of an SDK history) is read here instead into msgspec structs that declare the same fields
with the same types, the JSON objects an event carries (``action``, ``observation``) kept as
raw text: about 2.5 us. Only the row is made (``codec.event_row``'s values, from the structs);
an import's children use it (``io/parallel.py``).

The shortcut accepts only what pydantic accepts, and gives the row pydantic's event gives.
Whatever it is unsure of, ``row`` returns None for, and the event takes pydantic's way, which
accepts or refuses it as before and words the error:

* another kind; a field missing (pydantic would make up an id or a timestamp) or of another
  type (msgspec is strict where pydantic coerces, and never the other way round);
* JSON that msgspec refuses: NaN or Infinity, a lone surrogate, a control character in a
  string, text after the document; and bytes that are not UTF-8;
* more than ``MAX_DEPTH`` opening brackets: pydantic refuses JSON nested deeper than that,
  msgspec does not (each level opens one);
* more than ``MAX_DIGITS`` digits in all: pydantic refuses a number of more digits than
  that, and a raw value is not read here, so only a document that cannot hold one is (only
  documents of up to 4 KB were, once: the larger observations, a sixth of an SDK history's,
  took pydantic's way at 15-20 us each);
* a document holding a newline (a folder's file formatted by hand): its payload is the
  event serialized anew, which pydantic's event gives;
* a document holding ``\\u0000``, the one way JSON spells a NUL in a string (a raw one is a
  control character, refused above): an identifier holding one is refused
  (``codec.IDENTIFIERS``), with the words ``codec.event_row`` and the importer give.

``tests/test_quick_rows.py`` holds the structs to the models' fields and checks the promise
on the factories' events and on hypothesis' changes to them.
"""

from __future__ import annotations

from typing import Any, Literal, Union

import msgspec

from ..view import records
from .common import MAX_DEPTH, MAX_DIGITS

Source = Literal["agent", "user", "environment", "hook"]
# What ``row`` counts, in one pass (``bytes.translate`` deleting every other byte).
_NOT_COUNTED = bytes(b for b in range(256) if b not in b"{[0123456789")
_OPEN, _NULL = ord("{"), ord("n")


# The content blocks a long view reads declare every field of theirs already.
TextContent, ImageContent = records.TextRecord, records.ImageRecord
ThinkingBlock, RedactedThinkingBlock = records.ThinkingRecord, records.RedactedThinkingRecord


class MessageToolCall(msgspec.Struct):
    id: str
    name: str
    arguments: str
    origin: Literal["completion", "responses"] = "completion"
    responses_item_id: Union[str, None] = None


class ActionEvent(msgspec.Struct, tag="ActionEvent", tag_field="kind"):
    id: str
    timestamp: str
    thought: list[Union[TextContent, ImageContent]]
    tool_name: str
    tool_call_id: str
    tool_call: MessageToolCall
    llm_response_id: str
    source: Source = "agent"
    parent_id: Union[str, None] = None
    reasoning_content: Union[str, None] = None
    thinking_blocks: list[Union[ThinkingBlock, RedactedThinkingBlock]] = []
    # JSON objects or null (checked in ``row``); None when the key is absent
    responses_reasoning_item: msgspec.Raw = None  # type: ignore[assignment]
    action: msgspec.Raw = None  # type: ignore[assignment]
    security_risk: str = "UNKNOWN"
    critic_result: msgspec.Raw = None  # type: ignore[assignment]
    summary: Union[str, None] = None


class ObservationEvent(msgspec.Struct, tag="ObservationEvent", tag_field="kind"):
    id: str
    timestamp: str
    tool_name: str
    tool_call_id: str
    observation: msgspec.Raw  # a JSON object (checked in ``row``)
    action_id: str
    source: Source = "environment"
    parent_id: Union[str, None] = None
    extended_content: list[TextContent] = []


_decoder = msgspec.json.Decoder(Union[ActionEvent, ObservationEvent])


def _object(raw: msgspec.Raw) -> bool:
    return memoryview(raw)[0] == _OPEN


def _object_or_null(raw: msgspec.Raw | None) -> bool:
    return raw is None or memoryview(raw)[0] in (_OPEN, _NULL)


def row(conversation_id: str, seq: int, data: bytes) -> tuple[tuple[Any, ...], str | None] | None:
    """(row, parent id) of the event ``data`` holds, its row as ``codec.event_row(checked=False)``
    makes it (``data`` is the payload); None when pydantic must judge it (see the module)."""
    if b"\n" in data or b"\\u0000" in data:
        return None
    counted = data.translate(None, _NOT_COUNTED)  # the opening brackets and the digits
    brackets = counted.count(b"{") + counted.count(b"[")
    if brackets > MAX_DEPTH or len(counted) - brackets > MAX_DIGITS:
        return None
    try:
        text = data.decode()
        event = _decoder.decode(data)
    except (UnicodeDecodeError, msgspec.DecodeError):  # ValidationError is a DecodeError
        return None
    if type(event) is ObservationEvent:
        if not _object(event.observation):
            return None
        return (conversation_id, seq, "ObservationEvent", event.source, event.timestamp, event.id,
                event.tool_call_id, event.tool_name, None, False, True, None, text), event.parent_id
    if not (_object_or_null(event.action) and _object_or_null(event.responses_reasoning_item)
            and _object_or_null(event.critic_result)):
        return None
    return (conversation_id, seq, "ActionEvent", event.source, event.timestamp, event.id, event.tool_call_id,
            event.tool_name, event.llm_response_id, bool(event.thinking_blocks), True, None, text), event.parent_id

