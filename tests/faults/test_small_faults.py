"""Smaller faults (issue 17, item 6): each was a lie or a leftover, each now one clear line."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from openhands_memory import migrate
from openhands_memory.errors import SeveralRevisions
from openhands_memory.store import EventStore
from tests import factories as f

from .conftest import run_cli

# --- an alembic_version table with two rows ----------------------------------------------------


def _state(url: str) -> object:
    """Everything a refused command must leave as it was: the file's bytes, or on PostgreSQL
    the rows of alembic_version, conversation and event."""
    if "://" not in url:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(Path(url).parent.glob("*"))}
    import psycopg

    with psycopg.connect(url) as conn:
        return [conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
                for t in ("alembic_version", "conversation", "event")]


def _two_revisions(url: str) -> None:
    """A database of ours whose alembic_version holds a second, older revision."""
    with EventStore(url) as store:
        store.create_conversation("c").append_many([f.system(), f.user()])
    older = migrate.REVISIONS[0]
    if "://" not in url:
        import sqlite3

        conn = sqlite3.connect(url)
        with conn:
            conn.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (older,))
        conn.close()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO alembic_version (version_num) VALUES (%s)", (older,))


@pytest.mark.parametrize("args", [
    ("append", "{db}", "c", "{events}"), ("conversations", "{db}"), ("view", "{db}", "c"), ("migrate", "{db}"),
    ("doctor", "{db}", "--fix"),
])
def test_two_schema_revisions_are_refused_before_anything_is_written(database_url, args, tmp_path):
    _two_revisions(database_url)
    events = tmp_path / "events.jsonl"
    events.write_text(f.user("more").to_json() + "\n")
    before = _state(database_url)
    line = run_cli(*(a.format(db=database_url, events=events) for a in args)).one_error_line()
    assert "has 2 schema revisions in alembic_version" in line and migrate.REVISIONS[0] in line
    assert "left untouched" in line
    assert _state(database_url) == before
    with pytest.raises(SeveralRevisions):
        EventStore(database_url)
    assert _state(database_url) == before
