"""The agent server's webhooks received while PostgreSQL ends the receiver's session, or
restarts: between batches, and in the middle of one (its write held back by a lock another
session holds, then its backend ended or the server restarted). Each time the batch is
answered 503, nothing of it stored; the sender's next attempt (the same batch again) lands
once; the history is the sent one.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Callable

import pytest
from starlette.testclient import TestClient

from openhands_memory.conversation import EventStore
from openhands_memory.inspection import doctor
from openhands_memory.web.app import create_app

from ..test_ingest import CID, batches, expected, rows, wire_events
from .test_postgres_faults import (  # noqa: F401  (own_server: a fixture, a server the test restarts)
    LOCK_EVENTS,
    admin,
    dbname,
    holding,
    own_server,
    terminate,
    wait_for,
    waiting,
)

psycopg = pytest.importorskip("psycopg")


def receiver_backends(url: str) -> list[int]:
    with admin(url) as conn:
        return [r[0] for r in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", (dbname(url),))]


def post(client: TestClient, batch: list[dict[str, Any]]) -> Any:
    return client.post(f"/events/{CID.hex}", content=json.dumps(batch).encode(),
                       headers={"Content-Type": "application/json"})


def ingest_through(url: str, between: Callable[[], None], inside: Callable[[list[int]], None]) -> Any:
    """Batches sent to a receiver writing to ``url`` while ``between()`` ends its server
    session between two batches and ``inside(pids waiting)`` ends it while a batch's write
    waits on a lock; the sender retries what was refused. Returns the answer to the batch cut
    short (503, nothing of it stored); afterwards the history is the sent one, once."""
    EventStore(url).close()
    events = wire_events(20)
    sent = batches(events, 6)
    assert len(sent) >= 4
    with TestClient(create_app(url, ingest=True)) as client:
        assert post(client, sent[0]).status_code == 200

        between()  # the receiver's connection is gone when the next batch comes
        first = post(client, sent[1])
        if first.status_code != 200:  # the write found its connection gone: nothing stored
            assert first.status_code == 503 and "send the batch again" in first.json()["error"]
            assert rows(url) == expected(events[: len(sent[0])])
            assert post(client, sent[1]).status_code == 200  # the sender's retry

        answers: list[Any] = []
        with holding(url, LOCK_EVENTS):  # inside a batch: its write waits on a lock
            thread = threading.Thread(target=lambda: answers.append(post(client, sent[2])))
            thread.start()
            inside(wait_for("the batch's write to wait on the lock", lambda: waiting(url)))
            thread.join(60)
        (answer,) = answers
        assert answer.status_code == 503, answer.text
        assert "send the batch again" in answer.json()["error"]
        assert rows(url) == expected(events[: len(sent[0]) + len(sent[1])])  # nothing of it
        for batch in sent[2:]:  # the retry, then the rest
            assert post(client, batch).status_code == 200
        again = post(client, sent[2]).json()  # a late duplicate of the retried batch
        assert again["stored"] == 0 and again["duplicates"] == len(sent[2])
    assert rows(url) == expected(events)
    with EventStore(url) as store:
        assert doctor.check(store, full=True).problems == []
    return answer


def test_a_session_ended_between_and_inside_batches_loses_nothing_and_stores_nothing_twice(
        postgres_database_factory):
    url = postgres_database_factory()
    answer = ingest_through(url, lambda: terminate(url, receiver_backends(url)), lambda pids: terminate(url, pids))
    assert "nothing was written" in answer.json()["error"]


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_postgresql_restarted_mid_ingest_loses_nothing_and_stores_nothing_twice(own_server, mode):
    """The server the receiver writes to restarted (``pg_ctl restart``): between two batches,
    and while a batch's write waits on a lock. A batch it cut short is answered 503 with
    nothing of it stored; the sender's retry lands once, on a new connection."""
    ingest_through(own_server.database(), lambda: own_server.restart(mode), lambda _: own_server.restart(mode))
