"""The shape of ``View.to_messages()``: what a provider receives.

Every case builds its view twice, in memory (``View.from_events``) and through a real SQLite
file (``conv.view()``), and both must give the same messages.
"""

from __future__ import annotations

import uuid

import pytest

from openhands_memory.events import (
    Event,
    Message,
    MessageEvent,
    RedactedThinkingBlock,
    TextContent,
    ThinkingBlock,
)
from openhands_memory.view.messages import events_to_messages
from openhands_memory.conversation import EventStore
from openhands_memory.view import View

from . import factories as f


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory):
    s = EventStore(tmp_path_factory.mktemp("messages") / "messages.db")
    yield s
    s.close()


@pytest.fixture
def messages_of(shared_store):
    """events -> messages, checked to agree between the in-memory and the SQL view."""

    def run(make):
        memory = View.from_events(make()).to_messages()
        conv = shared_store.create_conversation(str(uuid.uuid4()))
        conv.append_many(make())
        sql = conv.view().to_messages()
        assert sql == memory
        assert_tool_calls_answered(memory)
        return memory

    return run


def texts(msg: dict) -> list[str]:
    return [p["text"] for p in msg["content"] or [] if p.get("type") == "text"]


def roles(messages: list[dict]) -> list[str]:
    return [m["role"] for m in messages]


def assert_tool_calls_answered(messages: list[dict]) -> None:
    """Every assistant tool call is answered by a tool message before the next non-tool
    message, and every tool message answers a call of the assistant turn just before it."""
    open_calls: set[str] = set()
    turn_calls: set[str] = set()
    for m in messages:
        if m["role"] == "tool":
            assert m["tool_call_id"] in turn_calls, f"tool result without its call: {m}"
            assert m["tool_call_id"] in open_calls, f"second result for one call: {m}"
            open_calls.discard(m["tool_call_id"])
            continue
        assert not open_calls, f"tool calls {open_calls} unanswered before {m['role']} message"
        turn_calls = set()
        if m["role"] == "assistant" and m.get("tool_calls"):
            turn_calls = {c["id"] for c in m["tool_calls"]}
            assert len(turn_calls) == len(m["tool_calls"])
            open_calls = set(turn_calls)
    assert not open_calls, f"tool calls {open_calls} unanswered at the end"


def with_reasoning(e: Event, reasoning: str) -> Event:
    return e.model_copy(update={"reasoning_content": reasoning})


# --- ordering and roles ---------------------------------------------------------------------


def test_system_first(messages_of):
    msgs = messages_of(lambda: [f.system("be careful"), f.user("hi"), f.agent_says("hello")])
    assert roles(msgs) == ["system", "user", "assistant"]
    assert texts(msgs[0]) == ["be careful"]
    assert texts(msgs[1]) == ["hi"]
    assert texts(msgs[2]) == ["hello"]
    assert "tool_calls" not in msgs[2]


def test_system_with_dynamic_context(messages_of):
    def make():
        s = f.system("static").model_copy(update={"dynamic_context": TextContent(text="today")})
        return [s, f.user("hi")]

    msgs = messages_of(make)
    assert roles(msgs) == ["system", "user"]
    assert texts(msgs[0]) == ["static", "today"]


def test_empty_view_has_no_messages(messages_of):
    assert messages_of(lambda: []) == []


# --- batches --------------------------------------------------------------------------------


def parallel_batch() -> list[Event]:
    first = with_reasoning(f.action("r1", "c1", think=True, thought="Let me look around."), "because")
    return [
        f.system(),
        f.user("fix the bug"),
        first,
        f.action("r1", "c2", args={"command": "ls"}),
        f.action("r1", "c3", tool="file_editor", args={"path": "/a.py"}),
        f.observation("c1", "out1"),
        f.observation("c2", "out2"),
        f.observation("c3", "out3", tool="file_editor"),
    ]


def test_one_assistant_message_per_batch(messages_of):
    msgs = messages_of(parallel_batch)
    assert roles(msgs) == ["system", "user", "assistant", "tool", "tool", "tool"]
    a = msgs[2]
    assert [c["id"] for c in a["tool_calls"]] == ["c1", "c2", "c3"]
    assert [c["function"]["name"] for c in a["tool_calls"]] == ["terminal", "terminal", "file_editor"]
    assert a["tool_calls"][1]["function"]["arguments"] == '{"command": "ls"}'
    assert all(c["type"] == "function" for c in a["tool_calls"])
    # the first action's thought, thinking blocks and reasoning
    assert texts(a) == ["Let me look around."]
    assert a["thinking_blocks"] == [
        {"type": "thinking", "thinking": "thinking about c1", "signature": "sig"}
    ]
    assert a["reasoning_content"] == "because"


def test_one_tool_message_per_result(messages_of):
    msgs = messages_of(parallel_batch)
    tools = msgs[3:]
    assert [m["tool_call_id"] for m in tools] == ["c1", "c2", "c3"]
    assert [texts(m) for m in tools] == [["out1"], ["out2"], ["out3"]]
    assert [m["name"] for m in tools] == ["terminal", "terminal", "file_editor"]


