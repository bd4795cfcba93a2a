"""PostgreSQL through a pooler: nothing of ours lives in the server's session between
transactions (which a pooler in transaction mode hands to another client), so every feature
works through PgBouncer in transaction mode and in session mode, ``migrate`` included.

The pooler is Debian's PgBouncer (tools/pgbouncer.py), with Debian's defaults: no
``ignore_startup_parameters``, no ``max_prepared_statements``."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
import sqlalchemy as sa

from openhands_memory import migrate
from openhands_memory.condensers import LLMSummarizingCondenser
from openhands_memory.conversation import EventStore
from openhands_memory.errors import ConnectionLost
from openhands_memory.inspection.doctor import check
from openhands_memory.location import Location
from openhands_memory.storage.postgres.query import read_only_query

from . import factories as f
from .backends import pooled
from .cli_runner import run
from .test_migrations import OLDER_REVISIONS, ROWS_PER_TABLE, assert_rows_intact, dropped_after, fill_generically, without

#: What a server session holds that a pooler's next client would inherit, if left there.
SESSION_STATE = (
    "SELECT (SELECT count(*) FROM pg_prepared_statements), current_setting('jit'), "
    "current_setting('max_parallel_workers_per_gather'), current_setting('default_transaction_read_only'), "
    "current_setting('default_transaction_isolation'), current_setting('lock_timeout'), "
    "current_setting('statement_timeout'), "
    "(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()), "
    "(SELECT count(*) FROM pg_listening_channels()), pg_my_temp_schema() <> 0, "
    "(SELECT count(*) FROM pg_cursors)"
)


def pair(n: int, text: str = "") -> list:
    return [f.action(f"r{n}", f"c{n}"), f.observation(f"c{n}", f"{text} output {n} " * 3)]


def exercise(url: str) -> None:
    """Every kind of statement the library runs, once: appends (one round trip, and COPY),
    views, condensing steps, pins, recall, a fork, a read-only store, the doctor, the ``sql``
    command's runner. (Repairs through a pooler: tests/faults/test_repair_race.py.)"""
    with EventStore(url) as store:
        conv = store.create_conversation("c")
        conv.append_many([f.system(), f.user("find the planted zebraword")])
        conv.append_many([e for n in range(40) for e in pair(n)])  # past one round trip: COPY
        condenser = LLMSummarizingCondenser(max_size=30, keep_first=1)
        for n in range(40, 60):
            conv.append(f.action(f"r{n}", f"c{n}"))
            conv.append(f.observation(f"c{n}", f"output {n}"))
            conv.step(condenser)
        conv.pin(1, "reinject")
        assert conv.search("zebraword", scope="all")
        conv.read(1)
        fork = conv.fork(at=21)
        fork.append(f.user("on the fork"))
        assert len(fork.view()) > 0
        report = check(store, full=True)
        assert report.healthy, report.problems
    with EventStore(url, readonly=True) as reader:
        assert len(reader.conversation("c").view()) <= 31
    assert read_only_query(Location.parse(url), "SELECT count(*) FROM event", timeout=5, max_rows=10).rows[0][0] > 100


@pytest.fixture
def lone_pooler(request, postgres_server, postgres_database_factory) -> Iterator[tuple[str, str]]:
    """(the URL of a fresh database through a PgBouncer in transaction mode whose pool holds
    one server connection, the database's own URL): every transaction through the pooler,
    any client's, runs in that one server session. Indirect parameter ``"empty"``: a database
    without our schema."""
    direct = postgres_database_factory(empty=getattr(request, "param", None) == "empty")
    with pooled(postgres_server, pool_size=1) as running:
        yield running.url(direct.rsplit("/", 1)[1]), direct


def test_nothing_is_left_in_the_server_session_through_a_pooler(lone_pooler):
    through, direct = lone_pooler
    with psycopg.connect(direct) as fresh:
        clean = fresh.execute(SESSION_STATE).fetchone()
    exercise(through)
    with psycopg.connect(through, prepare_threshold=None, autocommit=True) as next_client:
        assert next_client.execute(SESSION_STATE).fetchone() == clean
        served = next_client.execute("SELECT pg_backend_pid()").fetchone()[0]
    with EventStore(through) as store, store.reading() as db:
        assert db.one("SELECT pg_backend_pid()", ()) == served  # the one server session
        # The settings the library's transactions run with are set in each of them.
        assert db.one("SELECT current_setting('jit') || current_setting('max_parallel_workers_per_gather')", ()) == "off0"


