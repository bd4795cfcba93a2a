"""The real OpenHands agent server streams its conversations into a database through its
webhooks, received by ``openhands-memory serve DB --ingest``: both real processes on loopback,
the agent's model the suite's loopback OpenAI-compatible server, the agent running the
terminal tool in a temporary folder.

Each test holds the database to the agent server's own REST API: every event it lists is
stored, in the same order, with the same ids and parents. Without the agent server's
environment (tests/agent_server.py) the tests skip, or fail with ``OHM_REQUIRE_SDK=1`` (CI).
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from openhands_memory.conversation import EventStore
from openhands_memory.inspection import doctor

from . import agent_server as a
from .cli_runner import invoke
from .llm_server import FakeLLMServer, Reply

STEPS = 5  # terminal calls before the agent finishes


@pytest.fixture(scope="module")
def agent_python() -> Path:
    found = a.python()
    if found is None:
        if os.environ.get("OHM_REQUIRE_SDK") == "1":
            pytest.fail(a.missing() + "; OHM_REQUIRE_SDK=1 says these tests must run", pytrace=False)
        pytest.skip(a.missing())
    return found


def scripted(steps: int = STEPS, pause: float = 0.0) -> FakeLLMServer:
    """The agent's model: ``steps`` terminal calls, then finish; a summary for a condenser's
    request (it offers no tools). ``pause``: seconds each tool call takes to arrive."""

    def respond(body: dict) -> Reply:
        if not body.get("tools"):
            return Reply("text", text="Summary: the agent echoed its steps into the terminal.")
        n = sum(1 for r in server.requests if r.get("tools"))
        if n >= steps:
            return Reply("tool_call", tool_calls=[("finish", json.dumps({"message": f"done after {steps} steps"}))])
        if pause:
            threading.Event().wait(pause)
        return Reply("tool_call", tool_calls=[("terminal", json.dumps({"command": f"echo step {n} >> steps.txt"}))])

    server = FakeLLMServer(respond)
    return server


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    server = scripted().start()
    yield server
    server.stop()


@pytest.fixture
def served(agent_python, database_url, tmp_path) -> Iterator[tuple[a.AgentServer, a.Receiver]]:
    """An agent server whose webhook is a receiver on a port of its own, into a new database
    of each backend."""
    port = a.free_port()
    receiver = a.Receiver(database_url, port, tmp_path / "receiver.log").start()
    server = a.AgentServer(tmp_path / "agent-server", f"http://127.0.0.1:{port}").start()
    try:
        yield server, receiver
    finally:
        server.stop()
        receiver.stop()


def stored(database: str, cid: str) -> list[tuple[str, str, str | None]]:
    """(kind, uid, parent uid) of each event the database holds for ``cid``, in id order: the
    parent its JSON names, which must be the parent its row has in the history tree."""
    with EventStore(database) as store:
        if not store.has_conversation(cid):
            return []
        events = list(store.conversation(cid).events())
        with store.reading() as db:
            jumps = dict(db.jumps(cid))
            # The rows the tree carries off the path (state updates between a node and its child).
            detached = {r[0] for r in db.all("SELECT id FROM event WHERE conversation_id = ? AND detached", (cid,))}
    out = []
    for k, e in enumerate(events):
        parent = jumps.get(k, k - 1)
        while parent in detached:  # the SDK names the node before a run of state updates
            parent = jumps.get(parent, parent - 1)
        named = e.parent_id  # type: ignore[attr-defined]
        assert named == (events[parent].id if parent >= 0 else None), (k, e.kind, named, parent)
        out.append((e.kind, e.id, named))  # type: ignore[attr-defined]
    return out


def listed(server: a.AgentServer, cid: str) -> list[tuple[str, str, str | None]]:
    return [(e["kind"], e["id"], e.get("parent_id")) for e in server.events(cid)]


def delivered(server: a.AgentServer, database: str, cid: str, timeout: float = 60) -> list[tuple[str, str, str | None]]:
    """What the database holds once it holds every event the agent server lists."""
    want = listed(server, cid)
    a.wait_until(lambda: len(stored(database, cid)) >= len(want), f"{len(want)} events in {database}", timeout)
    return stored(database, cid)


def no_nulls(value: Any) -> Any:
    """A JSON value without the object members that are null."""
    if isinstance(value, dict):
        return {k: no_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [no_nulls(v) for v in value]
    return value


def test_a_conversation_streams_in_whole_in_order_and_twice_is_once(served, llm, tmp_path):
    server, receiver = served
    cid = server.start_conversation(llm.url, tmp_path / "work", "echo your steps", condense_at=8)
    assert server.wait_finished(cid) == "finished"
    want = listed(server, cid)
    assert "Condensation" in [kind for kind, _, _ in want]  # the condenser ran in the agent server
    ran = [e for e in server.events(cid) if e["kind"] == "ObservationEvent" and e.get("tool_name") == "terminal"]
    assert len(ran) >= 3  # the terminal tool ran a few times
    assert delivered(server, receiver.database, cid) == want

    doctor_run = invoke("doctor", receiver.database, "--full")
    assert doctor_run.exit_code == 0, doctor_run.output
    with EventStore(receiver.database) as store:
        def info() -> dict:
            with store.reading() as db:
                return (db.metadata(cid) or {}).get("agent_server", {})
        # The final state comes after the last event, perhaps in a batch of its own; and the
        # info composed as the run started ("idle") may come later still, and must not win.
        a.wait_until(lambda: info().get("status") == "finished", "the status 'finished'", 30)
        assert info()["model"] == "openai/test-model"
        # What the model is sent from the database is what the agent server's SDK sends:
        # the same events in the same order, and the same summary.
        view = store.conversation(cid).view()
        ours = [("summary", e.summary) if e.kind == "CondensationSummaryEvent" else (e.kind, e.id)
                for e in view.events]
        assert ours == a.sdk_view(server.events(cid))
        assert "summary" in dict(ours)  # something was forgotten, and summarized
        # HEAD is the agent server's leaf: the view ends where the agent server's path ends.
        assert store.conversation(cid).view().events[-1].id == server.state(cid)["leaf_event_id"]

    # The database gives the agent server's own folder back: every event file it wrote, named
    # as it named it and holding what it wrote. (Its files leave out some fields that are
    # null, such as a tool call's responses_item_id, which its webhook sends as null: the
    # SDK reads either as the same event.)
    out = tmp_path / "exported"
    exported = invoke("export", receiver.database, cid, "--file-format", "openhands", "-o", str(out))
    assert exported.exit_code == 0, exported.output
    theirs = {p.name: no_nulls(json.loads(p.read_text())) for p in a.events_folder(server, cid).glob("*.json")}
    mine = {p.name: no_nulls(json.loads(p.read_text())) for p in (out / "events").glob("*.json")}
    assert len(theirs) == len(want) and mine == theirs

    # A second delivery of every batch, as the sender's retries could bring it: nothing changes.
    client = f"http://127.0.0.1:{receiver.port}/events/{uuid.UUID(cid).hex}"
    for batch in a.pages(server.events(cid), 5):
        answer = a.request(client, "POST", batch, key=None)
        assert answer["stored"] == 0 and answer["duplicates"] == len(batch)
    assert stored(receiver.database, cid) == want


def test_the_receiver_killed_mid_run_loses_nothing_and_stores_nothing_twice(agent_python, tmp_path):
    port = a.free_port()
    receiver = a.Receiver(str(tmp_path / "ingest.db"), port, tmp_path / "receiver.log").start()
    server = a.AgentServer(tmp_path / "agent-server", f"http://127.0.0.1:{port}").start()
    llm = scripted(steps=8, pause=0.4).start()
    try:
        cid = server.start_conversation(llm.url, tmp_path / "work", "echo your steps slowly")
        a.wait_until(lambda: len(stored(receiver.database, cid)) >= 3, "the first batches", timeout=60)
        receiver.kill()  # kill -9, mid-run
        a.wait_until(lambda: server.status(cid) == "finished" or len(listed(server, cid)) > 12,
                     "the agent to go on without the receiver", timeout=60)
        receiver.start()  # the same port: the sender's retries land here
        assert server.wait_finished(cid) == "finished"
        want = listed(server, cid)
        assert delivered(server, receiver.database, cid, timeout=90) == want
        assert invoke("doctor", receiver.database, "--full").exit_code == 0
    finally:
        server.stop()
        receiver.stop()
        llm.stop()


def test_a_wrong_key_is_refused_and_nothing_is_stored(agent_python, llm, tmp_path):
    port = a.free_port()
    receiver = a.Receiver(str(tmp_path / "ingest.db"), port, tmp_path / "receiver.log", keys=("another-key",)).start()
    server = a.AgentServer(tmp_path / "agent-server", f"http://127.0.0.1:{port}").start()
    try:
        cid = server.start_conversation(llm.url, tmp_path / "work", "echo your steps")
        assert server.wait_finished(cid) == "finished"
        log = tmp_path / "agent-server" / "agent-server.log"
        a.wait_until(lambda: "401" in log.read_text(), "the agent server to be refused", timeout=30)
        assert stored(receiver.database, cid) == []
        with EventStore(receiver.database) as store:
            assert store.conversations() == [] or all(c.id != cid for c in store.conversations())
            assert doctor.check(store).problems == []
    finally:
        server.stop()
        receiver.stop()


def test_events_the_sender_dropped_are_a_gap_until_sync_fills_it(agent_python, llm, tmp_path):
    """The receiver down while the agent runs, the sender's queue small: it drops the oldest
    events. What it delivers once the receiver is back waits for parents that never come (the
    conversation is incomplete, and says so), until ``sync`` pulls them from the REST API."""
    port = a.free_port()
    receiver = a.Receiver(str(tmp_path / "ingest.db"), port, tmp_path / "receiver.log")
    server = a.AgentServer(tmp_path / "agent-server", f"http://127.0.0.1:{port}", settings={
        "OH_WEBHOOKS_0_MAX_QUEUE_SIZE": "3", "OH_WEBHOOKS_0_NUM_RETRIES": "0"}).start()
    try:
        cid = server.start_conversation(llm.url, tmp_path / "work", "echo your steps")
        assert server.wait_finished(cid) == "finished"
        want = listed(server, cid)
        receiver.start()
        a.wait_until(lambda: waiting(receiver.database, cid) > 0, "the undropped events to arrive and wait", 30)
        assert stored(receiver.database, cid) == []  # their parents were dropped
        gap = invoke("doctor", receiver.database)
        assert gap.exit_code == 1 and "gap" in gap.output
        assert "incomplete" in invoke("conversations", receiver.database, env={"COLUMNS": "200"}).output

        pulled = invoke("sync", receiver.database, "--agent-server", server.url, "--api-key", a.SESSION_KEY, "--json")
        assert pulled.exit_code == 0, pulled.output
        assert json.loads(pulled.output)["waiting"] == 0
        assert stored(receiver.database, cid) == want
        assert invoke("doctor", receiver.database, "--full").exit_code == 0
        again = invoke("sync", receiver.database, "--agent-server", server.url, "--api-key", a.SESSION_KEY, "--json")
        assert json.loads(again.output)["stored"] == 0  # idempotent
        wrong = invoke("sync", receiver.database, "--agent-server", server.url, "--api-key", "nope")
        assert wrong.exit_code == 1 and "refused the key" in wrong.output
    finally:
        server.stop()
        receiver.stop()


def waiting(database: str, cid: str) -> int:
    from openhands_memory.io.agent_server import waiting_counts

    with EventStore(database) as store:
        return waiting_counts(store).get(cid, 0)


def test_backfill_pulls_what_the_webhooks_never_brought(agent_python, llm, tmp_path):
    """``serve --ingest --backfill URL``, no ``sync`` run by hand: a conversation that ran
    before the receiver started is pulled when it starts, and one whose older events a
    sender dropped is pulled once the events that came have waited ``--backfill-delay``."""
    nowhere = a.free_port()  # where the webhooks go: nothing listens there, nothing is retried
    server = a.AgentServer(tmp_path / "agent-server", f"http://127.0.0.1:{nowhere}",
                           settings={"OH_WEBHOOKS_0_NUM_RETRIES": "0"}).start()
    port = a.free_port()
    log = tmp_path / "receiver.log"
    receiver = a.Receiver(str(tmp_path / "ingest.db"), port, log, keys=(a.SESSION_KEY,),
                          options=("--backfill", server.url, "--backfill-delay", "1"))
    later_llm = scripted().start()
    try:
        early = server.start_conversation(llm.url, tmp_path / "work", "echo your steps")
        assert server.wait_finished(early) == "finished"
        receiver.start()
        assert delivered(server, receiver.database, early) == listed(server, early)  # the start's sweep

        later = server.start_conversation(later_llm.url, tmp_path / "work-2", "echo your steps")
        assert server.wait_finished(later) == "finished"
        events = server.events(later)
        # What a sender delivers after its queue dropped the older half: it waits for parents.
        got = a.request(f"http://127.0.0.1:{port}/events/{uuid.UUID(later).hex}", "POST", events[len(events) // 2:])
        assert got["waiting"] > 0 and got["stored"] == 0
        assert delivered(server, receiver.database, later) == listed(server, later)
        assert waiting(receiver.database, later) == 0
        assert invoke("doctor", receiver.database, "--full").exit_code == 0
        said = log.read_text()
        assert "backfill of every conversation" in said and f"backfill of conversation {later}" in said
    finally:
        server.stop()
        receiver.stop()
        later_llm.stop()
