"""The ``database_url`` fixture: a fresh, empty database of each backend.

SQLite: a file in the test's temporary folder. PostgreSQL: a new database on the server
``postgres_server`` gives, dropped afterwards. PgBouncer (the modules ``POOLED`` names): the
same, reached through a real PgBouncer in transaction mode (``pgbouncer``), as a fleet
reaches its server.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from contextlib import contextmanager

import pytest


@pytest.fixture(scope="session")
def postgres_server():
    """The URL of a PostgreSQL server's ``postgres`` database: ``OHM_TEST_POSTGRES_URL``, or a
    throwaway server this session starts (tools/pg_server.py) and removes. Without the server
    binaries the PostgreSQL tests are skipped, unless ``OHM_REQUIRE_POSTGRES=1`` (CI), which
    makes them fail instead."""
    given = os.environ.get("OHM_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    server, url = start_server()
    try:
        yield url
    finally:
        server.__exit__(None, None, None)


def start_server(**settings):
    """(the server's context manager, its URL): a throwaway server started (settings: see
    ``tools.pg_server.throwaway_server``); the caller exits the manager. Without the server
    binaries the test is skipped, or fails under ``OHM_REQUIRE_POSTGRES=1``."""
    from tools.pg_server import throwaway_server

    try:
        server = throwaway_server(**settings)
        return server, server.__enter__()
    except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
        detail = getattr(e, "stderr", b"") or b""
        reason = f"no PostgreSQL server could be started: {e} {detail.decode(errors='replace')[-300:]}"
        if os.environ.get("OHM_REQUIRE_POSTGRES") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_database_factory(postgres_server):
    """Makes fresh databases on the test server, each a copy of one made at the head revision
    once (``template``: a copy of another database, by URL); drops them all at the end."""
    import psycopg

    from openhands_memory.conversation import EventStore

    base = postgres_server
    made: list[str] = []

    def url_of(name: str) -> str:
        return base.rsplit("/", 1)[0] + f"/{name}"

    def create(name: str, template: str | None) -> str:
        copy = f' TEMPLATE "{template}"' if template else ""
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"{copy}')
        made.append(name)
        return url_of(name)

    head = f"head_{uuid.uuid4().hex[:8]}"
    EventStore(create(head, None)).close()  # the real creation, by alembic, once

    def make(template: str | None = None, *, empty: bool = False) -> str:
        """A fresh database: a copy of the head-revision one, of ``template``, or ``empty``."""
        source = None if empty else template.rsplit("/", 1)[1] if template else head
        return create(f"t_{uuid.uuid4().hex[:12]}", source)

    yield make
    with psycopg.connect(base, autocommit=True) as admin:
        for name in made:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


#: The test modules whose PostgreSQL tests run a second time through PgBouncer: the storage
#: contract and the features over it (conversations, views, condensations, trees, pins,
#: recall, replay, import, doctor). The others reach no statement these do not.
POOLED = frozenset({
    "tests.test_store_on_both_backends", "tests.test_session_statements", "tests.test_write_lock",
    "tests.test_conversation_ids", "tests.test_tree", "tests.test_tree_fork", "tests.test_pins",
    "tests.test_recall", "tests.test_recall_tools", "tests.test_inspection", "tests.test_import_bulk",
    "tests.test_long_views", "tests.test_cli_backends", "tests.test_cli_tree",
    "tests.test_search_flush_equivalence", "tests.faults.test_replay_outputs",
    "tests.faults.test_repair_race", "tests.test_shared_steps",
})
BACKENDS = ("sqlite", "postgresql")


def pytest_generate_tests(metafunc):
    """``database_url``'s backends, PgBouncer's too in the ``POOLED`` modules."""
    if "database_url" in metafunc.fixturenames:
        pooled = metafunc.module.__name__ in POOLED
        metafunc.parametrize("database_url", [*BACKENDS, "pgbouncer"] if pooled else BACKENDS, indirect=True)


@pytest.fixture(scope="session")
def pgbouncer(postgres_server):
    """A PgBouncer (tools/pgbouncer.py: Debian's, in transaction mode, 10 server connections
    a database) in front of the test server, for this session."""
    with pooled(postgres_server) as running:
        yield running


@contextmanager
def pooled(server_url: str, **settings):
    """A PgBouncer in front of the server at ``server_url`` (``tools.pgbouncer.pooler``'s
    settings). Without pgbouncer installed the test is skipped, unless
    ``OHM_REQUIRE_PGBOUNCER=1`` (CI), which makes it fail instead."""
    from tools.pgbouncer import pooler

    running = pooler(server_url, **settings)
    try:
        found = running.__enter__()
    except (RuntimeError, OSError) as e:
        reason = f"no PgBouncer could be started: {e}"
        if os.environ.get("OHM_REQUIRE_PGBOUNCER") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield found
    finally:
        running.__exit__(None, None, None)


@pytest.fixture
def database_url(request, tmp_path):
    if request.param == "sqlite":
        yield str(tmp_path / "contract.db")
        return
    url = request.getfixturevalue("postgres_database_factory")()
    if request.param == "postgresql":
        yield url
        return
    name = url.rsplit("/", 1)[1]
    yield request.getfixturevalue("pgbouncer").url(name)
    # Dropped at once: the pooler keeps server connections to each database it has served
    # (until server_idle_timeout), which the tests' hundreds of databases would add up past
    # the server's max_connections. FORCE ends them.
    import psycopg

    with psycopg.connect(request.getfixturevalue("postgres_server"), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def backend_of(request) -> str:
    """Which of ``database_url``'s backends the test runs on: sqlite, postgresql, pgbouncer."""
    return request.node.callspec.params["database_url"]


def direct_url(request, database_url: str) -> str:
    """The server's own URL for ``database_url``'s database (the pooler bypassed)."""
    if backend_of(request) != "pgbouncer":
        return database_url
    return request.getfixturevalue("postgres_server").rsplit("/", 1)[0] + "/" + database_url.rsplit("/", 1)[1]
