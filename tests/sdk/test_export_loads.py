"""What `export --file-format openhands` writes, the OpenHands SDK loads with its own code: the
demo used to list its tools without the SDK's ``kind`` and give its browser page a url and
title the SDK's BrowserObservation forbids, so the SDK refused the exported folder."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import UUID

# A real agent with these tools imports them: that registers their actions and observations.
import openhands.tools.browser_use  # noqa: F401
import openhands.tools.file_editor  # noqa: F401
import openhands.tools.task_tracker  # noqa: F401
import openhands.tools.terminal  # noqa: F401
from openhands.sdk import LLM, Agent
from openhands.sdk.conversation.state import ConversationState
from openhands.sdk.event import Event, SystemPromptEvent
from openhands.sdk.tool import Tool
from openhands.sdk.workspace import LocalWorkspace

from openhands_memory.data import DEMO_CONVERSATION

from ..cli_runner import run


def test_the_bundled_demo_is_the_sdks_json():
    lines = DEMO_CONVERSATION.read_text(encoding="utf-8").splitlines()
    events = [Event.model_validate_json(line) for line in lines]  # raises on any the SDK refuses
    assert isinstance(events[0], SystemPromptEvent)
    assert [t.title for t in events[0].tools] == ["terminal", "file_editor", "browser", "task_tracker"]


def test_the_demo_exported_is_a_folder_the_sdk_resumes(tmp_path: Path):
    db, folder = tmp_path / "demo.db", tmp_path / "exported"
    run("demo", db)
    run("export", db, "demo", "--file-format", "openhands", "-o", folder)
    state_file = json.loads((folder / "base_state.json").read_text())
    agent = Agent(llm=LLM(model="gpt-4o", api_key="none", usage_id="agent"),
                  tools=[Tool(name=t["name"]) for t in state_file["agent"]["tools"]])
    state = ConversationState.create(id=UUID(state_file["id"]), agent=agent,
                                     workspace=LocalWorkspace(working_dir=str(tmp_path)), persistence_dir=str(folder))
    events = list(state.events)
    exported = json.loads(run("sql", db, "SELECT COUNT(*) AS n FROM event", "--format", "json").output)[0]["n"]
    assert len(events) == exported == 320
    assert isinstance(events[0], SystemPromptEvent) and len(events[0].tools) == 4
