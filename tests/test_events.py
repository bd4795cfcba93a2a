"""Every event kind round-trips: through the SDK's JSON shape and through the database.

The SDK examples below follow the persisted shape described in §1.8 of the reference
(``model_dump_json(exclude_none=True)`` of openhands-sdk 1.58): ``None`` fields are left
out, empty lists are kept, ``kind`` names the class.
"""

from __future__ import annotations

import copy
import json
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openhands_memory.errors import MalformedEvent, UnknownEventKind
from openhands_memory.events import (
    EVENT_CLASSES,
    OBSERVATION_KINDS,
    VISIBLE_KINDS,
    ActionEvent,
    ImageContent,
    Message,
    MessageEvent,
    MessageToolCall,
    RedactedThinkingBlock,
    TextContent,
    ThinkingBlock,
    event_from_dict,
    event_from_json,
)
from openhands_memory.conversation import EventStore

from . import factories as f

# --- representative instances, one per kind ----------------------------------------------

TS = "2026-11-21T08:00:38.287591"


def _base(kind: str) -> dict:
    return {"id": f"id-{kind}", "timestamp": TS, "kind": kind}


def representative(kind: str) -> dict:
    """A JSON object for ``kind`` that sets most of its fields, optional ones included."""
    d = _base(kind)
    if kind == "SystemPromptEvent":
        d.update(
            source="agent",
            system_prompt={"cache_prompt": True, "type": "text", "text": "You are a coding agent."},
            tools=[
                {"name": "terminal", "description": "run a shell command",
                 "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}},
            ],
            dynamic_context={"cache_prompt": False, "type": "text", "text": "repo: /workspace"},
        )
    elif kind == "MessageEvent":
        d.update(
            source="user",
            llm_message={
                "role": "user",
                "content": [
                    {"cache_prompt": False, "type": "text", "text": "Fix the bug, see screenshot"},
                    {"cache_prompt": False, "type": "image", "image_urls": ["data:image/png;base64,AAAA"]},
                ],
                "thinking_blocks": [],
            },
            activated_skills=["github"],
            extended_content=[{"cache_prompt": False, "type": "text", "text": "<skill>github</skill>"}],
            sender="alice",
            parent_id="id-SystemPromptEvent",
        )
    elif kind == "ActionEvent":
        d.update(
            source="agent",
            thought=[{"cache_prompt": False, "type": "text", "text": "Let me run the tests."}],
            reasoning_content="The tests will tell me what fails.",
            thinking_blocks=[
                {"type": "thinking", "thinking": "run pytest", "signature": "c2ln"},
                {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"},
            ],
            responses_reasoning_item={"id": "rs_1", "summary": []},
            action={"command": "pytest -q", "is_input": False, "kind": "TerminalAction"},
            tool_name="terminal",
            tool_call_id="toolu_01",
            tool_call={"id": "toolu_01", "name": "terminal",
                       "arguments": "{\"command\": \"pytest -q\"}", "origin": "completion"},
            llm_response_id="chatcmpl-1",
            security_risk="LOW",
            critic_result={"score": 0.9},
            summary="run the tests",
        )
    elif kind == "ObservationEvent":
        d.update(
            source="environment",
            tool_name="terminal",
            tool_call_id="toolu_01",
            observation={
                "content": [{"cache_prompt": False, "type": "text", "text": "3 passed"}],
                "is_error": False, "command": "pytest -q", "exit_code": 0, "kind": "TerminalObservation",
            },
            action_id="id-ActionEvent",
            extended_content=[],
        )
    elif kind == "UserRejectObservation":
        d.update(source="environment", tool_name="terminal", tool_call_id="toolu_02",
                 rejection_reason="too risky", rejection_source="hook", action_id="a-2")
    elif kind == "AgentErrorEvent":
        d.update(source="agent", tool_name="nope", tool_call_id="toolu_03", error="Tool 'nope' not found",
                 classification={"kind": "unknown", "retryable": False, "user_action": "none"})
    elif kind == "CondensationSummaryEvent":
        d.update(source="environment", summary="USER_CONTEXT: fix the bug")
    elif kind == "PinnedContextEvent":
        d.update(source="user", pinned_seq=3, text="[Pinned at event 3: ...]\n#3 user wrote:\nfix it")
    elif kind == "PinEvent":
        d.update(source="user", event_id="id-MessageEvent", mode="reinject", label="plan", group="tasks",
                 rule="tool:task_tracker")
    elif kind == "Condensation":
        d.update(source="environment", forgotten_event_ids=["id-MessageEvent", "id-ActionEvent"],
                 summary="USER_CONTEXT: fix the bug", summary_offset=1, llm_response_id="chatcmpl-9")
    elif kind in ("CondensationRequest", "TokenEvent", "LLMCompletionLogEvent",
                  "StreamingDeltaEvent", "ACPToolCallEvent", "SecurityAnalysisEvent", "NullEvent"):
        d.update(source="environment")
    elif kind in ("PauseEvent", "InterruptEvent"):
        d.update(source="user")
    elif kind == "HookExecutionEvent":
        d.update(source="hook")
    elif kind == "ConversationStateUpdateEvent":
        d.update(source="environment", key="full_state", value={"execution_status": "running", "n": [1, 2]})
    elif kind == "ConversationErrorEvent":
        d.update(source="environment", code="LLMError", detail="rate limited",
                 classification={"kind": "rate_limit", "retryable": True})
    elif kind == "RecallAction":
        d.update(source="agent", query="how to build")
    elif kind == "RecallObservation":
        d.update(source="environment", content="use make", action_id="id-RecallAction")
    elif kind == "AgentStateChangedEvent":
        d.update(source="environment", agent_state="running")
    else:  # a kind added to EVENT_CLASSES after this test was written
        d.update(EVENT_CLASSES[kind]().model_dump(mode="json", exclude_none=True))
        d["id"], d["timestamp"] = f"id-{kind}", TS
    return d


ALL_KINDS = sorted(EVENT_CLASSES)


def test_every_kind_has_a_class_named_like_it():
    for kind, cls in EVENT_CLASSES.items():
        assert cls.__name__ == kind


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_json_round_trip(kind):
    data = representative(kind)
    event = event_from_dict(data)
    assert type(event) is EVENT_CLASSES[kind]
    assert event.to_json_dict() == data
    again = event_from_json(event.to_json())
    assert again == event
    assert again.to_json_dict() == event.to_json_dict()
    assert json.loads(event.to_json()) == data


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_built_instance_round_trip(kind):
    """Built through the model (defaults filled in), dumped, loaded: equal model and dict."""
    event = EVENT_CLASSES[kind].model_validate(representative(kind))
    rebuilt = event_from_json(event.to_json())
    assert rebuilt == event
    assert rebuilt.to_json_dict() == event.to_json_dict()


def test_factories_round_trip():
    for event in (f.system(), f.user(), f.agent_says(), f.action("r", "c", think=True, thought="hm"),
                  f.observation("c"), f.error("c"), f.rejection("c"), f.condensation(forget=["x"]),
                  f.condensation(ranges=[(0, 3)], summary="s", offset=1), f.request()):
        again = event_from_json(event.to_json())
        assert again == event
        assert again.to_json_dict() == event.to_json_dict()


# --- the SDK's own examples (§1.8) --------------------------------------------------------

SDK_EXAMPLES = {
    "SystemPromptEvent": {
        "id": "40bfa21f-ce1c-4bb4-91cc-0ef4112a1cfc", "timestamp": "2026-11-21T08:00:38.287591",
        "source": "agent",
        "system_prompt": {"cache_prompt": False, "type": "text", "text": "You are OpenHands agent..."},
        "tools": [], "kind": "SystemPromptEvent",
    },
    "MessageEvent(user)": {
        "id": "e9dff914-ae60-4977-810a-c6466bed981c", "timestamp": "2026-11-21T08:00:38.287654",
        "source": "user",
        "llm_message": {"role": "user",
                        "content": [{"cache_prompt": False, "type": "text", "text": "Fix the bug in foo.py"}],
                        "thinking_blocks": []},
        "activated_skills": [], "extended_content": [], "kind": "MessageEvent",
    },
    "ActionEvent": {
        "id": "24d07384-46c7-4f28-9959-2b482fd57e51", "timestamp": "2026-11-21T08:00:38.287715",
        "source": "agent",
        "thought": [{"cache_prompt": False, "type": "text", "text": "Let me look."}],
        "thinking_blocks": [{"type": "thinking", "thinking": "I should list files", "signature": "sig=="}],
        "action": {"data": {"command": "ls"}, "kind": "MCPToolAction"},
        "tool_name": "terminal", "tool_call_id": "toolu_01ABC",
        "tool_call": {"id": "toolu_01ABC", "name": "terminal", "arguments": "{\"command\": \"ls\"}",
                      "origin": "completion"},
        "llm_response_id": "chatcmpl-123", "security_risk": "UNKNOWN", "kind": "ActionEvent",
    },
    "ObservationEvent(terminal)": {
        "id": "d4f6dce6-2c6f-4559-8481-8b07ce1e775e", "timestamp": "2026-06-16T05:39:49.105230",
        "source": "environment", "tool_name": "terminal", "tool_call_id": "chatcmpl-tool-9d0341c7a033ae28",
        "observation": {
            "content": [{"cache_prompt": False, "type": "text",
                         "text": "Cannot execute multiple commands at once..."}],
            "is_error": True, "command": "SESSION_URL=http://localhost:8000 && curl $SESSION_URL",
            "exit_code": None, "timeout": False,
            "metadata": {"exit_code": -1, "pid": -1, "username": None, "hostname": None,
                         "working_dir": "/workspace", "py_interpreter_path": None, "prefix": "", "suffix": ""},
            "full_output_save_dir": "/workspace/conversations/5f0c/observations",
            "kind": "TerminalObservation",
        },
        "action_id": "e54cbba2-3be2-4494-aa13-83af6044c5a7", "extended_content": [],
        "kind": "ObservationEvent",
    },
    "AgentErrorEvent": {
        "id": "7269ddfa-b37f-4fbc-9ae8-c25b9a5900bf", "timestamp": "2026-11-21T08:00:39.000001",
        "source": "agent", "tool_name": "x", "tool_call_id": "toolu_02", "error": "Tool 'x' not found",
        "classification": {"kind": "unknown", "retryable": False, "user_action": "none"},
        "kind": "AgentErrorEvent",
    },
    "UserRejectObservation": {
        "id": "4b0db135-81a3-486d-b70f-32fa57e39cdd", "timestamp": "2026-11-21T08:00:39.000002",
        "source": "environment", "tool_name": "terminal", "tool_call_id": "toolu_03",
        "rejection_reason": "no", "rejection_source": "user", "action_id": "a-id",
        "kind": "UserRejectObservation",
    },
    "MessageEvent(agent)": {
        "id": "443fb29c-0000-4000-8000-000000000001", "timestamp": "2026-11-21T08:00:39.000003",
        "source": "agent",
        "llm_message": {"role": "assistant",
                        "content": [{"cache_prompt": False, "type": "text", "text": "Done."}],
                        "thinking_blocks": []},
        "llm_response_id": "chatcmpl-456", "activated_skills": [], "extended_content": [],
        "kind": "MessageEvent",
    },
    "CondensationRequest": {
        "id": "e7d8f5f3-fa0c-46f7-9cdb-bc7710de12e2", "timestamp": "2026-11-21T08:00:39.000004",
        "source": "environment", "kind": "CondensationRequest",
    },
    "Condensation": {
        "id": "0f7c0db1-f660-48a4-9158-c56f33525a10", "timestamp": "2026-11-21T08:00:39.000005",
        "source": "environment",
        "forgotten_event_ids": ["e9dff914-ae60-4977-810a-c6466bed981c",
                                "24d07384-46c7-4f28-9959-2b482fd57e51"],
        "summary": "USER_CONTEXT: ...", "summary_offset": 1, "llm_response_id": "chatcmpl-789",
        "kind": "Condensation",
    },
    "PauseEvent": {
        "id": "55a36cdd-0000-4000-8000-000000000002", "timestamp": "2026-11-21T08:00:39.000006",
        "source": "user", "kind": "PauseEvent",
    },
    "ConversationStateUpdateEvent": {
        "id": "4641a6fb-0000-4000-8000-000000000003", "timestamp": "2026-11-21T08:00:39.000007",
        "source": "environment", "key": "execution_status", "value": "running",
        "kind": "ConversationStateUpdateEvent",
    },
}


@pytest.mark.parametrize("name", list(SDK_EXAMPLES))
def test_sdk_example_round_trips(name):
    data = SDK_EXAMPLES[name]
    text = json.dumps(data)
    event = event_from_json(text)
    assert event.kind == data["kind"]
    assert event.to_json_dict() == data
    assert json.loads(event.to_json()) == data
    # with a parent_id, as events appended through ConversationState carry one
    with_parent = {**data, "parent_id": "40bfa21f-ce1c-4bb4-91cc-0ef4112a1cfc"}
    assert event_from_dict(with_parent).to_json_dict() == with_parent


def test_sdk_example_fields_are_typed():
    action = event_from_dict(SDK_EXAMPLES["ActionEvent"])
    assert isinstance(action, ActionEvent)
    assert action.has_thinking
    assert isinstance(action.thinking_blocks[0], ThinkingBlock)
    assert action.tool_call.arguments == "{\"command\": \"ls\"}"
    assert action.action == {"data": {"command": "ls"}, "kind": "MCPToolAction"}
    user = event_from_dict(SDK_EXAMPLES["MessageEvent(user)"])
    assert isinstance(user.llm_message.content[0], TextContent)
    assert user.llm_response_id is None
    cond = event_from_dict(SDK_EXAMPLES["Condensation"])
    assert cond.has_summary_metadata
    assert cond.forgotten_ranges is None


def test_none_fields_are_left_out_and_empty_lists_kept():
    event = MessageEvent(source="user", llm_message=Message(role="user", content=[TextContent(text="hi")]))
    dumped = json.loads(event.to_json())
    for absent in ("parent_id", "llm_response_id", "sender", "critic_result"):
        assert absent not in dumped
    for absent in ("tool_calls", "tool_call_id", "name", "reasoning_content", "responses_reasoning_item"):
        assert absent not in dumped["llm_message"]
    assert dumped["activated_skills"] == []
    assert dumped["extended_content"] == []
    assert dumped["llm_message"]["thinking_blocks"] == []
    action = f.action("r1", "c1")
    dumped = action.to_json_dict()
    assert dumped["thought"] == [] and dumped["thinking_blocks"] == []
    assert "reasoning_content" not in dumped and "summary" not in dumped


def test_older_fixture_without_defaulted_list_loads():
    """The SDK's terminal fixture predates ``extended_content``: loading fills the default,
    and the dump carries it as 1.58 writes it."""
    data = {k: v for k, v in SDK_EXAMPLES["ObservationEvent(terminal)"].items() if k != "extended_content"}
    dumped = event_from_dict(data).to_json_dict()
    assert dumped == {**data, "extended_content": []}


def test_nested_nulls_inside_payload_dicts_survive():
    data = SDK_EXAMPLES["ObservationEvent(terminal)"]
    dumped = event_from_dict(data).to_json_dict()
    assert dumped["observation"]["exit_code"] is None
    assert dumped["observation"]["metadata"]["username"] is None


def test_unknown_extra_fields_survive():
    data = copy.deepcopy(SDK_EXAMPLES["ActionEvent"])
    data["future_field"] = {"nested": [1, 2, 3]}
    data["tool_call"]["provider_specific"] = "x"
    data["thought"][0]["annotation"] = "kept"
    data["thinking_blocks"][0]["extra"] = 7
    event = event_from_dict(data)
    assert event.to_json_dict() == data
    assert event_from_json(event.to_json()).to_json_dict() == data
    msg = copy.deepcopy(SDK_EXAMPLES["MessageEvent(user)"])
    msg["llm_message"]["provider_field"] = {"a": 1}
    msg["new_top_level"] = "v"
    assert event_from_dict(msg).to_json_dict() == msg


def test_condensation_accepts_forgotten_ids_and_ranges():
    data = {**SDK_EXAMPLES["Condensation"], "forgotten_ranges": [[0, 3], [7, 7]]}
    event = event_from_dict(data)
    assert event.forgotten_ranges == [(0, 3), (7, 7)]
    assert event.to_json_dict() == data


# --- errors -------------------------------------------------------------------------------


def test_unknown_kind_is_named():
    with pytest.raises(UnknownEventKind) as info:
        event_from_dict({"kind": "TelepathyEvent", "id": "x"})
    assert "TelepathyEvent" in str(info.value)
    assert info.value.kind == "TelepathyEvent"
    assert isinstance(info.value, MalformedEvent)
    with pytest.raises(UnknownEventKind, match="TelepathyEvent"):
        event_from_json('{"kind": "TelepathyEvent"}')


def test_missing_kind():
    with pytest.raises(MalformedEvent, match="kind"):
        event_from_dict({"id": "x", "source": "user"})


@pytest.mark.parametrize(
    "field",
    ["tool_call_id", "tool_name", "tool_call", "llm_response_id", "thought"],
)
def test_missing_required_field_is_named(field):
    data = copy.deepcopy(SDK_EXAMPLES["ActionEvent"])
    del data[field]
    with pytest.raises(MalformedEvent) as info:
        event_from_dict(data)
    assert field in str(info.value)
    assert not isinstance(info.value, UnknownEventKind)


@pytest.mark.parametrize(
    "kind, field, value",
    [
        ("ActionEvent", "tool_call_id", 12345),
        ("ActionEvent", "tool_call_id", None),
        ("ActionEvent", "tool_call", "not an object"),
        ("ActionEvent", "source", "martian"),
        ("Condensation", "summary_offset", -1),
        ("Condensation", "summary_offset", "soon"),
        ("MessageEvent(user)", "llm_message", {"role": "narrator", "content": []}),
        ("ObservationEvent(terminal)", "observation", ["not", "a", "dict"]),
        ("ConversationStateUpdateEvent", "key", {"a": 1}),
    ],
)
def test_wrong_type_is_named(kind, field, value):
    data = copy.deepcopy(SDK_EXAMPLES[kind])
    data[field] = value
    with pytest.raises(MalformedEvent) as info:
        event_from_dict(data)
    assert field in str(info.value)


def test_nested_problem_names_the_path():
    data = copy.deepcopy(SDK_EXAMPLES["ActionEvent"])
    del data["tool_call"]["arguments"]
    with pytest.raises(MalformedEvent, match="arguments"):
        event_from_dict(data)


@pytest.mark.parametrize("value", [[1, 2], "an event", 42, None, 3.5, True])
def test_not_a_dict(value):
    with pytest.raises(MalformedEvent):
        event_from_dict(value)
    with pytest.raises(MalformedEvent):
        event_from_json(json.dumps(value))


@pytest.mark.parametrize("text", ["", "{", "{'kind': 'PauseEvent'}", "nope", b"\xff\xfe", '{"kind": "PauseEvent",}'])
def test_invalid_json(text):
    with pytest.raises(MalformedEvent):
        event_from_json(text)


# --- visibility (§1.3) --------------------------------------------------------------------

# LLM-convertible in the SDK (plus the legacy Recall pair the V0 history sends as turns).
EXPECTED_VISIBLE = {
    "SystemPromptEvent", "MessageEvent", "ActionEvent", "ObservationEvent", "UserRejectObservation",
    "AgentErrorEvent", "CondensationSummaryEvent", "PinnedContextEvent", "RecallAction", "RecallObservation",
}
EXPECTED_HIDDEN = {
    "Condensation", "CondensationRequest", "PauseEvent", "InterruptEvent",
    "ConversationStateUpdateEvent", "ConversationErrorEvent", "TokenEvent", "HookExecutionEvent",
    "LLMCompletionLogEvent", "StreamingDeltaEvent", "ACPToolCallEvent", "SecurityAnalysisEvent",
    "AgentStateChangedEvent", "NullEvent", "PinEvent",
}


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_llm_visible_per_kind(kind):
    assert kind in EXPECTED_VISIBLE | EXPECTED_HIDDEN, f"new kind {kind}: decide its visibility here"
    cls = EVENT_CLASSES[kind]
    assert cls.llm_visible is (kind in EXPECTED_VISIBLE)
    assert (kind in VISIBLE_KINDS) is (kind in EXPECTED_VISIBLE)


def test_observation_family():
    assert OBSERVATION_KINDS == {"ObservationEvent", "UserRejectObservation", "AgentErrorEvent"}


def test_default_sources_follow_the_sdk():
    expected = {
        "SystemPromptEvent": "agent", "ActionEvent": "agent", "AgentErrorEvent": "agent",
        "ObservationEvent": "environment", "UserRejectObservation": "environment",
        "Condensation": "environment", "CondensationRequest": "environment",
        "PauseEvent": "user", "InterruptEvent": "user",
    }
    for kind, source in expected.items():
        assert EVENT_CLASSES[kind].model_fields["source"].default == source, kind
    assert EVENT_CLASSES["MessageEvent"].model_fields["source"].is_required()


# --- through the database -----------------------------------------------------------------


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_database_round_trip(conv, kind):
    event = event_from_dict(representative(kind))  # a Condensation's ids name nothing stored: ignored
    if event.parent_id is not None:  # a parent must be stored before its child, as in the SDK
        conv.append(event_from_dict(representative("SystemPromptEvent")))
    seq = conv.append(event)
    back = conv.get(seq)
    assert back.seq == seq
    assert type(back) is type(event)
    assert back == event
    assert back.to_json_dict() == event.to_json_dict()


def test_database_round_trip_all_kinds_in_one_conversation(conv):
    # The system prompt first: the message names it as its parent (parents come first).
    events = [event_from_dict(representative(k)) for k in sorted(ALL_KINDS, key=lambda k: k != "SystemPromptEvent")]
    seqs = conv.append_many(events)
    assert seqs == list(range(len(events)))
    for seq, back in zip(seqs, conv.events()):
        assert back.seq == seq
        assert back.to_json_dict() == events[seq].to_json_dict()
    sdk = [event_from_dict(d) for d in SDK_EXAMPLES.values()]
    for e in sdk:
        seq = conv.append(e)
        assert conv.get(seq).to_json_dict() == e.to_json_dict()


def test_database_keeps_unknown_fields(conv):
    data = {**SDK_EXAMPLES["PauseEvent"], "reason": "lunch", "by": {"who": "alice"}}
    seq = conv.append(event_from_dict(data))
    assert conv.get(seq).to_json_dict() == data


# --- property: arbitrary text survives the database byte for byte ------------------------

texts = st.text(max_size=300)  # any code point (surrogates excluded by hypothesis's default)


@pytest.fixture(scope="module")
def prop_db(tmp_path_factory):
    """One file for every example (each writes a fresh conversation): a new file per example
    spent most of this test's time creating schemas."""
    path = tmp_path_factory.mktemp("prop") / "p.db"
    EventStore(path).close()
    return path


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(message=texts, command=texts, thought=texts)
def test_text_round_trips_through_database(prop_db, message, command, thought):
    path = prop_db
    cid = uuid.uuid4().hex
    arguments = json.dumps({"command": command, "path": thought}, ensure_ascii=False)
    msg = MessageEvent(source="user", llm_message=Message(role="user", content=[TextContent(text=message)]))
    act = ActionEvent(
        thought=[TextContent(text=thought)],
        thinking_blocks=[ThinkingBlock(thinking=message, signature=None), RedactedThinkingBlock(data=command)],
        action={"kind": "TerminalAction", "command": command},
        tool_name="terminal",
        tool_call_id="call-1",
        tool_call=MessageToolCall(id="call-1", name="terminal", arguments=arguments),
        llm_response_id="resp-1",
    )
    with EventStore(path) as store:
        conv = store.create_conversation(cid)
        conv.append_many([msg, act])
    with EventStore(path) as store:  # reopened: nothing cached
        conv = store.conversation(cid)
        msg_back, act_back = conv.get(0), conv.get(1)
    assert msg_back.llm_message.content[0].text == message
    assert act_back.tool_call.arguments == arguments  # the model's JSON text, byte-equal
    assert act_back.tool_call.arguments.encode() == arguments.encode()
    assert act_back.action["command"] == command
    assert act_back.thought[0].text == thought
    assert act_back.to_json() == act.to_json()
    assert msg_back.to_json() == msg.to_json()


def test_image_content_round_trip(conv):
    event = MessageEvent(
        source="user",
        llm_message=Message(role="user", content=[ImageContent(image_urls=["https://x/y.png"])]),
    )
    back = conv.get(conv.append(event))
    assert isinstance(back.llm_message.content[0], ImageContent)
    assert back == event
