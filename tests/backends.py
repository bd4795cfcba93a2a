"""The ``database_url`` fixture: a fresh, empty database of each backend.

SQLite: a file in the test's temporary folder. PostgreSQL: a new database on the server
``postgres_server`` gives, dropped afterwards.
"""

from __future__ import annotations

import os
import subprocess
import uuid

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


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "contract.db")
    return request.getfixturevalue("postgres_database_factory")()
