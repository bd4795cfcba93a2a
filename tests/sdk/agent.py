"""A real OpenHands SDK agent for the tests: an ``Agent`` whose LLM is the suite's loopback
OpenAI-compatible server, persisted through ``DatabaseFileStore`` and condensed by
``SDKCondenser``.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from openhands.sdk import LLM, Agent, LocalConversation
from pydantic import SecretStr

from openhands_memory.integrations.openhands_sdk import DatabaseFileStore, SDKCondenser
from tests.llm_server import FakeLLMServer, Reply

# A rolling summary (the offline summarizer: no key) every 40 events, keeping the system
# prompt and the task.
CONDENSER_TOML = """
[condenser]
type = "llm"
max_size = 40
keep_first = 2
"""


def scripted_server(steps: int) -> FakeLLMServer:
    """Answers ``steps - 1`` requests with think calls (every seventh with two in one response,
    so cuts must keep batches whole), then with finish."""

    def respond(body: dict) -> Reply:
        n = len(server.requests)
        if n >= steps:
            return Reply("tool_call", tool_calls=[("finish", json.dumps({"message": f"done after {n - 1} steps"}))])
        calls = [("think", json.dumps({"thought": f"step {n}: the file is {'long ' * (n % 13)}"}))]
        if n % 7 == 0:
            calls.append(("think", json.dumps({"thought": f"step {n}, second call"})))
        return Reply("tool_call", tool_calls=calls)

    server = FakeLLMServer(respond)
    return server


def make_agent(llm_url: str, condenser_toml: str = CONDENSER_TOML) -> Agent:
    llm = LLM(model="openai/test-model", base_url=llm_url, api_key=SecretStr("test-key"), usage_id="agent",
              num_retries=0)
    return Agent(llm=llm, tools=[], condenser=SDKCondenser.from_toml(condenser_toml))


def open_conversation(database: str, conversation_id: uuid.UUID, llm_url: str, workspace: Path) -> LocalConversation:
    """A new conversation, or the SDK's resume of the stored one."""
    return LocalConversation(
        agent=make_agent(llm_url),
        workspace=str(workspace),
        conversation_id=conversation_id,
        file_store=DatabaseFileStore(database, conversation_id),
        visualizer=None,
        max_iteration_per_run=10_000,
    )
