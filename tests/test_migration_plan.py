"""Migrating as a user asks it, from the library (``migration_plan``): which revisions run,
a backup first, and the backup gone again when nothing changed. On real SQLite files and a
real PostgreSQL database (which is not copied: no backup there)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from openhands_memory import migrate, migration_plan
from openhands_memory.conversation import EventStore
from openhands_memory.database import Location, revision_of
from openhands_memory.errors import SchemaTooNew

PREVIOUS = migrate.REVISIONS[-2]


def at_previous_revision(url: str) -> str:
    """``url`` (an empty database) brought to the revision before the newest, with a
    conversation in it."""
    location = Location.parse(url)
    engine = create_engine(location.sqlalchemy_url, connect_args=location.connect_args)
    try:
        with engine.begin() as conn:
            if location.is_sqlite:
                conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
            migrate.upgrade(conn, PREVIOUS)
            conn.exec_driver_sql("INSERT INTO conversation (id, created_at, metadata) VALUES ('c', '2026-01-01', '{}')")
    finally:
        engine.dispose()
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
def old_database(request, tmp_path) -> str:
    if request.param == "sqlite":
        return at_previous_revision(str(tmp_path / "old.db"))
    return at_previous_revision(request.getfixturevalue("postgres_database_factory")(empty=True))


def backups(url: str) -> list[Path]:
    location = Location.parse(url)
    if location.path is None:
        return []
    return sorted(location.path.parent.glob(f"{location.path.name}.bak-*"))


def test_an_upgrade_is_planned_backed_up_and_run_then_a_downgrade(old_database):
    plan = migration_plan.plan(old_database)
    assert (plan.current, plan.target, plan.direction, plan.steps) == (PREVIOUS, migrate.HEAD, "upgrade",
                                                                      (migrate.HEAD,))
    assert set(plan.descriptions()) == {migrate.HEAD}
    assert revision_of(Location.parse(old_database))[1] == PREVIOUS  # planning reads only
    done = migration_plan.run(plan)
    assert done.revision == migrate.HEAD == revision_of(Location.parse(old_database))[1]
    sqlite = Location.parse(old_database).is_sqlite
    if sqlite:
        assert done.backup is not None and backups(old_database) == [done.backup]
        assert revision_of(Location.parse(done.backup))[1] == PREVIOUS  # the copy is the file as it was
        conn = sqlite3.connect(done.backup)
        assert conn.execute("SELECT id FROM conversation").fetchall() == [("c",)]
        conn.close()
    else:
        assert done.backup is None  # a server database is not copied
    with EventStore(old_database) as store:
        assert [c.id for c in store.conversations()] == ["c"]
    again = migration_plan.plan(old_database)
    assert again.steps == () and migration_plan.run(again).backup is None
    back = migration_plan.plan(old_database, PREVIOUS, downgrade=True)
    assert (back.direction, back.steps) == ("downgrade", (migrate.HEAD,))
    assert migration_plan.run(back).revision == PREVIOUS
    assert len(backups(old_database)) == (2 if sqlite else 0)


def test_what_cannot_be_planned_is_refused_before_anything_is_read_twice(old_database):
    with pytest.raises(migration_plan.UnknownRevision, match="'9999' is not a revision"):
        migration_plan.plan(old_database, "9999")
    with pytest.raises(migration_plan.UnknownRevision, match="base or one of"):
        migration_plan.plan(old_database, "9999", downgrade=True)
    with pytest.raises(migration_plan.WrongDirection, match=f"is at {PREVIOUS}, newer than {migrate.REVISIONS[0]}"):
        migration_plan.plan(old_database, migrate.REVISIONS[0])
    assert migration_plan.plan(old_database, "base", downgrade=True).steps == tuple(reversed(migrate.REVISIONS[:-1]))
    assert revision_of(Location.parse(old_database))[1] == PREVIOUS and backups(old_database) == []


def test_a_missing_empty_or_newer_file_is_refused(tmp_path):
    with pytest.raises(migration_plan.NoDatabase, match="no such database file"):
        migration_plan.plan(tmp_path / "absent.db")
    (tmp_path / "empty.db").touch()
    with pytest.raises(migration_plan.NothingToMigrate, match="is empty: nothing to migrate"):
        migration_plan.plan(tmp_path / "empty.db")
    newer = tmp_path / "newer.db"
    EventStore(newer).close()
    conn = sqlite3.connect(newer)
    with conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    conn.close()
    with pytest.raises(SchemaTooNew):
        migration_plan.plan(newer)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db", "newer.db"]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_failed_migration_changes_nothing_and_keeps_no_backup(request, tmp_path, backend):
    """A revision mark that disagrees with the tables (0001, over the newest tables): the
    first revision's DDL fails, the transaction is rolled back and the backup removed."""
    url = str(tmp_path / "a.db") if backend == "sqlite" else request.getfixturevalue("postgres_database_factory")()
    EventStore(url).close()
    location = Location.parse(url)
    engine = create_engine(location.sqlalchemy_url, connect_args=location.connect_args)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0001'")
    finally:
        engine.dispose()
    before = Path(url).read_bytes() if backend == "sqlite" else None
    plan = migration_plan.plan(url)
    with pytest.raises(migration_plan.MigrationFailed) as failed:
        migration_plan.run(plan)
    message = str(failed.value)
    assert "\n" not in message and f"upgrade 0001 -> {migrate.HEAD} failed" in message
    assert message.endswith("nothing was changed")
    assert revision_of(location)[1] == "0001"
    if before is not None:
        assert Path(url).read_bytes() == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["a.db"]
