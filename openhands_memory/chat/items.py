"""Chat messages and Responses API items as this library's events, and back, exactly.

An item becomes the event that carries its meaning for the view, the condensers, the
summarizers and search:

| item | event |
|---|---|
| a system or developer message, first on the path | ``SystemPromptEvent`` |
| a user, assistant, system or developer message (chat or Responses ``message``) | ``MessageEvent`` |
| an assistant message with ``tool_calls`` | one ``ActionEvent`` per call, one batch |
| a ``tool`` message | ``ObservationEvent`` |
| a Responses call (``function_call``, ``custom_tool_call``, ``computer_call``, ...) | ``ActionEvent`` |
| its output (``function_call_output``, ...) | ``ObservationEvent`` |
| a ``reasoning`` item | with the call or message that follows it in the same batch of items |
|   | (the API refuses one without the other); alone, a ``MessageEvent`` |
| anything else | a ``MessageEvent`` whose text is the item's JSON |

Consecutive Responses calls of one batch of items are one batch of actions (one response's
parallel calls), so that no cut separates them. A call and its output pair by their call id,
as every strategy already keeps a tool call with its result.

The item itself is kept on the event, in the extra field ``chat``, as a *skeleton*: its JSON
with the strings the event already holds (texts, arguments, outputs, thinking, image URLs)
set to null, and *holes* saying where each of those strings is in which event. So the texts
are stored once, in the event's own fields, where search and the summarizers read them, and
the item comes back as it was given, key for key. The skeleton is a JSON string rather than
an object: full-text search indexes every string under a text key at any depth of an event,
and would otherwise read the ids and types of every item as words.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import msgspec

from ..errors import MalformedChatItem
from ..events import (
    ActionEvent,
    Event,
    ImageContent,
    Message,
    MessageEvent,
    MessageToolCall,
    ObservationEvent,
    RedactedThinkingBlock,
    SystemPromptEvent,
    TextContent,
    ThinkingBlock,
)

Item = dict[str, Any]
Path = list[Any]  # keys and indices into a JSON value

#: The extra field of an event that holds the items it stands for.
CHAT = "chat"

#: Responses API call items and the type of the output that answers each (by ``call_id``).
CALL_OUTPUTS: dict[str, str] = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output",
    "local_shell_call": "local_shell_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
    "tool_search_call": "tool_search_output",
}
OUTPUT_TYPES = frozenset(CALL_OUTPUTS.values())
TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
MESSAGE_ROLES = frozenset({"user", "assistant", "system", "developer"})
#: The observation kind a tool result is stored as (rendered as its content, as the SDK's
#: default observation is).
RESULT_KIND = "ChatToolResult"
#: How much of an unknown item's JSON its event shows as text (an image generation's base64
#: result would otherwise be counted and summarized as text).
UNKNOWN_TEXT_CHARS = 4000


@dataclass
class Hole:
    """Where one string of an item lives: item ``item`` of the event at ``offset`` ids after
    the one holding the skeleton, at ``path`` in that event's JSON."""

    item: int
    item_path: Path
    offset: int
    event_path: Path

    def as_json(self) -> list[Any]:
        return [self.item, self.item_path, self.offset, self.event_path]


@dataclass
class Holder:
    """What one event holds: the items it stands for, the strings they share with events."""

    items: list[Item] = field(default_factory=list)
    holes: list[Hole] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)  # of the items, in what was given

    def extra(self) -> dict[str, Any]:
        """The event's ``chat`` field: the skeletons (JSON text) and the holes."""
        skeletons = [_skeleton(item, [h.item_path for h in self.holes if h.item == i], position)
                     for i, (item, position) in enumerate(zip(self.items, self.positions))]
        out: dict[str, Any] = {"items": skeletons}
        if self.holes:
            out["holes"] = [h.as_json() for h in self.holes]
        return out


#: An item as a skeleton (JSON text) and the strings that fill it: (where in the item, the
#: string). Cheap to keep and to make a fresh item of: the strings are shared, not copied.
Parts = tuple[str, list[tuple[Path, str]]]