def test_single_action_batch(messages_of):
    msgs = messages_of(lambda: [f.user("go"), f.action("r1", "c1", thought="one"), f.observation("c1")])
    assert roles(msgs) == ["user", "assistant", "tool"]
    assert texts(msgs[1]) == ["one"]
    assert [c["id"] for c in msgs[1]["tool_calls"]] == ["c1"]
    assert "thinking_blocks" not in msgs[1]
    assert "reasoning_content" not in msgs[1]


def test_assistant_without_thought_omits_content(messages_of):
    # As the SDK: a tool-call turn with no text sends no ``content`` key at all.
    msgs = messages_of(lambda: [f.user("go"), f.action("r1", "c1"), f.observation("c1")])
    assert "content" not in msgs[1]
    assert msgs[1]["tool_calls"][0]["id"] == "c1"


def test_redacted_thinking_is_kept(messages_of):
    def make():
        a = f.action("r1", "c1").model_copy(update={"thinking_blocks": [RedactedThinkingBlock(data="xyz")]})
        return [f.user("go"), a, f.observation("c1")]

    msgs = messages_of(make)
    assert msgs[1]["thinking_blocks"] == [{"type": "redacted_thinking", "data": "xyz"}]


def test_two_batches_two_assistant_messages(messages_of):
    msgs = messages_of(
        lambda: [
            f.user("go"),
            f.action("r1", "c1"), f.action("r1", "c2"), f.observation("c1"), f.observation("c2"),
            f.action("r2", "c3"), f.observation("c3"),
        ]
    )
    assert roles(msgs) == ["user", "assistant", "tool", "tool", "assistant", "tool"]
    assert [c["id"] for c in msgs[1]["tool_calls"]] == ["c1", "c2"]
    assert [c["id"] for c in msgs[4]["tool_calls"]] == ["c3"]


def test_results_out_of_order_follow_their_batch(messages_of):
    msgs = messages_of(
        lambda: [
            f.user("go"), f.action("r1", "c1"), f.action("r1", "c2"), f.action("r1", "c3"),
            f.observation("c3"), f.observation("c1"), f.observation("c2"),
        ]
    )
    assert roles(msgs) == ["user", "assistant", "tool", "tool", "tool"]
    assert {m["tool_call_id"] for m in msgs[2:]} == {"c1", "c2", "c3"}


# --- result kinds ---------------------------------------------------------------------------


def test_rejection_and_error_become_tool_messages(messages_of):
    msgs = messages_of(
        lambda: [
            f.user("go"),
            f.action("r1", "c1"), f.action("r1", "c2"), f.action("r1", "c3"),
            f.rejection("c1"), f.error("c2", "no such file"), f.observation("c3", "fine"),
        ]
    )
    assert roles(msgs) == ["user", "assistant", "tool", "tool", "tool"]
    by_call = {m["tool_call_id"]: m for m in msgs[2:]}
    assert set(by_call) == {"c1", "c2", "c3"}
    assert "no" in " ".join(texts(by_call["c1"]))  # the rejection reason
    assert texts(by_call["c2"]) == ["no such file"]
    assert texts(by_call["c3"]) == ["fine"]


def test_interleaved_error_batch(messages_of):
    # The agent's emission order for an invalid call: A1(err) E1 A2 O2 (same response id).
    msgs = messages_of(
        lambda: [
            f.user("go"), f.action("r1", "c1"), f.error("c1", "bad json"),
            f.action("r1", "c2"), f.observation("c2"),
        ]
    )
    assert_tool_calls_answered(msgs)
    calls = [c["id"] for m in msgs if m["role"] == "assistant" for c in m["tool_calls"]]
    assert calls == ["c1", "c2"]
    assert [m["tool_call_id"] for m in msgs if m["role"] == "tool"] == ["c1", "c2"]


def test_duplicate_result_sends_the_first(messages_of):
    msgs = messages_of(
        lambda: [f.user("go"), f.action("r1", "c1"), f.error("c1", "lost"), f.observation("c1", "late")]
    )
    assert roles(msgs) == ["user", "assistant", "tool"]
    assert texts(msgs[2]) == ["lost"]


def test_observation_without_text_content_is_shown_as_json(messages_of):
    def make():
        o = f.observation("c1").model_copy(update={"observation": {"kind": "X", "exit_code": 3}})
        return [f.user("go"), f.action("r1", "c1"), o]

    msgs = messages_of(make)
    assert '"exit_code": 3' in texts(msgs[2])[0]


# --- summary and merging --------------------------------------------------------------------


def test_summary_is_a_user_message(messages_of):
    msgs = messages_of(
        lambda: [
            f.system(), f.agent_says("a"), f.agent_says("b"), f.agent_says("c"),
            f.condensation(ranges=[(1, 2)], summary="what happened", offset=1),
        ]
    )
    assert roles(msgs) == ["system", "user", "assistant"]
    assert texts(msgs[1]) == ["what happened"]
    assert texts(msgs[2]) == ["c"]


