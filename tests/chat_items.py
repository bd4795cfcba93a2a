"""Hypothesis strategies for chat-completions messages and Responses API items, and the
checks a provider makes of a list of them (used by tests/test_chat*.py).

The conversations generated are ones an agent loop makes: every tool call answered by a
result right after its call's message (or its batch of calls), texts of any characters
(NUL included; ids without one, as no provider makes one), and extra fields of any JSON on
any item, which must come back as they were.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

Item = dict[str, Any]

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
#: Texts without U+0000, for conversations that are condensed: an offline summary quotes the
#: user's words, and PostgreSQL cannot store a summary holding a NUL in its column (a raw
#: driver error today, whoever wrote the events; the round trips keep NUL in their texts).
SUMMARIZED_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
KEY = st.text("abcdefghij_", min_size=1, max_size=6).filter(lambda k: k not in ("role", "type", "content"))
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEY, inner, max_size=3),
    max_leaves=6,
)
EXTRA = st.dictionaries(st.sampled_from(["x_meta", "provider_specific_fields", "cache", "annotations_"]), JSON,
                        max_size=2)


class Ids:
    """Fresh call ids within one generated conversation."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, prefix: str = "call") -> str:
        self.n += 1
        return f"{prefix}_{self.n}"


def _with(extra: dict[str, Any], item: Item) -> Item:
    return {**item, **{k: v for k, v in extra.items() if k not in item}}


@st.composite
def chat_content(draw: st.DrawFn, *, images: bool = True, none: bool = False, text: Any = TEXT) -> Any:
    kinds = ["text", "parts"] + (["none"] if none else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "none":
        return None
    if kind == "text":
        return draw(text)
    part = st.builds(lambda t: {"type": "text", "text": t}, text)
    if images:
        part = part | st.builds(lambda u: {"type": "image_url", "image_url": {"url": f"https://img/{u}.png"}},
                                st.integers(0, 99))
    return draw(st.lists(part, min_size=1, max_size=3))


@st.composite
def chat_turn(draw: st.DrawFn, ids: Ids, text: Any = TEXT) -> list[Item]:
    """A user message, an assistant message, or an assistant's tool calls and their results."""
    kind = draw(st.sampled_from(["user", "assistant", "tools", "tools"]))
    extra = draw(EXTRA)
    if kind == "user":
        item: Item = {"role": "user", "content": draw(chat_content(text=text))}
        if draw(st.booleans()):
            item["name"] = draw(st.sampled_from(["alice", "bob"]))
        return [_with(extra, item)]
    if kind == "assistant":
        item = {"role": "assistant", "content": draw(chat_content(images=False, text=text))}
        if draw(st.booleans()):
            item["reasoning_content"] = draw(text)
        if draw(st.booleans()):
            item["thinking_blocks"] = [{"type": "thinking", "thinking": draw(text), "signature": "sig" + draw(text)}]
        return [_with(extra, item)]
    calls = [{"id": ids(), "type": "function",
              "function": {"name": draw(st.sampled_from(["terminal", "read", "grep"])),
                           "arguments": json.dumps({"command": draw(text)})}}
             for _ in range(draw(st.integers(1, 3)))]
    message: Item = {"role": "assistant", "content": draw(chat_content(images=False, none=True, text=text)), "tool_calls": calls}
    if draw(st.booleans()):
        message["thinking_blocks"] = [{"type": "thinking", "thinking": draw(text), "signature": "s"}]
    results = [_with(draw(EXTRA), {"role": "tool", "tool_call_id": c["id"], "content": draw(chat_content(text=text))})
               for c in calls]
    return [_with(extra, message), *draw(st.permutations(results))]


@st.composite
def chat_conversation(draw: st.DrawFn, min_turns: int = 1, max_turns: int = 12, text: Any = TEXT) -> list[list[Item]]:
    """Turns of chat-completions messages, a system message first or not."""
    ids = Ids()
    turns = draw(st.lists(chat_turn(ids, text), min_size=min_turns, max_size=max_turns))
    if draw(st.booleans()):
        turns.insert(0, [_with(draw(EXTRA), {"role": draw(st.sampled_from(["system", "developer"])),
                                              "content": draw(chat_content(images=False, text=text))})])
    return turns


@st.composite
def responses_turn(draw: st.DrawFn, ids: Ids, text: Any = TEXT) -> list[Item]:
    """Responses API input items of one turn: a user message, the model's output (reasoning,
    a message, calls), the calls' outputs, or an item this library does not know."""
    kind = draw(st.sampled_from(["user", "easy", "message", "reasoning", "calls", "calls", "custom", "computer",
                                 "unknown"]))
    extra = draw(EXTRA)
    if kind == "user":
        parts = draw(st.lists(
            st.builds(lambda t: {"type": "input_text", "text": t}, text)
            | st.builds(lambda u: {"type": "input_image", "image_url": f"https://img/{u}.png", "detail": "auto"},
                        st.integers(0, 9))
            | st.just({"type": "input_file", "file_id": "file-1"}),
            min_size=1, max_size=3))
        return [_with(extra, {"type": "message", "role": "user", "content": parts})]
    if kind == "easy":
        return [_with(extra, {"role": draw(st.sampled_from(["user", "developer", "system"])), "content": draw(text)})]
    if kind == "message":
        content = [{"type": "output_text", "text": draw(text), "annotations": []}]
        if draw(st.booleans()):
            content.append({"type": "refusal", "refusal": draw(text)})
        return [_with(extra, {"type": "message", "id": ids("msg"), "role": "assistant", "status": "completed",
                              "content": content})]
    reasoning = [{"type": "reasoning", "id": ids("rs"), "summary": [{"type": "summary_text", "text": draw(text)}]
                  * draw(st.integers(0, 2)), "encrypted_content": draw(text)}] if draw(st.booleans()) else []
    if kind == "reasoning":
        return [*reasoning, _with(extra, {"type": "message", "id": ids("msg"), "role": "assistant",
                                          "content": [{"type": "output_text", "text": draw(text)}]})]
    if kind == "unknown":
        return [_with(extra, draw(st.sampled_from([
            {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}},
            {"type": "item_reference", "id": "msg_0"},
            {"type": "compaction", "encrypted_content": "enc"},
            {"type": "x_future_item", "payload": [1, 2.5, None, {"k": "v"}]},
        ])))]
    if kind == "custom":
        call = ids()
        return [*reasoning, _with(extra, {"type": "custom_tool_call", "call_id": call, "name": "patch",
                                          "input": draw(text), "id": ids("ctc")}),
                {"type": "custom_tool_call_output", "call_id": call, "output": draw(text)}]
    if kind == "computer":
        call = ids()
        return [*reasoning, _with(extra, {"type": "computer_call", "call_id": call, "id": ids("cu"),
                                          "action": {"type": "click", "x": 1, "y": 2}, "pending_safety_checks": [],
                                          "status": "completed"}),
                {"type": "computer_call_output", "call_id": call,
                 "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AAAA"}}]
    calls = [{"type": "function_call", "call_id": ids(), "name": "terminal", "arguments": draw(text),
              "id": ids("fc"), "status": "completed"} for _ in range(draw(st.integers(1, 3)))]
    outputs = [_with(draw(EXTRA), {"type": "function_call_output", "call_id": c["call_id"],
                                   "output": draw(text | st.lists(st.builds(
                                       lambda t: {"type": "input_text", "text": t}, text), max_size=2))})
               for c in calls]
    return [*reasoning, *(_with(extra, c) for c in calls), *draw(st.permutations(outputs))]


