"""A real SDK agent loop of more than 100 steps, persisted as rows and condensed by
SDKCondenser, on SQLite and on PostgreSQL; then resumed by the SDK from the database, and
killed mid-run and resumed."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import uuid
from pathlib import Path
from typing import Any

from openhands.sdk.conversation.state import ConversationExecutionStatus
from openhands.sdk.event import Condensation

from openhands_memory.inspection import doctor
from openhands_memory.conversation import EventStore

from ..cli_runner import invoke
from .agent import open_conversation, scripted_server

STEPS = 110


def stored_rows(database: str, cid: str) -> list[tuple[int, str, str]]:
    """(id, uid, payload) of every row, read through a connection of its own."""
    with EventStore(database) as store, store.reading() as db:
        return db.event_page(cid, 0, 2**62, 2**62, columns="id, uid, payload")


def assert_stored_as_the_sdk_sees_it(database: str, cid: str, sdk_events: list[str], sdk_view: list[str]) -> None:
    rows = stored_rows(database, cid)
    assert [r[0] for r in rows] == list(range(len(rows))), "ids 0..N-1 with no gap"
    assert [r[1] for r in rows] == sdk_events, "every SDK event is a row, in the SDK's order"
    with EventStore(database) as store:
        view = store.conversation(cid).view()
        assert [e.id for e in view.events] == sdk_view, "the SDK's state.view is conv.view(), id for id"
        report = doctor.check(store, full=True)
        assert report.healthy, report.problems


def test_agent_loop_is_rows_and_resumes_from_the_database(database_url, tmp_path):
    cid = uuid.uuid4()
    with scripted_server(STEPS) as server:
        conversation = open_conversation(database_url, cid, server.url, tmp_path / "ws")
        conversation.send_message("Think the task through, one step at a time.")
        conversation.run()
        state = conversation.state
        assert state.execution_status == ConversationExecutionStatus.FINISHED
        assert len(server.requests) == STEPS  # 109 think steps and the finish
        events = [e.id for e in state.events]
        view = [e.id for e in state.view.events]
        # Each event's payload is the SDK's own JSON of it, byte for byte.
        rows = stored_rows(database_url, str(cid))
        assert [r[2] for r in rows] == [e.model_dump_json(exclude_none=True) for e in state.events]
        condensations = [e for e in state.events if isinstance(e, Condensation)]
        assert len(condensations) >= 5
        assert_stored_as_the_sdk_sees_it(database_url, str(cid), events, view)
        with EventStore(database_url) as store, store.reading() as db:
            assert sorted({c for c, _, _ in db.condensations_with_ranges(str(cid))}) == [
                events.index(c.id) for c in condensations
            ], "each Condensation has its bookkeeping row"
            assert db.base_state(str(cid)) is not None

        # The CLI sees the conversation as it is.
        shown = invoke("view", database_url, str(cid)[:8], "--json")
        assert shown.exit_code == 0, shown.output
        assert [e["event"]["id"] for e in json.loads(shown.output)["events"]] == view
        conversation.close()

        # The SDK resumes from the database: same events, same view, same state.
        resumed = open_conversation(database_url, cid, server.url, tmp_path / "ws")
        assert [e.id for e in resumed.state.events] == events
        assert [e.id for e in resumed.state.view.events] == view
        assert resumed.state.execution_status == ConversationExecutionStatus.FINISHED
        resumed.close()


def run_to_the_end(database: str, cid: uuid.UUID, url: str, workspace: Path, task: str) -> None:
    """The agent process: a new conversation, run until it finishes (or is killed)."""
    conversation = open_conversation(database, cid, url, workspace)
    conversation.send_message(task)
    conversation.run()


def test_a_killed_agent_resumes_from_the_database_and_finishes(database_url, tmp_path):
    cid = uuid.uuid4()
    steps, kill_at = 60, 35
    # A forked process starts at once: the SDK is imported already (a fresh interpreter
    # spends seconds importing it).
    fork = multiprocessing.get_context("fork")
    with scripted_server(steps) as server:
        answer = server.responder
        agent: dict[str, Any] = {}

        def kill_midway(body):
            # SIGKILL the agent while it waits for this answer: no cleanup, no flush.
            if len(server.requests) == kill_at:
                os.kill(agent["process"].pid, signal.SIGKILL)
            return answer(body)

        server.responder = kill_midway
        agent["process"] = fork.Process(
            target=run_to_the_end, args=(database_url, cid, server.url, tmp_path / "ws", "Think it through.")
        )
        agent["process"].start()
        agent["process"].join(timeout=300)
        assert agent["process"].exitcode == -signal.SIGKILL
        before = stored_rows(database_url, str(cid))
        assert len(before) > 2 * (kill_at - 5)

        # The SDK resumes the conversation from the database and finishes the run.
        resumed = open_conversation(database_url, cid, server.url, tmp_path / "ws")
        resumed.run()
        state = resumed.state
        assert state.execution_status == ConversationExecutionStatus.FINISHED
        after = stored_rows(database_url, str(cid))
        assert after[: len(before)] == before, "nothing written before the kill was lost or changed"
        assert len({uid for _, uid, _ in after}) == len(after), "no event stored twice"
        assert len(server.requests) == steps, "every step ran once"
        assert_stored_as_the_sdk_sees_it(
            database_url, str(cid), [e.id for e in state.events], [e.id for e in state.view.events]
        )
        resumed.close()
