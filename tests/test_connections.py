"""Connections, counted for real on a small throwaway server (``max_connections`` 4, none kept
for superusers): a store holds one connection whatever it does, schema creation included;
when the server or a pooler in front of it refuses one more (too many clients), the store
and the command say so in one line at once; a pooler that finds no server connection for a
command gives up after its ``query_wait_timeout``, and the store says so in one line (a read
tries once more on a new connection, as after any lost connection: twice that wait at most)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import psycopg
import pytest

from openhands_memory.conversation import EventStore
from openhands_memory.errors import PoolerTimeout, TooManyConnections

from . import factories as f
from .backends import pooled, start_server
from .cli_runner import invoke
from .test_pooler import exercise

MAX_CONNECTIONS = 4
SMALL = (f"-c fsync=off -c synchronous_commit=off -c max_connections={MAX_CONNECTIONS} "
         "-c superuser_reserved_connections=0 -c max_wal_senders=0")


@pytest.fixture(scope="module")
def small_server() -> Iterator[str]:
    server, url = start_server(settings=SMALL)
    try:
        yield url
    finally:
        server.__exit__(None, None, None)


@pytest.fixture
def database(small_server) -> Iterator[str]:
    """An empty database on the small server (dropped afterwards, its connections ended)."""
    name = f"d{time.monotonic_ns()}"
    with psycopg.connect(small_server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield small_server.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(small_server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def occupy(url: str, n: int) -> list[psycopg.Connection]:
    """``n`` more connections to the server, once the ones closed before are gone from it (a
    backend leaves its slot a moment after its client closed the connection)."""
    conns = [psycopg.connect(url, autocommit=True)]
    deadline = time.monotonic() + 10
    while conns[0].execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
                           ).fetchone()[0] > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    return conns + [psycopg.connect(url, autocommit=True) for _ in range(n - 1)]


def assert_one_line_at_once(started: float, message: str, *words: str) -> None:
    assert time.monotonic() - started < 5, "it waited"
    assert "\n" not in message.strip() and all(w in message for w in words), message


def test_a_store_holds_one_connection_whatever_it_does(database, monkeypatch):
    """Every connection this process opens is counted as it opens (``psycopg.connect``, which
    SQLAlchemy's engines call too): none while another is open."""
    opened: list[psycopg.Connection] = []
    most = []
    real = psycopg.connect

    def counted(*args, **kwargs):
        conn = real(*args, **kwargs)
        opened.append(conn)
        most.append(sum(not c.closed for c in opened))
        return conn

    monkeypatch.setattr(psycopg, "connect", counted)
    exercise(database)  # schema creation, appends, steps, pins, recall, doctor, sql
    assert len(opened) >= 3 and max(most) == 1, most


def test_a_full_server_refuses_one_more_store_in_one_line(database):
    EventStore(database).close()
    others = occupy(database, MAX_CONNECTIONS - 1)
    try:
        with EventStore(database) as store:  # the last connection the server allows
            started = time.monotonic()
            with pytest.raises(TooManyConnections) as refused:
                EventStore(database)
            assert_one_line_at_once(started, str(refused.value), "too many clients", "pooler")
            started = time.monotonic()
            done = invoke("conversations", database)
            assert done.exit_code == 1
            assert_one_line_at_once(started, done.output, "Error: ", "cannot connect: sorry, too many clients")
            store.create_conversation("c").append(f.user("the store goes on"))
    finally:
        for conn in others:
            conn.close()


def test_a_pooler_full_of_clients_refuses_in_one_line(small_server, database):
    EventStore(database).close()
    with pooled(small_server, pool_size=1, max_client_conn=2) as running:
        url = running.url(database.rsplit("/", 1)[1])
        with EventStore(url) as one, EventStore(url) as two:
            started = time.monotonic()
            with pytest.raises(TooManyConnections) as refused:
                EventStore(url)
            assert_one_line_at_once(started, str(refused.value), "no more connections allowed (max_client_conn)")
            one.create_conversation("a").append(f.user())
            assert len(two.conversation("a").view()) == 1


def test_a_pooler_whose_server_is_full_passes_the_refusal_on(small_server, database):
    EventStore(database).close()
    with pooled(small_server, pool_size=2) as running:
        others = occupy(database, MAX_CONNECTIONS)
        try:
            started = time.monotonic()
            with pytest.raises(TooManyConnections) as refused:
                EventStore(running.url(database.rsplit("/", 1)[1]))
            assert_one_line_at_once(started, str(refused.value), "too many clients")
        finally:
            for conn in others:
                conn.close()


def test_a_command_the_pool_has_no_connection_for_fails_after_the_poolers_wait(small_server, database):
    with EventStore(database) as store:
        store.create_conversation("a").append(f.user())
    with pooled(small_server, pool_size=1, query_wait_timeout="2") as running:
        url = running.url(database.rsplit("/", 1)[1])
        with EventStore(url) as holder, EventStore(url) as waiter:
            conv = waiter.conversation("a")
            with holder.writing("a"):  # the pool's one server connection, held
                started = time.monotonic()
                with pytest.raises(PoolerTimeout) as gave_up:
                    conv.view()
                waited = time.monotonic() - started
            assert 4 <= waited < 6.5, waited  # the pooler's wait, twice: the read tried again, once
            message = str(gave_up.value)
            assert "\n" not in message and "query_wait_timeout" in message and "nothing was written" in message
            assert len(conv.view()) == 1  # the store goes on once the pool has room
