"""SDK events made with the SDK's own classes: a system prompt, a task, then tool steps
(think calls, now and then two in one response, and browser visits every fifth step)."""

from __future__ import annotations

from collections.abc import Iterator

from openhands.sdk.event import (
    ActionEvent,
    MessageEvent,
    ObservationEvent,
    SystemPromptEvent,
)
from openhands.sdk.event.base import Event
from openhands.sdk.llm import Message, MessageToolCall, TextContent
from openhands.sdk.tool.builtins.think import ThinkAction, ThinkObservation
from openhands.tools.browser_use.definition import (
    BrowserNavigateAction,
    BrowserObservation,
)


def _call(step: int, k: int, name: str, action, observation) -> tuple[ActionEvent, ObservationEvent]:
    call_id = f"call-{step}-{k}"
    act = ActionEvent(
        thought=[TextContent(text=f"step {step}")] if k == 0 else [],
        action=action,
        tool_name=name,
        tool_call_id=call_id,
        tool_call=MessageToolCall(id=call_id, name=name, arguments=action.model_dump_json(), origin="completion"),
        llm_response_id=f"resp-{step}",
    )
    obs = ObservationEvent(observation=observation, action_id=act.id, tool_name=name, tool_call_id=call_id)
    return act, obs


def steps(n: int) -> Iterator[list[Event]]:
    """The events of each step, in the order an agent writes them."""
    yield [
        SystemPromptEvent(system_prompt=TextContent(text="You are a careful agent."), tools=[]),
        MessageEvent(source="user", llm_message=Message(role="user", content=[TextContent(text="Fix the bug.")])),
    ]
    for step in range(n):
        if step % 5 == 4:
            url = f"https://docs.example/{step}"
            calls = [_call(step, 0, "browser_navigate", BrowserNavigateAction(url=url),
                           BrowserObservation.from_text(f"<html>page {step} " + "text " * 200 + "</html>"))]
        else:
            width = 3 if step % 7 == 0 else 1
            calls = [_call(step, k, "think", ThinkAction(thought=f"thought {step}.{k} " + "x" * (40 * (step % 9))),
                           ThinkObservation.from_text("Your thought has been logged.")) for k in range(width)]
        yield [a for a, _ in calls] + [o for _, o in calls]