@st.composite
def responses_conversation(draw: st.DrawFn, min_turns: int = 1, max_turns: int = 12,
                           text: Any = TEXT) -> list[list[Item]]:
    ids = Ids()
    return draw(st.lists(responses_turn(ids, text), min_size=min_turns, max_size=max_turns))


def chunks(draw: st.DrawFn, items: list[Item]) -> list[list[Item]]:
    """``items`` cut into consecutive batches of any sizes (how they are appended)."""
    out: list[list[Item]] = []
    i = 0
    while i < len(items):
        n = draw(st.integers(1, max(1, len(items) - i)))
        out.append(items[i:i + n])
        i += n
    return out


# --- what a provider checks ------------------------------------------------------------------


def calls_of(item: Item) -> list[str]:
    if item.get("role") == "assistant" and item.get("tool_calls"):
        return [c["id"] for c in item["tool_calls"]]
    if str(item.get("type", "")).endswith("_call") and "call_id" in item:
        return [item["call_id"]]
    return []


def answers(item: Item) -> str | None:
    if item.get("role") == "tool":
        return item["tool_call_id"]
    if str(item.get("type", "")).endswith("_output") and "call_id" in item:
        return item["call_id"]
    return None


def provider_problems(items: list[Item]) -> list[str]:
    """What an OpenAI-style provider would refuse: a result without its call before it; a
    call without its result; for chat messages, an assistant's tool calls not followed
    directly by their tool messages; a reasoning item not followed by another item."""
    problems: list[str] = []
    made: set[str] = set()
    open_calls: dict[str, int] = {}
    chat_open: set[str] = set()  # a chat assistant's calls still waiting for their tool messages
    for i, item in enumerate(items):
        answered = answers(item)
        if answered is not None:
            if answered not in made:
                problems.append(f"{i}: result of {answered} without its call before it")
            open_calls.pop(answered, None)
            if item.get("role") == "tool":
                if answered not in chat_open:
                    problems.append(f"{i}: tool message {answered} not right after its assistant message")
                chat_open.discard(answered)
            continue
        if chat_open:
            problems.append(f"{i}: calls {sorted(chat_open)} not answered before this item")
            chat_open.clear()
        for call in calls_of(item):
            made.add(call)
            open_calls[call] = i
        if item.get("role") == "assistant" and item.get("tool_calls"):
            chat_open = set(calls_of(item))
        if item.get("type") == "reasoning" and (i + 1 == len(items)):
            problems.append(f"{i}: a reasoning item last")
    problems += [f"{i}: call {c} never answered" for c, i in open_calls.items()]
    return problems