@dataclass
class Mapped:
    """Items as events: ``events`` in order; ``holders[k]``: the index of the event holding
    item ``k``; ``held[j]``: the items event ``j`` stands for, as ``Parts``."""

    events: list[Event]
    holders: list[int]
    held: list[list[Parts]]


#: How a mapping learns the tool name and action id of a call made before these items.
KnownCall = Callable[[str], "tuple[str, str] | None"]


# --- reading items ---------------------------------------------------------------------------


def as_item(position: int, value: Any) -> Item:
    """An item as JSON: a dict, or a pydantic model (litellm's and the OpenAI client's
    messages) as its JSON without unset fields."""
    if isinstance(value, dict):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        made = dump(mode="json", exclude_none=True)
        if isinstance(made, dict):
            return made
    raise MalformedChatItem(position, f"a chat message or Responses item is a JSON object, not {type(value).__name__}")


def kind_of(item: Item) -> str:
    """What an item is: system, user, assistant, calls (an assistant message with tool
    calls), tool, call, output, reasoning or unknown."""
    kind = item.get("type")
    if kind is None or kind == "message":
        role = item.get("role")
        if role in ("system", "developer"):
            return "system"
        if role == "user":
            return "user"
        if role == "assistant":
            return "calls" if item.get("tool_calls") else "assistant"
        if role == "tool" and kind is None:
            return "tool"
        return "unknown"
    if kind == "reasoning":
        return "reasoning"
    if kind in CALL_OUTPUTS:
        return "call"
    if kind in OUTPUT_TYPES:
        return "output"
    return "unknown"


def _text(value: Any, position: int, what: str) -> str:
    if not isinstance(value, str):
        raise MalformedChatItem(position, f"{what} must be a string, not {type(value).__name__}")
    return value


# --- items -> events -------------------------------------------------------------------------


def to_events(items: Sequence[Item], known: KnownCall, first_on_path: bool) -> Mapped:
    """The events for ``items`` (``as_item`` each already), in order. ``known``: the tool
    name and action uid of a call appended before; ``first_on_path``: whether nothing is on
    the path yet (a system message first becomes the system prompt)."""
    out = _Builder(known, first_on_path)
    for position, item in enumerate(items):
        out.add(position, item)
    out.flush_reasoning()
    held: list[list[Parts]] = []
    for event, holder in zip(out.events, out.holders):
        extra = holder.extra()
        event.__pydantic_extra__[CHAT] = extra  # type: ignore[index]  (made before its holes were known)
        fills: list[list[tuple[Path, str]]] = [[] for _ in holder.items]
        for h in holder.holes:
            fills[h.item].append((h.item_path, walk(holder.items[h.item], h.item_path)))
        held.append(list(zip(extra["items"], fills)))
    return Mapped(out.events, out.item_holder, held)


