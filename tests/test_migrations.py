"""Migrations: the revisions build exactly the models' schema, and upgrading keeps every row.

The data test is generic: for each revision it reflects the schema as it stood then, fills
every table with synthetic rows (foreign keys satisfied from rows already inserted), upgrades
to head and checks that every value is still there. A new revision is covered without
touching this file; a new column type makes the generator fail loudly until it learns it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import create_engine

from openhands_memory import migrate
from openhands_memory.conversation import EventStore
from openhands_memory.storage import search

from . import factories as f

REPO = Path(__file__).resolve().parent.parent
ROWS_PER_TABLE = 6


def alembic(*args: str, db: Path) -> subprocess.CompletedProcess:
    """The real ``alembic`` command, run from the repo root as a user would."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "alembic", "-x", f"db={db}", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )


def assert_no_drift(db: Path) -> None:
    result = alembic("check", db=db)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "No new upgrade operations detected" in output


# --- (a) the revisions produce the models' schema -----------------------------------------


def test_cli_upgrade_head_then_check(tmp_path):
    db = tmp_path / "cli.db"
    result = alembic("upgrade", "head", db=db)
    assert result.returncode == 0, result.stdout + result.stderr
    assert_no_drift(db)
    current = alembic("current", db=db)
    assert current.returncode == 0
    assert migrate.HEAD in current.stdout
    with EventStore(db) as store:  # the library accepts what the CLI made
        assert store.create_conversation("c").append(f.user()) == 0


def test_library_created_file_has_no_drift(tmp_path):
    db = tmp_path / "lib.db"
    with EventStore(db) as store:
        store.create_conversation("c").append(f.user())
    assert_no_drift(db)


def test_cli_upgrade_step_by_step_then_check(tmp_path):
    db = tmp_path / "steps.db"
    for revision in migrate.script_revisions():
        result = alembic("upgrade", revision, db=db)
        assert result.returncode == 0, result.stdout + result.stderr
    assert_no_drift(db)


def test_full_downgrade_and_back(tmp_path):
    db = tmp_path / "down.db"
    engine = create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        migrate.upgrade(conn, "head")
    with engine.begin() as conn:
        migrate.downgrade(conn, "base")
    tables = set(sa.inspect(engine).get_table_names()) - {"alembic_version"}
    assert tables == set(), "downgrade to base leaves tables behind"
    with engine.begin() as conn:
        migrate.upgrade(conn, "head")
    engine.dispose()
    assert_no_drift(db)


# --- (b) upgrading keeps every row --------------------------------------------------------


def synthesize(column: sa.Column, table: str, i: int) -> Any:
    """A value of the column's type, distinct per row (so primary keys are unique)."""
    t = column.type
    if column.nullable and not column.primary_key and i % 3 == 2:
        return None  # NULLs must survive too
    if isinstance(t, sa.JSON):
        return {"table": table, "column": column.name, "row": i, "list": [i, [i, i + 1]], "ok": True,
                "text": f"é✓ {i}"}
    if isinstance(t, sa.Boolean):
        return i % 2 == 0
    if isinstance(t, sa.Integer):
        return 1000 * (i + 1) + len(column.name)
    if isinstance(t, (sa.Float, sa.Numeric)):
        return i + 0.25 + len(column.name) / 1024
    if isinstance(t, sa.types._Binary):  # BLOB, BYTEA
        return f"{table}.{column.name}#{i}".encode() + bytes([0, 255])
    if isinstance(t, sa.String):  # Text, VARCHAR, ...
        return f"{table}.{column.name}#{i} 'quoted' \"double\" ünïcode ✓"
    raise AssertionError(
        f"test_migrations cannot make values for {table}.{column.name} of type {t!r}: teach synthesize()"
    )


#: The search index's tables (revision 0008; the queue until 0011, the watermarks since; on
#: PostgreSQL, its texts since 0012):
#: derived from the events by triggers, never written to directly (their checks:
#: tests/test_recall.py).
SEARCH_TABLES = (search.WORDS, search.GRAMS, search.STATE, "search_pending", search.PG_TEXTS)


def fill_generically(conn: sa.Connection, meta: sa.MetaData) -> dict[str, list[dict[str, Any]]]:
    """Insert ROWS_PER_TABLE rows into every table, parents first; returns what was inserted."""
    inserted: dict[str, list[dict[str, Any]]] = {}
    for table in meta.sorted_tables:
        if table.name == "alembic_version" or table.name.startswith(SEARCH_TABLES):
            continue
        rows = []
        for i in range(ROWS_PER_TABLE):
            row = {c.name: synthesize(c, table.name, i) for c in table.columns}
            for fk in table.foreign_key_constraints:
                parent_rows = inserted[fk.referred_table.name]
                # row i refers to parent row i: one-to-one, so primary keys made of foreign
                # keys stay unique
                parent = parent_rows[i % len(parent_rows)]
                for element in fk.elements:
                    row[element.parent.name] = parent[element.column.name]
            rows.append(row)
        conn.execute(table.insert(), rows)
        inserted[table.name] = rows
    return inserted