def test_adjacent_user_messages_merge(messages_of):
    msgs = messages_of(lambda: [f.system(), f.user("one"), f.user("two"), f.agent_says("ok"), f.user("three")])
    assert roles(msgs) == ["system", "user", "assistant", "user"]
    assert texts(msgs[1]) == ["one", "two"]
    assert texts(msgs[3]) == ["three"]


def test_summary_and_user_message_merge(messages_of):
    msgs = messages_of(
        lambda: [
            f.system(), f.user("old"), f.user("task"),
            f.condensation(ranges=[(1, 1)], summary="summary text", offset=1),
        ]
    )
    assert roles(msgs) == ["system", "user"]
    assert texts(msgs[0]) == ["You are a careful coding agent."]
    assert texts(msgs[1]) == ["summary text", "task"]


def test_named_user_message_does_not_merge(messages_of):
    def make():
        named = MessageEvent(
            source="user",
            llm_message=Message(role="user", content=[TextContent(text="b")], name="bob"),
        )
        return [f.user("a"), named, f.user("c")]

    msgs = messages_of(make)
    # A named user turn is not merged with its neighbours; the SDK sends ``name`` for tool
    # results only, so the name itself does not reach the provider.
    assert roles(msgs) == ["user", "user", "user"]
    assert texts(msgs[1]) == ["b"] and "name" not in msgs[1]


def test_agent_message_keeps_its_thinking(messages_of):
    def make():
        m = MessageEvent(
            source="agent",
            llm_message=Message(
                role="assistant",
                content=[TextContent(text="done")],
                thinking_blocks=[ThinkingBlock(thinking="hmm", signature="s")],
                reasoning_content="r",
            ),
            llm_response_id="resp",
        )
        return [f.user("go"), m]

    msgs = messages_of(make)
    assert msgs[1]["thinking_blocks"] == [{"type": "thinking", "thinking": "hmm", "signature": "s"}]
    assert msgs[1]["reasoning_content"] == "r"


def test_extended_content_is_appended(messages_of):
    def make():
        m = f.user("hello").model_copy(update={"extended_content": [TextContent(text="<skill>")]})
        return [m]

    assert texts(messages_of(make)[0]) == ["hello", "<skill>"]


# --- a message between a call and its result ------------------------------------------------


def test_message_between_call_and_result_goes_after_the_results(messages_of):
    msgs = messages_of(
        lambda: [
            f.user("go"), f.action("r1", "c1"), f.action("r1", "c2"), f.user("also check tests"),
            f.observation("c1"), f.observation("c2"), f.agent_says("done"),
        ]
    )
    assert roles(msgs) == ["user", "assistant", "tool", "tool", "user", "assistant"]
    assert texts(msgs[4]) == ["also check tests"]


def test_summary_between_call_and_result_goes_after_the_results(messages_of):
    msgs = messages_of(
        lambda: [
            f.system(), f.user("x"), f.action("r1", "c1"), f.observation("c1"),
            f.condensation(ranges=[(1, 1)], summary="S", offset=2),
        ]
    )
    # the summary sits between a1 and o1 in the view; the provider still gets the pair adjacent
    assert roles(msgs) == ["system", "assistant", "tool", "user"]
    assert texts(msgs[3]) == ["S"]


# --- no unanswered call ever ----------------------------------------------------------------


UNENFORCED = {
    "pending action": [f.user("go"), f.action("r1", "c1")],
    "pending half of a batch": [f.user("go"), f.action("r1", "c1"), f.action("r1", "c2"), f.observation("c2")],
    "orphan result": [f.user("go"), f.observation("c9"), f.user("more")],
    "result before its call": [f.user("go"), f.observation("c1"), f.action("r1", "c1"), f.user("x")],
    "message in the span": [f.action("r1", "c1"), f.user("u"), f.agent_says("a"), f.observation("c1")],
    "duplicate results": [f.action("r1", "c1"), f.error("c1"), f.user("u"), f.observation("c1")],
}


@pytest.mark.parametrize("events", list(UNENFORCED.values()), ids=list(UNENFORCED))
def test_unenforced_lists_never_yield_an_unanswered_call(events):
    # events_to_messages is also handed rewritten (unenforced) views; it must stay valid.
    msgs = events_to_messages(events)
    assert_tool_calls_answered(msgs)
    assert View(events=list(events)).to_messages() == msgs


def test_pending_action_is_left_out(messages_of):
    msgs = messages_of(lambda: [f.user("go"), f.action("r1", "c1", thought="t")])
    assert roles(msgs) == ["user"]
    partial = events_to_messages(UNENFORCED["pending half of a batch"])
    assert roles(partial) == ["user", "assistant", "tool"]
    assert [c["id"] for c in partial[1]["tool_calls"]] == ["c2"]