class _Builder:
    def __init__(self, known: KnownCall, first_on_path: bool):
        self.known = known
        self.first = first_on_path
        self.events: list[Event] = []
        self.holders: list[Holder] = []
        self.item_holder: list[int] = []
        self.reasoning: list[tuple[int, Item]] = []  # waiting for the item they go with
        self.batch: str | None = None  # the response id of the Responses calls being read
        self.calls: dict[str, tuple[str, str]] = {}  # call id -> (tool name, action uid)

    def _push(self, event: Event, holder: Holder, positions: Sequence[int]) -> None:
        self.events.append(event)
        self.holders.append(holder)
        holder.positions = list(positions)
        for _ in positions:
            self.item_holder.append(len(self.events) - 1)
        self.first = False

    def add(self, position: int, item: Item) -> None:
        kind = kind_of(item)
        if kind == "reasoning":
            self.reasoning.append((position, item))
            return
        if kind != "call":
            self.batch = None
        if kind not in ("call", "assistant", "calls"):
            self.flush_reasoning()
        getattr(self, f"_{kind}")(position, item)

    def flush_reasoning(self) -> None:
        for position, item in self.reasoning:
            holder = Holder([item])
            text = _reasoning_text(item, holder, 0, ["llm_message", "reasoning_content"])
            message = Message(role="assistant", content=[], reasoning_content=text)
            self._push(MessageEvent(source="agent", llm_message=message), holder, [position])
        self.reasoning = []

    def _take_reasoning(self, holder: Holder, path: Path) -> tuple[list[int], str | None]:
        """The reasoning items waiting, as the first items of ``holder``; their text."""
        positions, texts = [], []
        for position, item in self.reasoning:
            holder.items.append(item)
            positions.append(position)
            texts.append(_reasoning_text(item, holder, len(holder.items) - 1, path if len(self.reasoning) == 1 else None))
        self.reasoning = []
        found = [t for t in texts if t is not None]
        return positions, "\n".join(found) if found else None

    # --- messages ------------------------------------------------------------------------

    def _system(self, position: int, item: Item) -> None:
        if not self.first:
            self._message(position, item, "system", "environment")
            return
        holder = Holder([item])
        content = item.get("content")
        if isinstance(content, str):
            text = content
            holder.holes.append(Hole(0, ["content"], 0, ["system_prompt", "text"]))
        else:
            text = "\n".join(p.text for p in _parts(content, holder, 0, None) if isinstance(p, TextContent))
        self._push(SystemPromptEvent(system_prompt=TextContent(text=text), tools=[]), holder, [position])

    def _user(self, position: int, item: Item) -> None:
        self._message(position, item, "user", "user")

    def _assistant(self, position: int, item: Item) -> None:
        self._message(position, item, "assistant", "agent")

    def _message(self, position: int, item: Item, role: str, source: str) -> None:
        holder = Holder()
        positions, reasoning = self._take_reasoning(holder, ["llm_message", "reasoning_content"])
        k = len(holder.items)
        holder.items.append(item)
        parts = _parts(item.get("content"), holder, k, ["llm_message", "content"], key="content")
        fields: dict[str, Any] = {"role": role, "content": parts}
        if isinstance(item.get("name"), str):
            fields["name"] = item["name"]
        own = item.get("reasoning_content")
        if isinstance(own, str) and reasoning is None:
            holder.holes.append(Hole(k, ["reasoning_content"], 0, ["llm_message", "reasoning_content"]))
            reasoning = own
        fields["reasoning_content"] = reasoning
        fields["thinking_blocks"] = _thinking(item.get("thinking_blocks"), holder, k, ["llm_message", "thinking_blocks"])
        self._push(MessageEvent(source=source, llm_message=Message(**fields)), holder, [*positions, position])

    def _unknown(self, position: int, item: Item) -> None:
        try:
            text = json.dumps(item, ensure_ascii=False)
        except (TypeError, ValueError) as e:
            raise MalformedChatItem(position, f"not JSON ({e})") from None
        if len(text) > UNKNOWN_TEXT_CHARS:
            text = text[:UNKNOWN_TEXT_CHARS] + " …"
        role = item.get("role") if item.get("role") in ("user", "assistant", "system") else "assistant"
        source = "user" if role == "user" else "agent"
        message = Message(role=role, content=[TextContent(text=text)])
        self._push(MessageEvent(source=source, llm_message=message), Holder([item]), [position])

    # --- tool calls ----------------------------------------------------------------------

    def _calls(self, position: int, item: Item) -> None:
        """A chat assistant message with ``tool_calls``: one action per call, one batch."""
        calls = item["tool_calls"]
        if not isinstance(calls, list):
            raise MalformedChatItem(position, "tool_calls must be a list")
        head = Holder()
        positions, reasoning = self._take_reasoning(head, ["reasoning_content"])
        k = len(head.items)
        head.items.append(item)
        thought = _parts(item.get("content"), head, k, ["thought"], key="content")
        own = item.get("reasoning_content")
        if isinstance(own, str) and reasoning is None:
            head.holes.append(Hole(k, ["reasoning_content"], 0, ["reasoning_content"]))
            reasoning = own
        thinking = _thinking(item.get("thinking_blocks"), head, k, ["thinking_blocks"])
        rid = f"chat-{uuid.uuid4().hex}"
        for j, call in enumerate(calls):
            where = f"tool_calls[{j}]"
            if not isinstance(call, dict):
                raise MalformedChatItem(position, f"{where} must be an object")
            call_id = _text(call.get("id"), position, f"{where}.id")
            function = call.get("function")
            if not isinstance(function, dict):
                raise MalformedChatItem(position, f"{where}.function must be an object with a name and arguments")
            name = _text(function.get("name"), position, f"{where}.function.name")
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                head.holes.append(Hole(k, ["tool_calls", j, "function", "arguments"], j, ["tool_call", "arguments"]))
            else:  # (a provider that gives an object: shown as its JSON, kept as it was)
                arguments = json.dumps(arguments)
            action = ActionEvent(
                thought=thought if j == 0 else [], reasoning_content=reasoning if j == 0 else None,
                thinking_blocks=thinking if j == 0 else [], action={}, tool_name=name, tool_call_id=call_id,
                tool_call=MessageToolCall(id=call_id, name=name, arguments=arguments), llm_response_id=rid,
            )
            self.calls[call_id] = (name, action.id)
            if j == 0:
                self._push(action, head, [*positions, position])
            else:
                self._push(action, Holder(), [])

    def _call(self, position: int, item: Item) -> None:
        """A Responses call item (``function_call`` and its kin)."""
        kind = item["type"]
        call_id = _text(item.get("call_id"), position, f"{kind}.call_id")
        holder = Holder()
        positions, reasoning = self._take_reasoning(holder, ["reasoning_content"])
        k = len(holder.items)
        holder.items.append(item)
        name = item.get("name") if isinstance(item.get("name"), str) else kind.removesuffix("_call")
        if kind == "function_call":
            arguments = _text(item.get("arguments"), position, "function_call.arguments")
            holder.holes.append(Hole(k, ["arguments"], 0, ["tool_call", "arguments"]))
        elif isinstance(item.get("input"), str):  # a custom tool's free-form input
            arguments = item["input"]
            holder.holes.append(Hole(k, ["input"], 0, ["tool_call", "arguments"]))
        else:  # (the call's action, as JSON: what the summarizers and search read of it)
            arguments = json.dumps({key: v for key, v in item.items() if key not in ("type", "id", "call_id", "status")},
                                   ensure_ascii=False)
        if self.batch is None:
            self.batch = f"chat-{uuid.uuid4().hex}"
        item_id = item.get("id") if isinstance(item.get("id"), str) else None
        action = ActionEvent(
            thought=[], reasoning_content=reasoning, action={}, tool_name=name, tool_call_id=call_id,
            tool_call=MessageToolCall(id=call_id, name=name, arguments=arguments, origin="responses",
                                      responses_item_id=item_id),
            llm_response_id=self.batch,
        )
        self.calls[call_id] = (name, action.id)
        self._push(action, holder, [*positions, position])

    # --- tool results --------------------------------------------------------------------

    def _called(self, call_id: str) -> tuple[str, str]:
        return self.calls.pop(call_id, None) or self.known(call_id) or ("", "")

    def _tool(self, position: int, item: Item) -> None:
        call_id = _text(item.get("tool_call_id"), position, "a tool message's tool_call_id")
        holder = Holder([item])
        content = _result_parts(item.get("content"), holder, ["content"])
        name, action = self._called(call_id)
        if isinstance(item.get("name"), str):
            name = item["name"]
        self._push(_observation(call_id, name, action, content), holder, [position])

    def _output(self, position: int, item: Item) -> None:
        kind = item["type"]
        call_id = _text(item.get("call_id"), position, f"{kind}.call_id")
        holder = Holder([item])
        content = _result_parts(item.get("output"), holder, ["output"])
        name, action = self._called(call_id)
        self._push(_observation(call_id, name, action, content), holder, [position])