def read_back(conn: sa.Connection, expected: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The rows now stored, restricted to the columns that the expected rows have."""
    meta = sa.MetaData()
    meta.reflect(conn)
    out = {}
    for name, rows in expected.items():
        assert name in meta.tables, f"table {name} disappeared"
        table = meta.tables[name]
        columns = list(rows[0])
        missing = [c for c in columns if c not in table.c]
        assert not missing, f"{name}: columns {missing} disappeared"
        order = [table.c[c.name] for c in table.primary_key.columns] or [table.c[c] for c in columns]
        result = conn.execute(sa.select(*[table.c[c] for c in columns]).order_by(*order))
        out[name] = [dict(r._mapping) for r in result]
    return out


def normalized(tables: dict[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
    """Order-independent, type-exact comparison form (JSON text of each row, sorted)."""
    return {name: sorted(json.dumps(r, sort_keys=True, default=lambda b: bytes(b).hex()) for r in rows) for name, rows in tables.items()}


def assert_rows_intact(conn: sa.Connection, expected: dict[str, list[dict[str, Any]]], when: str) -> None:
    actual = normalized(read_back(conn, expected))
    for name, rows in normalized(expected).items():
        lost = [r for r in rows if r not in actual[name]]
        assert not lost, f"{when}: {len(lost)} row(s) of {name} changed or lost, first: {lost[0]}"
        assert len(actual[name]) == len(rows), f"{when}: {name} has {len(actual[name])} rows, not {len(rows)}"


def dropped_after(revision: str) -> dict[str, set[str]]:
    """Columns that revisions after ``revision`` remove (their ``dropped_columns``): their
    data moved elsewhere, which the revision's own test checks."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(migrate.alembic_config())
    out: dict[str, set[str]] = {}
    for rev in migrate.REVISIONS[migrate.REVISIONS.index(revision) + 1 :]:
        for table, columns in getattr(script.get_revision(rev).module, "dropped_columns", {}).items():
            out.setdefault(table, set()).update(columns)
    return out


def without(expected: dict[str, list[dict[str, Any]]], dropped: dict[str, set[str]]) -> dict[str, list[dict[str, Any]]]:
    return {
        name: [{k: v for k, v in row.items() if k not in dropped.get(name, set())} for row in rows]
        for name, rows in expected.items()
    }


def foreign_key_problems(conn: sa.Connection) -> list:
    return conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()


OLDER_REVISIONS = migrate.script_revisions()[:-1]


@pytest.mark.parametrize("revision", OLDER_REVISIONS, ids=[f"from_{r}" for r in OLDER_REVISIONS])
def test_upgrade_keeps_every_row(tmp_path, revision):
    db = tmp_path / f"at-{revision}.db"
    engine = create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        migrate.upgrade(conn, revision)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() == revision
    meta = sa.MetaData()
    meta.reflect(engine)
    assert len(meta.tables) > 1

    # Fill through a separate engine with foreign keys on, to prove the synthetic rows are
    # consistent. Migrations then run with foreign keys off, as the alembic CLI runs them:
    # batch mode recreates tables, and with ON DELETE CASCADE enforced, dropping a parent
    # table would delete its children's rows.
    filler = create_engine(f"sqlite:///{db}")
    with filler.begin() as conn:
        conn.exec_driver_sql("PRAGMA foreign_keys=ON")
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        expected = fill_generically(conn, meta)
    filler.dispose()
    with engine.connect() as conn:
        assert_rows_intact(conn, expected, f"as inserted at {revision}")  # the generator itself

    with engine.begin() as conn:
        migrate.upgrade(conn, "head")
    dropped = dropped_after(revision)
    expected = without(expected, dropped)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() == migrate.HEAD
        assert_rows_intact(conn, expected, f"after upgrade {revision} -> head")
        columns = {t: {c["name"] for c in sa.inspect(conn).get_columns(t)} for t in dropped}
        assert all(not (cols & columns[t]) for t, cols in dropped.items()), "a dropped column is still there"
        assert foreign_key_problems(conn) == []

    # undo the newest revision and redo it: still every row
    previous = migrate.script_revisions()[-2]
    with engine.begin() as conn:
        migrate.downgrade(conn, previous)
    with engine.begin() as conn:
        migrate.upgrade(conn, "head")
    with engine.connect() as conn:
        assert_rows_intact(conn, expected, f"after downgrade to {previous} and upgrade to head")
        assert foreign_key_problems(conn) == []
    engine.dispose()

    # and the library opens the upgraded file and reads the events it holds
    with EventStore(db) as store:
        assert len(store.conversations()) == ROWS_PER_TABLE
        assert_no_drift(db)


def test_every_revision_is_covered():
    """The data test runs from every revision but head; head has nothing to upgrade to."""
    assert OLDER_REVISIONS == list(migrate.REVISIONS[:-1])


# --- 0003: canonical hidden runs ----------------------------------------------------------


def test_0003_turns_fragmented_hidden_unions_into_canonical_runs(tmp_path):
    """A file written by 0002 (the union of forgotten ranges on every condensation row, split
    at every Condensation row) upgrades to the hidden runs the library writes today."""
    from openhands_memory import ranges
    from openhands_memory.storage import hidden
    from openhands_memory.storage.sqlite import SqliteSession

    from .sdk_shape import sdk_history

    db = tmp_path / "old.db"
    with EventStore(db) as store:
        conv = store.create_conversation("c")
        conv.append_many(list(sdk_history(400, seed=7)))
        store.create_conversation("other").append_many(list(sdk_history(200, seed=8)))
        want = {cid: hidden.stored(SqliteSession(store.db), cid) for cid in ("c", "other")}
        views = {cid: [e.id for e in store.conversation(cid).view()] for cid in ("c", "other")}
        assert len(hidden.live(SqliteSession(store.db), "c")) == 1  # 13 condensations, one canonical run
    engine = create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        migrate.downgrade(conn, "0002")
    with engine.begin() as conn:  # what 0002's code wrote: the plain union, run per gap
        fragmented = 0
        for cid in ("c", "other"):
            union: list = []
            for (cond,) in conn.exec_driver_sql(
                    "SELECT id FROM condensation WHERE conversation_id = ? ORDER BY id", (cid,)).fetchall():
                runs = conn.exec_driver_sql(
                    "SELECT start_id, end_id FROM forgotten_range WHERE conversation_id = ? AND condensation_id = ?",
                    (cid, cond)).fetchall()
                union = ranges.merge(union, runs)
                fragmented = max(fragmented, len(union))
                conn.exec_driver_sql("UPDATE condensation SET hidden = ? WHERE conversation_id = ? AND id = ?",
                                     (json.dumps([list(r) for r in union]), cid, cond))
        assert fragmented > 10  # the fragmented unions 0002 wrote, which 0003 must mend
    with engine.begin() as conn:
        migrate.upgrade(conn, "head")
    engine.dispose()
    with EventStore(db) as store:
        for cid in ("c", "other"):
            assert hidden.stored(SqliteSession(store.db), cid) == want[cid]
            assert [e.id for e in store.conversation(cid).view()] == views[cid]


# --- the same on PostgreSQL ------------------------------------------------------------------


def pg_engine(url: str):
    from openhands_memory.database import Location

    return create_engine(Location.parse(url).sqlalchemy_url)


def test_postgres_upgrade_head_then_check(postgres_database_factory):
    url = postgres_database_factory(empty=True)
    result = alembic("upgrade", "head", db=url)
    assert result.returncode == 0, result.stdout + result.stderr
    check = alembic("check", db=url)
    assert check.returncode == 0 and "No new upgrade operations detected" in check.stdout + check.stderr, (
        check.stdout + check.stderr)
    with EventStore(url) as store:  # the library accepts what the CLI made
        assert store.create_conversation("c").append(f.user()) == 0


@pytest.mark.parametrize("revision", OLDER_REVISIONS, ids=[f"from_{r}" for r in OLDER_REVISIONS])
def test_postgres_upgrade_keeps_every_row(postgres_database_factory, revision):
    url = postgres_database_factory(empty=True)
    engine = pg_engine(url)
    try:
        with engine.begin() as conn:
            migrate.upgrade(conn, revision)
        meta = sa.MetaData()
        meta.reflect(engine)
        with engine.begin() as conn:  # PostgreSQL enforces the foreign keys as rows go in
            expected = fill_generically(conn, meta)
        with engine.begin() as conn:
            migrate.upgrade(conn, "head")
        expected = without(expected, dropped_after(revision))
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() == migrate.HEAD
            assert_rows_intact(conn, expected, f"after upgrade {revision} -> head")
        previous = migrate.script_revisions()[-2]
        with engine.begin() as conn:
            migrate.downgrade(conn, previous)
        with engine.begin() as conn:
            migrate.upgrade(conn, "head")
        with engine.connect() as conn:
            assert_rows_intact(conn, expected, f"after downgrade to {previous} and upgrade to head")
    finally:
        engine.dispose()
    with EventStore(url) as store:
        assert len(store.conversations()) == ROWS_PER_TABLE
