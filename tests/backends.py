"""The ``database_url`` fixture: a fresh, empty database of each backend.

SQLite: a file in the test's temporary folder. PostgreSQL: a new database on the server
``postgres_server`` gives (see tests/postgres.py), dropped afterwards.
"""

from __future__ import annotations

import os
import uuid

import pytest


def _server_base() -> str | None:
    return os.environ.get("OHM_TEST_POSTGRES_URL")


@pytest.fixture(scope="session")
def postgres_database_factory():
    """Makes fresh databases on the test server (``template``: a copy of another one's URL);
    drops them all at the end of the session."""
    base = _server_base()
    if base is None:
        pytest.skip("no PostgreSQL server (set OHM_TEST_POSTGRES_URL)")
    import psycopg

    made: list[str] = []

    def make(template: str | None = None) -> str:
        name = f"t_{uuid.uuid4().hex[:12]}"
        copy = f' TEMPLATE "{template.rsplit("/", 1)[1]}"' if template else ""
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"{copy}')
        made.append(name)
        return base.rsplit("/", 1)[0] + f"/{name}"

    yield make
    with psycopg.connect(base, autocommit=True) as admin:
        for name in made:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "contract.db")
    return request.getfixturevalue("postgres_database_factory")()