def _observation(call_id: str, name: str, action: str, content: list[dict[str, Any]]) -> ObservationEvent:
    return ObservationEvent(tool_name=name, tool_call_id=call_id, action_id=action,
                            observation={"kind": RESULT_KIND, "content": content})


# --- parts -----------------------------------------------------------------------------------


def _parts(content: Any, holder: Holder, k: int, path: Path | None, key: str = "content") -> list[Any]:
    """Message content as ``TextContent``/``ImageContent``; with ``path`` (where the event
    keeps its content list), holes for each text and image URL."""
    if content is None:
        return []
    if isinstance(content, str):
        if path is not None:
            holder.holes.append(Hole(k, [key], 0, [*path, 0, "text"]))
        return [TextContent(text=content)]
    out: list[Any] = []
    for i, part in enumerate(content if isinstance(content, list) else ()):
        if not isinstance(part, dict):
            continue
        found = _part(part)
        if found is None:
            continue
        kind, item_path, value = found
        if path is not None:
            event_path = [*path, len(out), "text"] if kind == "text" else [*path, len(out), "image_urls", 0]
            holder.holes.append(Hole(k, [key, i, *item_path], 0, event_path))
        out.append(TextContent(text=value) if kind == "text" else ImageContent(image_urls=[value]))
    return out