def test_a_server_connection_ended_under_a_write_through_the_pooler_is_a_lost_connection(lone_pooler):
    """The server session under a write ended (``pg_terminate_backend``) while the write waits
    on a lock: through PgBouncer that is a lost connection, as it is direct (one line; the
    pipelined append cannot know whether its COMMIT landed, and says how to check), and the
    next call connects again. (PgBouncer may instead answer "server conn crashed?" and close
    the client, depending on when the backend ends: tests/test_fleet_load.py meets both.)"""
    from .faults.test_postgres_faults import LOCK_EVENTS, Background, holding, terminate, wait_for, waiting

    through, direct = lone_pooler
    with EventStore(through) as store:
        conv = store.create_conversation("c")
        conv.append(f.user("first"))
        with holding(direct, LOCK_EVENTS):
            write = Background(lambda: conv.append(f.user("second")))
            terminate(direct, wait_for("the append to wait on the lock", lambda: waiting(direct)))
            write.join()
        assert isinstance(write.error, ConnectionLost), repr(write.error)
        assert "\n" not in str(write.error)
        conv.append(f.user("third"))
        assert [e.llm_message.content[0].text for e in conv.events()] == ["first", "third"]


def test_a_direct_connection_keeps_only_its_prepared_statements(postgres_database_factory):
    """The server's own session (no pooler between) keeps the statements the library
    prepared there, which save the server planning them again, and nothing else."""
    url = postgres_database_factory()
    with psycopg.connect(url) as fresh:
        clean = fresh.execute(SESSION_STATE).fetchone()
    exercise(url)
    with EventStore(url) as store:
        conv = store.conversation("c")
        conv.append(f.user("one more"))
        conv.step(LLMSummarizingCondenser(max_size=30, keep_first=1))
        state = store.recorder.conn.execute(SESSION_STATE).fetchone()
        assert state[1:] == clean[1:]
        names = [r[0] for r in store.recorder.conn.execute("SELECT name FROM pg_prepared_statements")]
        assert any(n.endswith("_lock") for n in names) and all(n.startswith(("ohm_", "_pg3_")) for n in names), names


def test_prepared_statements_gone_missing_are_prepared_again(postgres_database_factory):
    """psycopg deallocates every prepared statement of a connection after a ROLLBACK; the
    appends that follow prepare theirs again, and each lands once: also when the append
    that finds them missing has just prepared one it had not needed before (for more events
    at once), which is there already when the others are prepared again."""
    url = postgres_database_factory()
    with EventStore(url) as store:
        conv = store.create_conversation("c")
        conv.append_many([f.system(), f.user("first")])
        conv.view()  # the view's cache: appends count the batches of response ids new to it
        conv.append_many(pair(0))
        conn = store.recorder.conn
        conn.execute("DEALLOCATE ALL")
        conv.append_many([f.action("r1", "c1"), f.action("r2", "c2"), f.observation("c1"), f.observation("c2")])
        conv.append(f.user("and again"))
        names = [r[0] for r in conn.execute("SELECT name FROM pg_prepared_statements")]
        assert len(names) == len(set(names)) and any(n.endswith("_lock") for n in names), names
        assert [e.seq for e in conv.events()] == list(range(9))
        assert len(conv.view()) == 9


def test_every_feature_works_through_a_pooler_in_session_mode(postgres_server, postgres_database_factory):
    direct = postgres_database_factory()
    with pooled(postgres_server, pool_mode="session", pool_size=2) as running:
        exercise(running.url(direct.rsplit("/", 1)[1]))


@pytest.mark.parametrize("lone_pooler", ["empty"], indirect=True)
@pytest.mark.parametrize("revision", [OLDER_REVISIONS[0], OLDER_REVISIONS[-1]])
def test_migrate_runs_through_a_pooler_in_transaction_mode(lone_pooler, revision):
    """The whole migration is one transaction: the pooler serves it like any other."""
    through, direct = lone_pooler
    engine = sa.create_engine(Location.parse(direct).sqlalchemy_url)
    try:
        with engine.begin() as conn:
            migrate.upgrade(conn, revision)
        meta = sa.MetaData()
        meta.reflect(engine)
        with engine.begin() as conn:
            expected = fill_generically(conn, meta)
    finally:
        engine.dispose()
    done = run("migrate", through)
    assert f": {revision} -> {migrate.HEAD} (" in done.output, done.output
    engine = sa.create_engine(Location.parse(direct).sqlalchemy_url)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() == migrate.HEAD
            assert_rows_intact(conn, without(expected, dropped_after(revision)), f"after {revision} -> head")
    finally:
        engine.dispose()
    with EventStore(through) as store:  # the library accepts what migrate made
        assert len(store.conversations()) == ROWS_PER_TABLE
    with psycopg.connect(through, prepare_threshold=None, autocommit=True) as next_client:
        assert next_client.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0] == 0
