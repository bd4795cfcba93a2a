"""What the model is sent for tool results and per-model switches, as the OpenHands SDK sends it.

These run without the SDK; tests/conformance checks the same behaviours against the real SDK.
"""

from __future__ import annotations

import uuid

import pytest

from openhands_memory.condensers import LLMSummarizingCondenser
from openhands_memory.events import (
    Condensation,
    ImageContent,
    Message,
    MessageEvent,
    ObservationEvent,
    TextContent,
)
from openhands_memory.conversation import EventStore
from openhands_memory.view import View

from . import factories as f

NOTICE = (
    "<response clipped><NOTE>Due to the max output limit, only part of the full "
    "response has been shown to you.</NOTE>"
)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    s = EventStore(tmp_path_factory.mktemp("rendering") / "r.db")
    yield s
    s.close()


@pytest.fixture
def send(shared):
    """events -> messages through a stored conversation (checked equal to the in-memory view)."""

    def run(events, **switches):
        conv = shared.create_conversation(str(uuid.uuid4()))
        conv.append_many(events)
        msgs = conv.view().to_messages(**switches)
        assert msgs == View.from_events([e.model_copy() for e in events]).to_messages(**switches)
        return msgs

    return run


def obs(call: str, observation: dict, tool: str = "terminal") -> ObservationEvent:
    return ObservationEvent(tool_name=tool, tool_call_id=call, observation=observation, action_id="a")


def terminal(text: str, **meta) -> dict:
    return {"kind": "TerminalObservation", "content": [{"type": "text", "text": text}], "is_error": False,
            "command": "pytest", "metadata": {"exit_code": -1, "pid": -1, "prefix": "", "suffix": "", **meta}}


def result_texts(msgs: list[dict]) -> list[str]:
    return [p["text"] for m in msgs if m["role"] == "tool" for p in m["content"] if p["type"] == "text"]


def one_result(send, observation: dict, tool: str = "terminal", **switches) -> list[str]:
    return result_texts(send([f.system(), f.user("go"), f.action("r", "c", tool=tool), obs("c", observation, tool)], **switches))


def test_terminal_result_shows_directory_interpreter_and_exit_code(send):
    o = terminal("1 failed\n", working_dir="/w", py_interpreter_path="/usr/bin/python3", exit_code=1,
                 prefix="[Below is the output of the previous command.]\n", suffix="\n[still running]")
    assert one_result(send, o) == [
        "[Below is the output of the previous command.]\n1 failed\n\n[still running]"
        "\n[Current working directory: /w]\n[Python interpreter: /usr/bin/python3]\n[Command finished with exit code 1]"
    ]


def test_terminal_without_a_finished_command_has_no_exit_code_line(send):
    assert one_result(send, terminal("waiting", exit_code=-1)) == ["waiting"]
    assert one_result(send, terminal("done", exit_code=0)) == ["done\n[Command finished with exit code 0]"]


def test_an_error_observation_starts_with_the_sdk_error_header(send):
    o = {"kind": "FileEditorObservation", "command": "view", "is_error": True,
         "content": [{"type": "text", "text": "no such file"}]}
    assert one_result(send, o, tool="file_editor") == ["[An error occurred during execution.]\n", "no such file"]


def test_a_long_terminal_output_is_cut_to_30000_keeping_head_and_tail(send):
    out = "".join(f"{i:05d}\n" for i in range(12_000))  # 72,000 characters
    (text,) = one_result(send, terminal(out))
    assert len(text) == 30_000 and NOTICE in text
    head, tail = text.split(NOTICE)
    assert out.startswith(head) and out.endswith(tail) and len(head) - len(tail) in (0, 1)


def test_a_saved_terminal_output_is_named_in_the_notice(send):
    out = "x\n" * 40_000
    (text,) = one_result(send, {**terminal(out), "full_output_save_dir": "/ws/observations"})
    assert len(text) == 30_000
    assert "The complete output has been saved to /ws/observations/terminal_output_" in text
    assert "(truncated part starts around line" in text


def test_every_tool_text_is_capped_at_50000(send):
    page = "y" * 70_000
    o = {"kind": "FileEditorObservation", "command": "view", "is_error": False, "content": [{"type": "text", "text": page}]}
    (text,) = one_result(send, o, tool="file_editor")
    assert len(text) == 50_000 and NOTICE in text
    events = [f.system(), f.user("go"), f.action("r", "c", tool="file_editor"), obs("c", o, "file_editor")]
    assert send(events, string_content=True)[-1]["content"] == text