def _part(part: dict[str, Any]) -> tuple[str, Path, str] | None:
    """A content part's text or image URL, where it sits in the part; None for the parts an
    event cannot show (audio, files: kept in the skeleton)."""
    kind = part.get("type")
    if kind in TEXT_PARTS and isinstance(part.get("text"), str):
        return "text", ["text"], part["text"]
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return "text", ["refusal"], part["refusal"]
    url = part.get("image_url")
    if kind == "image_url" and isinstance(url, dict) and isinstance(url.get("url"), str):
        return "image", ["image_url", "url"], url["url"]
    if kind in ("image_url", "input_image") and isinstance(url, str):
        return "image", ["image_url"], url
    return None


def _result_parts(value: Any, holder: Holder, key: Path) -> list[dict[str, Any]]:
    """A tool result's content as an observation's content list, with holes."""
    if isinstance(value, str):
        holder.holes.append(Hole(0, key, 0, ["observation", "content", 0, "text"]))
        return [{"type": "text", "text": value}]
    if isinstance(value, list):
        out: list[dict[str, Any]] = []
        for i, part in enumerate(value):
            found = _part(part) if isinstance(part, dict) else None
            if found is None:
                continue
            kind, item_path, text = found
            tail = ["text"] if kind == "text" else ["image_urls", 0]
            holder.holes.append(Hole(0, [*key, i, *item_path], 0, ["observation", "content", len(out), *tail]))
            out.append({"type": "text", "text": text} if kind == "text" else {"type": "image", "image_urls": [text]})
        return out
    if isinstance(value, dict):  # a computer screenshot, and the like
        found = _part(value)
        if found is not None and found[0] == "image":
            holder.holes.append(Hole(0, [*key, *found[1]], 0, ["observation", "content", 0, "image_urls", 0]))
            return [{"type": "image", "image_urls": [found[2]]}]
    if value is None:
        return []
    return [{"type": "text", "text": json.dumps(value, ensure_ascii=False)}]


def _thinking(blocks: Any, holder: Holder, k: int, path: Path) -> list[Any]:
    """Anthropic-style thinking blocks (litellm's ``thinking_blocks``), with holes."""
    out: list[Any] = []
    for i, b in enumerate(blocks if isinstance(blocks, list) else ()):
        if not isinstance(b, dict):
            continue
        if b.get("type") == "thinking" and isinstance(b.get("thinking"), str):
            signature = b.get("signature") if isinstance(b.get("signature"), str) else None
            holder.holes.append(Hole(k, ["thinking_blocks", i, "thinking"], 0, [*path, len(out), "thinking"]))
            if signature is not None:
                holder.holes.append(Hole(k, ["thinking_blocks", i, "signature"], 0, [*path, len(out), "signature"]))
            out.append(ThinkingBlock(thinking=b["thinking"], signature=signature))
        elif b.get("type") == "redacted_thinking" and isinstance(b.get("data"), str):
            holder.holes.append(Hole(k, ["thinking_blocks", i, "data"], 0, [*path, len(out), "data"]))
            out.append(RedactedThinkingBlock(data=b["data"]))
    return out


