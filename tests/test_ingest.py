"""The receiver of the OpenHands agent server's webhooks (``serve --ingest``), on both backends:
batches as the agent server 1.58 sends them (``event.model_dump(mode="json")``, each event
naming its parent), posted to the real app over its ASGI interface; the real agent server
posting over HTTP is tests/test_agent_server.py.
"""

from __future__ import annotations

import json
import logging
import random
import socket
import time
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from openhands_memory.cli.commands_serve import ingest_keys
from openhands_memory.conversation import EventStore
from openhands_memory.inspection import doctor
from openhands_memory.inspection.summary import summaries
from openhands_memory.io.agent_server import MAX_BODY_BYTES
from openhands_memory.storage.codec import MAX_EVENT_BYTES
from openhands_memory.web.app import create_app

from .cli_runner import invoke
from .sdk_shape import sdk_history

CID = uuid.UUID("8179c999-46f3-46c5-aa47-6d7f4ea353f2")


def wire_events(steps: int = 30, seed: int = 0) -> list[dict[str, Any]]:
    """A history as the agent server sends it: each event's JSON naming the one before it
    (the SDK 1.58 stamps every event it persists with its parent), the first none."""
    out: list[dict[str, Any]] = []
    for e in sdk_history(steps, seed=seed, max_size=40, keep_first=2):
        data = json.loads(e.model_dump_json())
        data["parent_id"] = out[-1]["id"] if out else None
        out.append(data)
    return out


def live_state(status: str, leaf: str | None = None) -> dict[str, Any]:
    """A state update the agent server pushes and never persists (no parent)."""
    state = {"id": str(CID), "execution_status": status, "leaf_event_id": leaf, "title": "fix the tests",
             "agent": {"kind": "Agent", "llm": {"model": "openai/test-model", "api_key": "**********"}},
             "stats": {"usage_to_metrics": {"agent": {"accumulated_cost": 0.25, "accumulated_token_usage": {
                 "prompt_tokens": 120, "completion_tokens": 30}}}}}
    return {"kind": "ConversationStateUpdateEvent", "id": str(uuid.uuid4()), "timestamp": "2026-11-27T20:36:16",
            "source": "environment", "parent_id": None, "key": "full_state", "value": state}


