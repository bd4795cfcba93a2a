"""Events to provider messages, in the shape litellm takes, as the OpenHands SDK builds them.

Two steps, as in the SDK (``events_to_messages`` then ``LLM.format_messages_for_llm``):

1. **Turns** (:class:`Turn`, the SDK's ``Message``), built once per view and memoised:
   * the system prompt (and its dynamic context as a second block);
   * one assistant turn per parallel batch, with all its tool calls and the batch's first
     action's thought, thinking blocks and reasoning;
   * one tool turn per result, rendered per observation kind (:mod:`.observations`); a
     rejection reads ``Action rejected: <reason>``; an agent error is its text;
   * a summary as a user turn; adjacent plain user turns merged into one;
   * **a difference kept on purpose**: each batch's results are placed right after it (in
     event order), ahead of any event that sat between (the SDK sends them in event order, which providers reject
     as "tool_use without tool_result"); a call without a result is left out.
2. **Serialising** (:func:`serialize`) with the SDK's per-model switches (:class:`Options`):
   vision (images kept or dropped), reasoning content (sent or not), cache markers (the
   system prompt's first block and the last user/tool turn's last part), string content (the
   text of each message joined into one string). Every tool text is capped at 50,000
   characters keeping head and tail; an assistant turn with tool calls and no text omits
   ``content``; an empty assistant message has content ``""``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

import msgspec

from . import observations, records
from ..events import (
    OBSERVATION_KINDS,
    ActionEvent,
    CondensationSummaryEvent,
    PinnedContextEvent,
    Content,
    Event,
    ImageContent,
    MessageEvent,
    MessageToolCall,
    ObservationBase,
    ObservationEvent,
    RecallAction,
    RecallObservation,
    SystemPromptEvent,
    TextContent,
)
from ..storage.codec import decode
from .observations import Image, Part, Text
from .stored import Item, Pending

Msg = dict[str, Any]


@dataclass(frozen=True)
class Options:
    """The SDK's per-model switches for a Chat Completions request.

    The SDK takes them from the model (``LLM.vision_is_active()``,
    ``is_caching_prompt_active()``, the model's ``send_reasoning_content`` and
    ``force_string_serializer`` features). Without a model there is no SDK default; ours are
    what this library always sent: images kept, reasoning content sent, no cache markers,
    content as a list of parts.
    """

    vision: bool = True
    reasoning_content: bool = True
    cache_prompt: bool = False
    string_content: bool = False


DEFAULT = Options()


@dataclass(slots=True)
class Turn:
    """One provider message before serialising (the SDK's ``Message``)."""

    role: str
    content: list[Part]
    tool_calls: list[MessageToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    reasoning_content: str | None = None
    thinking_blocks: Sequence[dict[str, Any]] = ()  # (shared when empty: most turns have none)

    @property
    def plain_user(self) -> bool:
        return self.role == "user" and self.tool_calls is None and self.tool_call_id is None and self.name is None


# --- events -> turns ------------------------------------------------------------------------


_TEXTS = (TextContent, records.TextRecord)
_IMAGES = (ImageContent, records.ImageRecord)


def _parts(content: Sequence[Content]) -> list[Part]:
    out: list[Part] = []
    for c in content:
        if type(c) is records.TextRecord or isinstance(c, _TEXTS):
            out.append(Text(c.text, c.cache_prompt))
        elif isinstance(c, _IMAGES):
            out.append(Image(list(c.image_urls), c.cache_prompt))
    return out


def _thinking(blocks: Sequence[Any]) -> list[dict[str, Any]]:
    out = []
    for b in blocks:
        if b.type == "thinking":
            out.append({"type": "thinking", "thinking": b.thinking, "signature": b.signature})
        else:
            out.append({"type": b.type, "data": b.data})
    return out


_NO_METADATA = records.TerminalMetadataRecord()


def result_turn(e: ObservationBase) -> Turn:
    """A result's tool turn (``e``: the event, or its ``records.ObservationRecord`` or
    ``records.TerminalObservationRecord``)."""
    kind = e.kind
    if kind == "ObservationEvent":
        obs = e.observation  # type: ignore[attr-defined]
        if type(obs) is records.TerminalRecord:
            meta = obs.metadata or _NO_METADATA
            texts = obs.content
            output = texts[0].text if len(texts) == 1 else "".join([t.text for t in texts])
            content = observations.terminal_parts(output, meta.prefix, meta.suffix, meta.working_dir,
                                                  meta.py_interpreter_path, meta.exit_code,
                                                  obs.full_output_save_dir, obs.is_error)
        else:
            content = observations.render(obs)
        if e.extended_content:  # type: ignore[attr-defined]
            content = content + _parts(e.extended_content)  # type: ignore[attr-defined]
    elif kind == "UserRejectObservation":
        content = [Text(f"Action rejected: {e.rejection_reason}")]  # type: ignore[attr-defined]
    elif kind == "AgentErrorEvent":
        content = [Text(e.error)]  # type: ignore[attr-defined]
    else:  # pragma: no cover - every result kind is handled above
        content = []
    return Turn("tool", content, None, e.tool_call_id, e.tool_name)


def batch_turn(batch: Sequence[ActionEvent]) -> Turn:
    """A batch's assistant turn (``batch``: the events, or their ``records.ActionRecord``)."""
    first = batch[0]
    blocks = first.thinking_blocks
    calls = [first.tool_call] if len(batch) == 1 else [a.tool_call for a in batch]
    # (role, content, tool_calls, tool_call_id, name, reasoning_content, thinking_blocks)
    return Turn("assistant", _parts(first.thought), calls, None, None, first.reasoning_content,
                _thinking(blocks) if blocks else ())


def single_turn(e: Event) -> Turn | None:
    if isinstance(e, SystemPromptEvent):
        return Turn("system", _parts([e.system_prompt] + ([e.dynamic_context] if e.dynamic_context else [])))
    if isinstance(e, (MessageEvent, records.MessageRecord)):
        m = e.llm_message
        return Turn(
            m.role,
            _parts(list(m.content) + list(e.extended_content)),
            tool_calls=list(m.tool_calls) if m.tool_calls is not None else None,
            tool_call_id=m.tool_call_id,
            name=m.name,
            reasoning_content=m.reasoning_content,
            thinking_blocks=_thinking(m.thinking_blocks),
        )
    if isinstance(e, CondensationSummaryEvent):
        return Turn("user", [Text(e.summary)])
    if isinstance(e, PinnedContextEvent):
        return Turn("user", [Text(e.text)])
    if isinstance(e, RecallObservation):
        return Turn("user", [Text(e.content)])
    if isinstance(e, RecallAction):
        return None  # the legacy agent never showed its recall requests to the model
    return None


def _add(turns: list[Turn], turn: Turn) -> None:
    if turns and turns[-1].plain_user and turn.plain_user:
        last = turns[-1]
        turns[-1] = Turn(last.role, last.content + turn.content, reasoning_content=last.reasoning_content,
                         thinking_blocks=last.thinking_blocks)
    else:
        turns.append(turn)


def renderable(kind: str, payload: str, seq: int) -> tuple[Any, Event | None, str | None]:
    """What a stored event's message is made of, from its JSON, the event when that is what
    it took, and the tool call id it holds (so that the view's facts share the string): an
    action's or a message's record, a result's rendered tool turn (an observation's
    observation is not kept), or the decoded event (the other kinds, a few in any view, and
    a JSON of a shape the record does not read)."""
    decoder = records.DECODERS.get(kind)
    if decoder is None:
        try:
            result = records.RESULTS.get(kind)
            if result is not None:
                record = result.decode(payload)
                return result_turn(record), None, record.tool_call_id
            if kind == "MessageEvent":
                return records.MESSAGE.decode(payload), None, None
        except msgspec.ValidationError:
            pass  # (not the shape the record reads: decoded as the event)
        event = decode(kind, payload, seq)
        return event, event, None
    if kind == "ObservationEvent":
        if payload.rfind(records.TERMINAL_KIND) >= 0:  # (from the end, where the SDK writes it)
            try:
                terminal = records.TERMINAL.decode(payload)
                return result_turn(terminal), None, terminal.tool_call_id
            except msgspec.ValidationError:
                pass  # (not the shape the record reads: read as a dict)
        record = decoder.decode(payload)
        return result_turn(record), None, record.tool_call_id
    record = decoder.decode(payload)
    return record, None, record.tool_call.id


def shown(item: Item) -> Any:
    """What an item's message is made of: the event itself, or for a stored one, what
    ``renderable`` makes of its JSON, made on first use and kept (a long view's item lets its
    JSON go then: the event, if read later, is read from the store)."""
    if type(item) is not Pending:
        return item
    made = item.shown
    if made is None:
        if item.payload is None or (item.event is not None and item.kind not in records.DECODERS):
            made = item.event  # (JSON let go unrendered: decoded by ``stored.decode_unrendered``)
            if made is None:  # pragma: no cover - View.to_messages decodes those first
                raise RuntimeError(f"event {item.seq} of this view has neither its JSON nor its event")
        else:
            made, event, call_id = renderable(item.kind, item.payload, item.seq)  # type: ignore[arg-type]
            if item.event is None:
                item.event = event
            if call_id == item.tool_call_id:
                item.tool_call_id = call_id  # one string, not two
        item.shown = made
        if item.long:
            item.payload = None
    return made


def events_to_turns(events: Sequence[Item], after: Sequence[Turn] = ()) -> list[Turn]:
    """The turns for ``events`` (events, or a view's items: ``stored.Pending`` ones are
    rendered from what they show, never decoded); with ``after``, appended to those
    (merging at the seam)."""
    results: dict[str, int] = {}
    result_kinds = OBSERVATION_KINDS
    for i, f in enumerate(events):
        if f.kind in result_kinds:
            results.setdefault(f.tool_call_id, i)
    used: set[int] = set()
    turns: list[Turn] = list(after)
    n = len(events)
    i = 0
    while i < n:
        f = events[i]
        if i in used:
            i += 1
            continue
        if f.kind == "ActionEvent":
            rid = f.llm_response_id
            j = i + 1
            while j < n and events[j].kind == "ActionEvent" and events[j].llm_response_id == rid:
                j += 1
            if j == i + 1:  # a batch of one call (most of them): what follows, without its sets
                k = results.get(f.tool_call_id)
                if k is not None:
                    turns.append(batch_turn([shown(f)]))  # (never a plain user turn to merge)
                    if k not in used:
                        used.add(k)
                        made = shown(events[k])
                        turns.append(made if type(made) is Turn else result_turn(made))
                        if k == j:
                            j += 1  # its result, next to it: taken
                i = j
                continue
            # A call without a result would be rejected by the provider: leave it out.
            answered = [k for k in range(i, j) if events[k].tool_call_id in results]
            if answered:
                _add(turns, batch_turn([shown(events[k]) for k in answered]))
                # In the order they happened (an invalid call's error comes before the
                # results of the calls that ran, as the SDK sends them).
                for k in sorted({results[events[a].tool_call_id] for a in answered} - used):
                    used.add(k)
                    made = shown(events[k])
                    _add(turns, made if type(made) is Turn else result_turn(made))
            i = j
            continue
        if f.kind in OBSERVATION_KINDS:
            i += 1  # a result whose call is not in the view has nothing to answer
            continue
        turn = single_turn(shown(events[i]))
        if turn is not None:
            _add(turns, turn)
        i += 1
    return turns


# --- turns -> provider messages -------------------------------------------------------------

_EPHEMERAL = {"type": "ephemeral"}


def _cache_marks(turns: Sequence[Turn]) -> dict[int, dict[int, bool]]:
    """The SDK's prompt-caching breakpoints: {turn index: {part index: marked}}."""
    marks: dict[int, dict[int, bool]] = {}
    if turns and turns[0].role == "system" and turns[0].content:
        marks[0] = {0: True}
        if len(turns[0].content) >= 2:
            marks[0][1] = False  # the dynamic context stays unmarked (shared static prefix)
    for i in range(len(turns) - 1, -1, -1):
        if turns[i].role in ("user", "tool"):
            if turns[i].content:
                marks.setdefault(i, {})[len(turns[i].content) - 1] = True
            break
    return marks


def _tool_text(text: str) -> str:
    return observations.truncate(text, observations.TEXT_LIMIT)


def serialize(turn: Turn, options: Options = DEFAULT, marks: dict[int, bool] | None = None) -> Msg:
    """One turn as the SDK's ``Message.to_chat_dict`` writes it for these switches."""
    if not marks and not options.string_content:
        fast = _serialize_plain(turn, options)
        if fast is not None:
            return fast
    marks = marks or {}
    has_image = any(isinstance(p, Image) for p in turn.content)
    msg: Msg
    if not options.string_content or (options.vision and has_image):
        content: list[dict[str, Any]] = []
        tool_cached = False
        for j, p in enumerate(turn.content):
            cached = marks.get(j, p.cache)
            if cached and turn.role == "tool":
                tool_cached = True  # litellm wants a tool message's marker on the message
            if isinstance(p, Text):
                items: list[dict[str, Any]] = [{"type": "text", "text": _tool_text(p.text) if turn.role == "tool" else p.text}]
            else:
                if not options.vision:
                    continue  # with vision off, images are dropped
                items = [{"type": "image_url", "image_url": {"url": u}} for u in p.urls]
            if cached and items and turn.role != "tool":
                items[-1]["cache_control"] = dict(_EPHEMERAL)
            content.extend(items)
        msg = {"content": content, "role": turn.role}
        if tool_cached:
            msg["cache_control"] = dict(_EPHEMERAL)
        if turn.role == "assistant" and turn.thinking_blocks:
            msg["thinking_blocks"] = [dict(b) for b in turn.thinking_blocks]
    else:
        text = "\n".join(p.text for p in turn.content if isinstance(p, Text))
        msg = {"content": _tool_text(text) if turn.role == "tool" else text, "role": turn.role}

    if turn.role == "assistant" and turn.tool_calls:
        msg["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in turn.tool_calls
        ]
        _drop_empty_text(msg)
    elif turn.role == "assistant" and msg.get("content") == []:
        msg["content"] = ""
    if turn.role == "tool" and turn.tool_call_id is not None:
        msg["tool_call_id"] = turn.tool_call_id
        msg["name"] = turn.name
    if options.reasoning_content and turn.reasoning_content:
        msg["reasoning_content"] = turn.reasoning_content
    return msg


def _serialize_plain(turn: Turn, options: Options) -> Msg | None:
    """``serialize`` of the two turns most of a long view is made of, a tool result of one
    text and an assistant's tool calls with text only, none of them marked; the general path
    without its checks (the same message, keys in the same order). None for any other turn.
    (Loops rather than comprehensions: on Python 3.11 each comprehension is a call.)"""
    parts = turn.content
    role = turn.role
    if role == "tool":
        if len(parts) != 1:
            return None
        part = parts[0]
        if type(part) is not Text or part.cache:
            return None
        text = part.text
        if len(text) > observations.TEXT_LIMIT:
            text = _tool_text(text)
        if turn.tool_call_id is not None:
            msg: Msg = {"content": [{"type": "text", "text": text}], "role": "tool",
                        "tool_call_id": turn.tool_call_id, "name": turn.name}
        else:
            msg = {"content": [{"type": "text", "text": text}], "role": "tool"}
    elif role == "assistant" and turn.tool_calls:
        content = []
        for part in parts:
            if type(part) is not Text or part.cache:
                return None
            text = part.text
            if text and not text.isspace():  # (``_drop_empty_text``; ``strip`` would copy the text)
                content.append({"type": "text", "text": text})
        msg = {"content": content, "role": "assistant"} if content else {"role": "assistant"}
        if turn.thinking_blocks:
            msg["thinking_blocks"] = [dict(b) for b in turn.thinking_blocks]
        calls = []
        for c in turn.tool_calls:
            calls.append({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}})
        msg["tool_calls"] = calls
    else:
        return None
    if options.reasoning_content and turn.reasoning_content:
        msg["reasoning_content"] = turn.reasoning_content
    return msg


def _drop_empty_text(msg: Msg) -> None:
    """An assistant tool-call message: blank text parts go, and ``content`` if nothing is left."""
    content = msg.get("content")
    if isinstance(content, str):
        if not content.strip():
            del msg["content"]
        return
    kept = [c for c in content or [] if not (c.get("type") == "text" and not c["text"].strip())]
    if kept:
        msg["content"] = kept
    else:
        msg.pop("content", None)


def turns_to_messages(turns: Sequence[Turn], options: Options = DEFAULT) -> list[Msg]:
    if options.cache_prompt:
        marks = _cache_marks(turns)
        return [serialize(t, options, marks.get(i)) for i, t in enumerate(turns)]
    if options.string_content:
        return [serialize(t, options) for t in turns]
    out = []
    for t in turns:  # (``serialize`` without marks, its fast path first)
        msg = _serialize_plain(t, options)
        out.append(msg if msg is not None else serialize(t, options))
    return out


#: A view of more turns than this keeps no serialized copy of its messages: each call
#: serializes them again from the turns. Copying a kept message costs about a third less
#: than serializing it, which a short view's step saves; a long view's kept copy would be a
#: second set of every message (85 MB at 100k events) and its first call would pay for both.
KEEP_SERIALIZED_UPTO = 4096


@dataclass(frozen=True)
class Serialized:
    """A view's turns serialized once for ``options``, without the prompt-caching marks
    (they move to the newest user or tool turn at every step), handed out as copies; for a
    long view (``KEEP_SERIALIZED_UPTO``), serialized afresh at every call instead."""

    turns: Sequence[Turn]
    options: Options
    unmarked: list[Msg] | None
    flat: list[bool]  # whether a message's parts hold only strings (``_copy_flat`` copies it)

    @classmethod
    def of(cls, turns: Sequence[Turn], options: Options, prior: "Serialized | None" = None) -> "Serialized":
        """``prior``: those of the view this one extends; its messages are reused for the
        turns both share. ``events_to_turns`` makes the extended turns as the prior ones
        plus new ones, and only a merge at the seam replaces the last prior one: so the
        shared ones are found from the seam back, not by a walk over the whole view."""
        if len(turns) > KEEP_SERIALIZED_UPTO:
            return cls(turns, options, None, [])
        reuse = 0
        if prior is not None and prior.options == options and prior.unmarked is not None:
            reuse = min(len(turns), len(prior.turns))
            while reuse and turns[reuse - 1] is not prior.turns[reuse - 1]:
                reuse -= 1
        new = [serialize(t, options) for t in turns[reuse:]]
        if reuse:
            return cls(turns, options, prior.unmarked[:reuse] + new, prior.flat[:reuse] + [_flat(m) for m in new])  # type: ignore[index, union-attr]
        return cls(turns, options, new, [_flat(m) for m in new])

    def messages(self) -> list[Msg]:
        """Fresh messages (the caller may change them): the marked turns serialized again,
        the others copied."""
        if self.unmarked is None:
            return turns_to_messages(self.turns, self.options)
        if self.options.cache_prompt:
            marks = _cache_marks(self.turns)
            return [serialize(self.turns[i], self.options, marks[i]) if i in marks
                    else _copy_flat(m) if flat else _copy(m)
                    for i, (m, flat) in enumerate(zip(self.unmarked, self.flat))]
        return [_copy_flat(m) if flat else _copy(m) for m, flat in zip(self.unmarked, self.flat)]


_FLAT_KEYS = frozenset({"content", "role", "name", "tool_call_id", "tool_calls", "reasoning_content"})


def _flat(msg: Msg) -> bool:
    content = msg.get("content")
    return msg.keys() <= _FLAT_KEYS and (type(content) is not list or all(p.keys() <= {"type", "text"} for p in content))


def _copy_flat(msg: Msg) -> Msg:
    """``_copy`` of a message whose parts are {type, text} and that has no markers or
    thinking blocks (nearly all of them): half the checks."""
    out = msg.copy()
    content = out.get("content")
    if type(content) is list:
        # (one part, one call: most messages; a comprehension is a call of its own on 3.11)
        out["content"] = [content[0].copy()] if len(content) == 1 else [p.copy() for p in content]
    calls = out.get("tool_calls")
    if calls is not None:
        if len(calls) == 1:
            call = calls[0].copy()
            call["function"] = call["function"].copy()
            out["tool_calls"] = [call]
        else:
            out["tool_calls"] = [{**c, "function": c["function"].copy()} for c in calls]
    return out


def _copy(msg: Msg) -> Msg:
    """A copy of a serialized message that shares only its strings (``copy.deepcopy`` of the
    shapes ``serialize`` writes, at a fraction of its cost)."""
    out = msg.copy()
    content = out.get("content")
    if type(content) is list:
        out["content"] = [_copy(p) if "image_url" in p or "cache_control" in p else p.copy() for p in content]
    calls = out.get("tool_calls")
    if calls is not None:
        out["tool_calls"] = [{**c, "function": c["function"].copy()} for c in calls]
    for key in ("cache_control", "image_url"):
        if key in out:
            out[key] = out[key].copy()
    if "thinking_blocks" in out:
        out["thinking_blocks"] = [b.copy() for b in out["thinking_blocks"]]
    return out


def events_to_messages(events: Sequence[Event], options: Options = DEFAULT) -> list[Msg]:
    """The provider messages for ``events`` (a view's events, in order)."""
    return turns_to_messages(events_to_turns(events), options)


# --- one event's messages (token counting) ---------------------------------------------------


def result_message(e: ObservationBase) -> Msg:
    return serialize(result_turn(e))


def batch_message(batch: Sequence[ActionEvent]) -> Msg:
    return serialize(batch_turn(batch))


def single_message(e: Event) -> Msg | None:
    turn = single_turn(e)
    return serialize(turn) if turn is not None else None


def observation_text(e: ObservationEvent) -> list[dict[str, Any]]:
    """An observation's stored content parts (what the tool returned, not rendered); tools
    that carry no ``content`` are shown as JSON. The summarizers read this."""
    content = e.observation.get("content")
    parts: list[dict[str, Any]] = []
    if isinstance(content, list):
        for item in content:
            if isinstance(item, dict) and item.get("type", "text") == "text":
                parts.append({"type": "text", "text": str(item.get("text", ""))})
            elif isinstance(item, dict) and item.get("type") == "image":
                parts.extend({"type": "image_url", "image_url": {"url": u}} for u in item.get("image_urls", []))
    elif isinstance(content, str):
        parts.append({"type": "text", "text": content})
    else:
        shown = {k: v for k, v in e.observation.items() if k != "kind"}
        parts.append({"type": "text", "text": json.dumps(shown, ensure_ascii=False)})
    return parts + [{"type": "text", "text": c.text} for c in e.extended_content]
