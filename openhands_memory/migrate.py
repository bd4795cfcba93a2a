"""Alembic, driven from the library: where the revisions live, which one a file is at, upgrades.

Alembic is imported only here, and only when a file is created or migrated, so that opening
an up-to-date database stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from . import sqlite_file

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.engine import Connection

    from .location import Location

# Every revision in order, oldest first. A test checks this against the scripts, so that
# opening a file can judge its revision without loading alembic.
REVISIONS: tuple[str, ...] = ("0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009", "0010", "0011", "0012", "0013", "0014", "0015", "0016", "0017")
HEAD = REVISIONS[-1]

#: Told (done, total) as a long step of a revision advances (revision 0008's backfill of the
#: search index); the CLI sets it to draw a progress bar while it migrates.
progress: "Callable[[int, int], None] | None" = None


def script_location() -> str:
    here = Path(__file__).resolve().parent
    installed = here / "migrations"  # inside the wheel
    if (installed / "env.py").is_file():
        return str(installed)
    return str(here.parent / "migrations")  # a source checkout


def alembic_config(connection: "Connection | None" = None) -> "Config":
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", script_location())
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def script_revisions() -> list[str]:
    """The revisions alembic finds on disk, oldest first."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    return [s.revision for s in reversed(list(script.walk_revisions()))]


def _require_foreign_keys_off(connection: "Connection") -> None:
    # Batch mode rebuilds a table by copying it and dropping the original; with foreign keys
    # on, ON DELETE CASCADE would empty every child table on the way.
    if connection.dialect.name == "sqlite" and connection.exec_driver_sql("PRAGMA foreign_keys").scalar():
        raise RuntimeError("migrations must run with PRAGMA foreign_keys=OFF (set it before BEGIN)")


def upgrade(connection: "Connection", revision: str = "head") -> None:
    from alembic import command

    _require_foreign_keys_off(connection)
    command.upgrade(alembic_config(connection), revision)


def downgrade(connection: "Connection", revision: str) -> None:
    """Downgrade to ``revision`` on ``connection`` (inside the caller's transaction)."""
    from alembic import command

    _require_foreign_keys_off(connection)
    command.downgrade(alembic_config(connection), revision)


def pending(current: str | None, target: str = HEAD) -> list[str]:
    """Revisions an upgrade from ``current`` to ``target`` would apply, in order."""
    start = REVISIONS.index(current) + 1 if current else 0
    return list(REVISIONS[start : REVISIONS.index(target) + 1])


class MigrationRefused(Exception):
    """The migration would leave the database inconsistent; it was rolled back."""


def apply(location: "Location", target: str, *, backwards: bool = False) -> None:
    """Upgrade (or, ``backwards``, downgrade) to ``target`` in one transaction.

    SQLite: the transaction holds the write lock from its start; foreign keys are off while it
    runs (batch mode copies tables, and a cascade would empty their children) and are checked
    before it commits. PostgreSQL: DDL is transactional, so the whole migration is one
    transaction there too.
    """
    from sqlalchemy import create_engine, event

    engine = create_engine(location.sqlalchemy_url, connect_args=location.connect_args)
    if location.is_sqlite:

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # our BEGIN, not pysqlite's
            dbapi_conn.execute("PRAGMA busy_timeout=30000")
            dbapi_conn.execute("PRAGMA foreign_keys=OFF")

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

    try:
        with engine.connect() as conn:
            try:
                with conn.begin():
                    (downgrade if backwards else upgrade)(conn, target)
                    if location.is_sqlite:
                        broken = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                        if broken:
                            raise MigrationRefused(
                                f"the migration would leave {len(broken)} row(s) pointing at missing rows "
                                f"(first: table {broken[0][0]})"
                            )
            except Exception as e:
                found = sqlite_file.fault(e, location.label, "the migration was rolled back: nothing was changed")
                if found is None or not location.is_sqlite:
                    raise
                raise found from None
            if location.is_sqlite:  # closing would swallow a failed checkpoint: say it
                assert location.path is not None
                sqlite_file.checkpoint(conn.connection.dbapi_connection, location.path)  # type: ignore[arg-type]
    finally:
        engine.dispose()
