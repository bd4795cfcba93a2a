"""Small builders for events in tests, named like the reference's notation (M, A, O, E)."""

from __future__ import annotations

import json

from openhands_memory.events import (
    ActionEvent,
    AgentErrorEvent,
    Condensation,
    CondensationRequest,
    Message,
    MessageEvent,
    MessageToolCall,
    ObservationEvent,
    SystemPromptEvent,
    TextContent,
    ThinkingBlock,
    UserRejectObservation,
)


def system(text: str = "You are a careful coding agent.") -> SystemPromptEvent:
    return SystemPromptEvent(system_prompt=TextContent(text=text), tools=[])


def user(text: str = "hello") -> MessageEvent:
    return MessageEvent(source="user", llm_message=Message(role="user", content=[TextContent(text=text)]))


def agent_says(text: str = "done") -> MessageEvent:
    return MessageEvent(
        source="agent",
        llm_message=Message(role="assistant", content=[TextContent(text=text)]),
        llm_response_id="resp-msg",
    )


def action(
    response: str, call: str, *, think: bool = False, thought: str = "", tool: str = "terminal",
    args: dict | None = None,
) -> ActionEvent:
    arguments = json.dumps(args if args is not None else {"command": f"echo {call}"})
    return ActionEvent(
        thought=[TextContent(text=thought)] if thought else [],
        thinking_blocks=[ThinkingBlock(thinking=f"thinking about {call}", signature="sig")] if think else [],
        action={"kind": "TerminalAction", **json.loads(arguments)},
        tool_name=tool,
        tool_call_id=call,
        tool_call=MessageToolCall(id=call, name=tool, arguments=arguments),
        llm_response_id=response,
    )


def observation(call: str, text: str | None = None, *, tool: str = "terminal", action_id: str = "a") -> ObservationEvent:
    return ObservationEvent(
        tool_name=tool,
        tool_call_id=call,
        observation={"kind": "TerminalObservation", "content": [{"type": "text", "text": text or f"output of {call}"}]},
        action_id=action_id,
    )


def error(call: str, text: str = "tool failed", *, tool: str = "terminal") -> AgentErrorEvent:
    return AgentErrorEvent(tool_name=tool, tool_call_id=call, error=text)


def rejection(call: str, *, tool: str = "terminal") -> UserRejectObservation:
    return UserRejectObservation(tool_name=tool, tool_call_id=call, action_id="a", rejection_reason="no")


def condensation(*, forget: list[str] | None = None, ranges=None, summary=None, offset=None) -> Condensation:
    return Condensation(
        forgotten_event_ids=forget or [],
        forgotten_ranges=ranges,
        summary=summary,
        summary_offset=offset,
        llm_response_id="test",
    )


def request() -> CondensationRequest:
    return CondensationRequest()