def test_browser_screenshot_is_an_image_dropped_when_vision_is_off(send):
    o = {"kind": "BrowserObservation", "is_error": False, "content": [{"type": "text", "text": "page"}],
         "screenshot_data": "iVBORw0KGgoAAAA"}
    events = [f.system(), f.user("go"), f.action("r", "c", tool="browser_navigate"), obs("c", o, "browser_navigate")]
    with_vision = send(events)[-1]["content"]
    assert with_vision == [{"type": "text", "text": "page"},
                           {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgoAAAA"}}]
    assert send(events, vision=False)[-1]["content"] == [{"type": "text", "text": "page"}]


def test_rejection_reads_action_rejected(send):
    msgs = send([f.system(), f.user("go"), f.action("r", "c"), f.rejection("c")])
    assert result_texts(msgs) == ["Action rejected: no"]


def test_tool_call_without_thought_omits_content_and_empty_assistant_message_is_empty_string(send):
    empty = MessageEvent(source="agent", llm_message=Message(role="assistant", content=[]), llm_response_id="x")
    msgs = send([f.system(), f.user("go"), f.action("r", "c"), f.observation("c"), empty])
    assert "content" not in msgs[2] and msgs[2]["tool_calls"][0]["id"] == "c"
    assert msgs[-1] == {"role": "assistant", "content": ""}


def test_consecutive_user_messages_are_merged(send):
    msgs = send([f.system(), f.user("a"), f.user("b")])
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert [p["text"] for p in msgs[1]["content"]] == ["a", "b"]


def test_images_in_user_messages_follow_the_vision_switch(send):
    pic = MessageEvent(source="user", llm_message=Message(role="user", content=[
        TextContent(text="look"), ImageContent(image_urls=["data:image/png;base64,AAAA"])]))
    assert len(send([f.system(), pic])[1]["content"]) == 2
    assert send([f.system(), pic], vision=False)[1]["content"] == [{"type": "text", "text": "look"}]


def test_reasoning_content_and_thinking_blocks(send):
    act = f.action("r", "c", think=True).model_copy(update={"reasoning_content": "why"})
    events = [f.system(), f.user("go"), act, f.observation("c")]
    assert send(events)[2]["reasoning_content"] == "why"
    no_reasoning = send(events, reasoning_content=False)[2]
    assert "reasoning_content" not in no_reasoning
    assert no_reasoning["thinking_blocks"] == [{"type": "thinking", "thinking": "thinking about c", "signature": "sig"}]


def test_cache_markers_on_the_system_prompt_and_the_last_user_or_tool_message(send):
    msgs = send([f.system(), f.user("go"), f.action("r", "c"), f.observation("c")], cache_prompt=True)
    assert msgs[0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in msgs[1]["content"][0]
    assert msgs[3]["cache_control"] == {"type": "ephemeral"}  # a tool message: marked as a whole
    assert "cache_control" not in msgs[3]["content"][0]
    assert all("cache_control" not in str(m) for m in send([f.system(), f.user("go")]))


def test_string_content_joins_text(send):
    msgs = send([f.system(), f.user("a"), f.user("b")], string_content=True)
    assert msgs[1] == {"role": "user", "content": "a\nb"}


def test_results_follow_their_batch_in_event_order(send):
    # An invalid call's error comes right after its action, before the other calls' results.
    a1, a2 = f.action("r", "c1"), f.action("r", "c2")
    msgs = send([f.system(), f.user("go"), a1, a2, f.error("c2"), f.observation("c1")])
    assert [m.get("tool_call_id") for m in msgs[3:]] == ["c2", "c1"]


def test_a_request_on_a_short_view_is_a_hard_reset_as_in_the_sdk(conv):
    # [system, user, A, O, user, A, O] + request; keep_first 4: the tail the SDK computes,
    # 7 // 2 - 4 - 1, is negative, so it forgets everything after the system prompt.
    conv.append_many([f.system(), f.user("fix"), f.action("r1", "c1"), f.observation("c1"),
                      f.user("docs"), f.action("r2", "c2"), f.observation("c2"), f.request()])
    cond = LLMSummarizingCondenser(max_size=120, keep_first=4).condense(conv.view())
    assert isinstance(cond, Condensation)
    assert cond.forgotten_ranges == [(1, 6)] and cond.summary_offset == 1
    conv.append(cond)
    assert [type(e).__name__ for e in conv.view()] == ["SystemPromptEvent", "CondensationSummaryEvent"]


def test_other_rolling_strategies_keep_their_clamped_tail(conv):
    from openhands_memory.condensers import AmortizedForgettingCondenser

    conv.append_many([f.system(), f.user("fix"), f.action("r1", "c1"), f.observation("c1"),
                      f.user("docs"), f.action("r2", "c2"), f.observation("c2"), f.request()])
    cond = AmortizedForgettingCondenser(max_size=12, keep_first=4).condense(conv.view())
    assert isinstance(cond, Condensation) and cond.forgotten_ranges == [(4, 6)]