def batches(events: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    return [events[k : k + size] for k in range(0, len(events), size)]


def post(client: TestClient, batch: Any, *, key: str | None = None, cid: uuid.UUID = CID) -> Any:
    body = batch if isinstance(batch, bytes) else json.dumps(batch).encode()
    headers = {"Content-Type": "application/json", **({"X-Session-API-Key": key} if key else {})}
    return client.post(f"/events/{cid.hex}", content=body, headers=headers)


def rows(location: str, cid: uuid.UUID = CID) -> list[tuple[str, str | None]]:
    """(uid, the SDK's parent uid) of each stored event, in id order, read through the tree."""
    with EventStore(location) as store:
        if not store.has_conversation(str(cid)):
            return []
        events = list(store.conversation(str(cid)).events())
        with store.reading() as db:
            jumps = dict(db.jumps(str(cid)))
    out = []
    for k, e in enumerate(events):
        parent = jumps.get(k, k - 1)
        out.append((e.id, events[parent].id if parent >= 0 else None))
    return out


def expected(events: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return [(e["id"], e["parent_id"]) for e in events]


@pytest.fixture
def client(database_url):
    EventStore(database_url).close()
    with TestClient(create_app(database_url, ingest=True)) as c:
        yield c


def test_batches_in_order_are_the_history_with_its_parents(client, database_url):
    events = wire_events()
    for batch in batches(events, 5):
        answer = post(client, batch)
        assert answer.status_code == 200, answer.text
        assert answer.json()["stored"] == len(batch)
    assert rows(database_url) == expected(events)
    with EventStore(database_url) as store:
        report = doctor.check(store, full=True)
        assert report.problems == []
        assert store.conversation(str(CID)).view().events  # the view reads the ingested tree


def test_a_second_delivery_stores_nothing_twice(client, database_url):
    events = wire_events()
    for batch in batches(events, 7):
        post(client, batch)
    again = [post(client, batch).json() for batch in batches(events, 7)]
    assert [a["stored"] for a in again] == [0] * len(again)
    assert sum(a["duplicates"] for a in again) == len(events)
    assert rows(database_url) == expected(events)


def test_a_batch_before_its_parents_waits_then_lands_in_order(client, database_url):
    events = wire_events()
    first, second, third = events[:10], events[10:20], events[20:]
    early = post(client, third).json()
    assert (early["stored"], early["waiting"]) == (0, len(third))
    assert rows(database_url) == []
    with EventStore(database_url) as store:
        (problem,) = doctor.check(store).problems
        assert problem.check == "gap" and f"{len(third)} event(s)" in problem.detail
        assert summaries(store)[0].waiting == len(third)
    assert post(client, first).json()["stored"] == len(first)
    landed = post(client, second).json()
    assert (landed["stored"], landed["released"], landed["waiting"]) == (len(second) + len(third), len(third), 0)
    assert rows(database_url) == expected(events)
    with EventStore(database_url) as store:
        assert doctor.check(store, full=True).problems == []


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_order_and_any_repeats_end_as_the_history(tmp_path_factory, data):
    """At-least-once delivery, out of order across retries: whatever order the batches come in,
    and however many come twice, the stored history is the sent one, parents and order."""
    location = str(tmp_path_factory.mktemp("any") / "any.db")
    EventStore(location).close()
    events = wire_events(12, seed=data.draw(st.integers(0, 5)))
    sent = batches(events, data.draw(st.integers(1, 9)))
    order = data.draw(st.permutations(range(len(sent))))
    repeats = data.draw(st.lists(st.sampled_from(range(len(sent))), max_size=4))
    with TestClient(create_app(location, ingest=True)) as client:
        for k in [*order, *repeats]:
            assert post(client, sent[k]).status_code == 200
    assert rows(location) == expected(events)


def test_live_state_is_the_conversations_info_not_history(client, database_url):
    events = wire_events(5)
    answer = post(client, [live_state("running"), *events, live_state("finished", events[-1]["id"])])
    assert answer.json()["stored"] == len(events)
    assert rows(database_url) == expected(events)
    with EventStore(database_url) as store:
        (summary,) = summaries(store)
    assert summary.agent_server == {"status": "finished", "status_at": "2026-11-27T20:36:16",
                                    "title": "fix the tests", "agent": "Agent",
                                    "model": "openai/test-model", "cost_usd": 0.25, "prompt_tokens": 120,
                                    "completion_tokens": 30}
    assert "api_key" not in json.dumps(summary.agent_server)


def test_head_follows_the_agent_servers_leaf(client, database_url):
    events = wire_events(5)
    post(client, events)
    post(client, [live_state("idle", events[3]["id"])])  # the agent server navigated back
    with EventStore(database_url) as store:
        assert store.conversation(str(CID)).view().events[-1].id == events[3]["id"]


def test_conversation_info_is_stored_and_listed(client, database_url):
    info = live_state("running")["value"]
    assert client.post("/conversations", json=info).status_code == 200
    post(client, wire_events(3))
    result = invoke("conversations", database_url, "--json")
    assert result.exit_code == 0, result.output
    (listed,) = json.loads(result.output)
    assert listed["agent_server"]["status"] == "running" and listed["agent_server"]["title"] == "fix the tests"
    assert listed["events"] == 8 and listed["waiting"] == 0
    text = invoke("conversations", database_url, env={"COLUMNS": "160"}).output
    assert "running · openai/test-model · $0.2500 · fix the tests" in text


def test_a_late_conversation_info_never_rolls_the_streams_status_back(client, database_url):
    # The agent server sends the info it composed as the run started ("idle") in the
    # background; it may arrive after the event stream said "finished".
    events = wire_events(3)
    post(client, [*events, live_state("finished", events[-1]["id"])])
    assert client.post("/conversations", json=live_state("idle")["value"]).status_code == 200
    with EventStore(database_url) as store:
        (summary,) = summaries(store)
    assert summary.agent_server["status"] == "finished"
    # Deleting is reported by the conversations webhook alone: it is taken.
    assert client.post("/conversations", json=live_state("deleting")["value"]).status_code == 200
    with EventStore(database_url) as store:
        (summary,) = summaries(store)
    assert summary.agent_server["status"] == "deleting"


@pytest.mark.parametrize("body, status, words", [
    (b"[{\"kind\": ", 400, "JSON"),
    (b"{\"kind\": \"MessageEvent\"}", 400, "not a list"),
    (json.dumps([{"kind": "TelepathyEvent", "id": "x"}]).encode(), 422, "TelepathyEvent"),
    (json.dumps([{"kind": "MessageEvent", "id": "x"}]).encode(), 400, "event 8 of the batch: MessageEvent: field 'source'"),
])
def test_a_bad_batch_is_one_clear_answer_and_stores_nothing(client, database_url, body, status, words):
    good = wire_events(3)
    answer = post(client, json.dumps(good).encode()[:-1] + b"," + body[1:] if body.startswith(b"[{") else body)
    assert answer.status_code == status, answer.text
    assert words in answer.json()["error"] and "nothing of the batch was stored" in answer.json()["error"]
    assert rows(database_url) == []


def test_an_event_larger_than_the_library_stores_is_refused_whole(client, database_url):
    good = wire_events(3)
    huge = message(good, "x" * (MAX_EVENT_BYTES + 1))
    answer = post(client, [*good, huge])
    assert answer.status_code == 413, answer.text
    assert "more than the" in answer.json()["error"]
    assert rows(database_url) == []
    beyond = post(client, b"[" + b" " * (MAX_BODY_BYTES + 1) + b"]")
    assert beyond.status_code == 413
    assert post(client, good).status_code == 200  # and the receiver goes on


def message(after: list[dict[str, Any]], text: str) -> dict[str, Any]:
    """A user's message of ``text`` after these events."""
    shape = next(e for e in after if e["kind"] == "MessageEvent")
    return dict(shape, id=str(uuid.uuid4()), parent_id=after[-1]["id"],
                llm_message={"role": "user", "content": [{"type": "text", "text": text}]})


def test_a_ten_megabyte_event_is_stored_whole(client, database_url):
    good = wire_events(3)
    big = message(good, "y" * (10 << 20))
    assert post(client, [*good, big]).json()["stored"] == len(good) + 1
    with EventStore(database_url) as store:
        assert len(list(store.conversation(str(CID)).events())[-1].llm_message.content[0].text) == 10 << 20


def test_keys_refuse_a_wrong_one_and_store_nothing(tmp_path):
    location = str(tmp_path / "keys.db")
    EventStore(location).close()
    events = wire_events(3)
    with TestClient(create_app(location, ingest=True, api_keys=["k1", "k2"])) as client:
        assert post(client, events).status_code == 401
        assert post(client, events, key="k3").status_code == 401
        assert client.post("/conversations", json=live_state("idle")["value"]).status_code == 401
        assert rows(location) == []
        assert post(client, events, key="k2").status_code == 200
    assert rows(location) == expected(events)


def test_a_path_that_is_no_conversation_id_is_refused(client):
    answer = client.post("/events/not-a-uuid", content=b"[]")
    assert answer.status_code == 400 and "not a conversation id" in answer.json()["error"]


def test_the_pages_have_no_webhooks_without_ingest(tmp_path):
    location = str(tmp_path / "pages.db")
    EventStore(location).close()
    with TestClient(create_app(location)) as client:
        assert post(client, wire_events(2)).status_code in (404, 405)
    assert rows(location) == []


def test_keys_come_from_the_option_and_the_environment(monkeypatch):
    monkeypatch.setenv("OPENHANDS_MEMORY_INGEST_KEYS", "a, b  c")
    assert ingest_keys(("x",)) == ["x", "a", "b", "c"]


def test_serve_refuses_ingest_beyond_loopback_without_a_key(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENHANDS_MEMORY_INGEST_KEYS", raising=False)
    result = invoke("serve", str(tmp_path / "new.db"), "--ingest", "--host", "0.0.0.0")
    assert result.exit_code == 1
    assert "needs a key" in result.output
    assert not (tmp_path / "new.db").exists()


def test_shuffled_batches_keep_parents_across_branches(client, database_url):
    """A history that branched (the agent server navigated and went on): every event keeps
    the parent it names, whatever order its batches come in."""
    events = wire_events(8)
    branch = []
    for k in range(4):
        e = dict(events[k + 2], id=str(uuid.uuid4()))
        e["parent_id"] = branch[-1]["id"] if branch else events[5]["id"]
        branch.append(e)
    sent = batches(events + branch, 3)
    random.Random(4).shuffle(sent)
    for b in sent:
        assert post(client, b).status_code == 200
    got = dict(rows(database_url))
    assert got == dict(expected(events + branch))


def test_an_empty_batch_makes_no_conversation(client, database_url):
    assert post(client, []).json()["stored"] == 0
    with EventStore(database_url) as store:
        assert store.conversations() == []


def test_keys_belong_to_ingest(tmp_path, monkeypatch):
    EventStore(tmp_path / "pages.db").close()
    refused = invoke("serve", tmp_path / "pages.db", "--api-key", "k1")
    assert refused.exit_code == 1 and "keys are for --ingest" in refused.output
    monkeypatch.setenv("OPENHANDS_MEMORY_INGEST_KEYS", "k1")
    assert ingest_keys(()) == ["k1"]  # read only by serve --ingest: plain serve ignores it


def test_two_receivers_on_one_postgresql_at_once_keep_every_conversation(postgres_database_factory):
    """Two receivers (each its own writing store, as two `serve --ingest` processes would have)
    on one PostgreSQL database, each taking the batches of several conversations at once."""
    import threading

    url = postgres_database_factory()
    EventStore(url).close()
    histories = {uuid.uuid4(): wire_events(6, seed=k) for k in range(6)}
    failures: list[str] = []
    with TestClient(create_app(url, ingest=True)) as one, TestClient(create_app(url, ingest=True)) as two:

        def agent(client: TestClient, cid: uuid.UUID, events: list[dict[str, Any]]) -> None:
            for batch in batches(events, 5):
                answer = post(client, batch, cid=cid)
                if answer.status_code != 200:
                    failures.append(answer.text)

        threads = [threading.Thread(target=agent, args=(one if k % 2 else two, cid, events))
                   for k, (cid, events) in enumerate(histories.items())]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert failures == []
    for cid, events in histories.items():
        assert rows(url, cid) == expected(events)
    with EventStore(url) as store:
        assert doctor.check(store, full=True).problems == []


def test_backfill_needs_ingest_and_an_address_and_changes_nothing_when_refused(tmp_path):
    db = tmp_path / "new.db"
    for args, words in (
        (("--backfill", "http://127.0.0.1:8000"), "give --ingest too"),
        (("--ingest", "--backfill", "gpu-1:8000"), "is not an agent server's address"),
        (("--ingest", "--backfill-delay", "5"), "give --backfill too"),
    ):
        result = invoke("serve", str(db), *args)
        assert result.exit_code == 1 and words in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1
        assert not db.exists()


def test_an_agent_server_out_of_reach_is_a_warning_and_ingest_goes_on(tmp_path, caplog):
    """The backfill's agent server does not answer: the start's sweep and each gap are one
    warning line each (tried again later), and the webhooks are stored as ever."""
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        nowhere = s.getsockname()[1]
    location = str(tmp_path / "in.db")
    events = wire_events(5)
    half = len(events) // 2
    app = create_app(location, ingest=True, backfill=f"http://127.0.0.1:{nowhere}", backfill_delay=0.1)
    with caplog.at_level(logging.INFO, logger="openhands_memory.ingest"), TestClient(app) as client:
        assert post(client, events[half:]).json()["waiting"] == len(events) - half  # a gap

        def warned(what: str) -> bool:
            return any(r.levelno == logging.WARNING and f"backfill of {what}: cannot reach" in r.getMessage()
                       for r in caplog.records)

        deadline = time.monotonic() + 30
        while not (warned("every conversation") and warned(f"conversation {CID}")):
            assert time.monotonic() < deadline, [r.getMessage() for r in caplog.records]
            time.sleep(0.05)
        assert post(client, events[:half]).json()["released"] == len(events) - half
    assert rows(location) == expected(events)
