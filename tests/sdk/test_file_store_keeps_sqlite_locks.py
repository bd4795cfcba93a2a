"""One process holding two conversations of ``agent.db`` through ``DatabaseFileStore`` (as the
README shows), while an SDK agent in another process resumes the first one: every commit of
either process is visible to a fresh process at once, the WAL stays in place while a store
is open, and nothing either wrote is overwritten.

Opening a store used to read the file's header through a Python file object; its close
dropped the process's SQLite locks, and the next other process to close the file deleted
the WAL still in use, so later commits went into a deleted file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from openhands.sdk.conversation.event_store import EventLog
from openhands.sdk.conversation.state import ConversationExecutionStatus
from openhands.sdk.event import MessageEvent
from openhands.sdk.llm import Message, TextContent

from openhands_memory.integrations.openhands_sdk import DatabaseFileStore

from .agent import open_conversation, scripted_server

REPO = Path(__file__).resolve().parents[2]

# A fresh process: how many events each conversation holds, as the database says.
COUNT = """
import json, sys
from openhands_memory import EventStore
with EventStore(sys.argv[1], readonly=True, create=False) as store:
    print(json.dumps({c.id: len(store.conversation(c.id)) for c in store.conversations()}))
"""

# Another process: the SDK resumes the conversation from the database and runs it to the end.
RESUME = """
import sys, uuid
from pathlib import Path
from tests.sdk.agent import open_conversation
conversation = open_conversation(sys.argv[1], uuid.UUID(sys.argv[2]), sys.argv[3], Path(sys.argv[4]))
conversation.send_message("One more thing: think it through again.")
conversation.run()
conversation.close()
"""


def python(code: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENHANDS_SUPPRESS_BANNER": "1"}
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def counts(db: Path) -> dict[str, int]:
    return json.loads(python(COUNT, str(db)))


def note(text: str) -> MessageEvent:
    return MessageEvent(source="user", llm_message=Message(role="user", content=[TextContent(text=text)]))


def test_two_conversations_in_one_process_and_an_agent_resuming_in_another(tmp_path):
    db = tmp_path / "agent.db"
    wal = Path(f"{db}-wal")
    first, second = uuid.uuid4(), uuid.uuid4()
    with scripted_server(6) as server:
        agent = open_conversation(str(db), first, server.url, tmp_path / "ws")
        agent.send_message("Think the task through.")
        agent.run()
        assert agent.state.execution_status == ConversationExecutionStatus.FINISHED
        notes = DatabaseFileStore(str(db), second)  # a second store on the file, this process
        notes.write("base_state.json", "{}")
        log = EventLog(notes)
        log.append(note("n0"))
        mine = len(agent.state.events)
        assert counts(db) == {str(first): mine, str(second): 1}  # another process opened and closed it
        assert wal.exists(), "the WAL in use was deleted"

        log.append(note("n1"))
        assert counts(db)[str(second)] == 2, "a commit is invisible to other processes"

        server.requests.clear()  # the resumed run takes its own six steps
        python(RESUME, str(db), str(first), server.url, str(tmp_path / "ws"))
        theirs = counts(db)[str(first)]
        assert theirs > mine + 6

        log.append(note("n2"))  # after the other process wrote and closed
        assert wal.exists()
        assert counts(db) == {str(first): theirs, str(second): 3}
        notes.close()
        agent.close()
    # With every store closed, nothing was overwritten by a stale WAL.
    assert counts(db) == {str(first): theirs, str(second): 3}
    assert [e.llm_message.content[0].text for e in EventLog(DatabaseFileStore(str(db), second))] == ["n0", "n1", "n2"]