def _reasoning_text(item: Item, holder: Holder, k: int, path: Path | None) -> str | None:
    """A reasoning item's summary (what search and the summarizers read of it): its one
    summary text is a hole at ``path`` (None: the text is shared with other items, no hole)."""
    texts = [s["text"] for s in item.get("summary") or [] if isinstance(s, dict) and isinstance(s.get("text"), str)]
    if not texts:
        return None
    if len(texts) == 1 and path is not None and isinstance(item["summary"][0], dict):
        holder.holes.append(Hole(k, ["summary", 0, "text"], 0, path))
    return "\n".join(texts)


# --- skeletons -------------------------------------------------------------------------------


def _skeleton(item: Item, paths: list[Path], position: int) -> str:
    """``item`` as JSON text with the strings at ``paths`` set to null (the containers on
    the way copied, the item left as it was)."""
    root: Any = dict(item)
    for path in paths:
        node = root
        for key in path[:-1]:
            child = node[key]
            child = dict(child) if isinstance(child, dict) else list(child)
            node[key] = child
            node = child
        node[path[-1]] = None
    try:
        return json.dumps(root, ensure_ascii=True, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise MalformedChatItem(position, f"not JSON ({e})") from None


def walk(value: Any, path: Path) -> Any:
    """The value at ``path`` in an event's JSON (a dict) or in the event itself (a model)."""
    if type(value) is dict:  # (an event's JSON, as most are read: no model on the way)
        for key in path:
            value = value[key]
        return value
    for key in path:
        if isinstance(value, (dict, list)):
            value = value[key]
        else:
            value = getattr(value, key)
            if value is None:
                raise LookupError(key)
    return value


def parts(chat: dict[str, Any], event_at: Callable[[int], Any]) -> list[Parts] | None:
    """The items an event holds, from its ``chat`` field, as ``Parts``: the skeletons, and
    the strings of their holes read from ``event_at(offset)`` (the event's JSON or the event,
    by the offset of its id from this one's); None when a hole cannot be filled (an event not
    at hand, or one a strategy rewrote without that string)."""
    skeletons = chat.get("items", ())
    fills: list[list[tuple[Path, str]]] = [[] for _ in skeletons]
    for i, item_path, offset, event_path in chat.get("holes", ()):
        try:
            value = walk(event_at(offset), event_path)
        except (LookupError, AttributeError, TypeError):
            return None
        if not isinstance(value, str):
            return None
        fills[i].append((item_path, value))
    return list(zip(skeletons, fills))


_fast = msgspec.json.Decoder().decode


def _loads(text: str) -> Any:
    """``json.loads``, by msgspec's decoder where it reads the text (a third of the time; the
    same values), else by ``json`` (NaN and infinities, a lone surrogate: what ``json.dumps``
    writes and msgspec refuses)."""
    try:
        return _fast(text)
    except msgspec.DecodeError:
        return json.loads(text)


def made(held: Sequence[Parts]) -> list[Item]:
    """Fresh items from their ``Parts``."""
    out = []
    for skeleton, fills in held:
        item = _loads(skeleton)
        for path, value in fills:
            node = item
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
        out.append(item)
    return out


def rebuild(chat: dict[str, Any], event_at: Callable[[int], Any]) -> list[Item] | None:
    """The items an event holds (``parts``, made into items); None as ``parts`` says."""
    held = parts(chat, event_at)
    return None if held is None else made(held)
