"""Opening a database file: new files are created at head; anything else that is not exactly
ours at head is refused, without changing a byte of it."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from openhands_memory import migrate
from openhands_memory.database import inspect_sqlite_file, open_location
from openhands_memory.errors import NotOurDatabase, SchemaError, SchemaTooNew, SchemaTooOld
from openhands_memory.conversation import EventStore

from . import factories as f


def snapshot(path: Path) -> dict[str, str | None]:
    """The bytes of the file and of its SQLite sidecars (None: absent)."""
    out: dict[str, str | None] = {}
    for suffix in ("", "-wal", "-shm", "-journal"):
        p = Path(str(path) + suffix)
        out[suffix or "main"] = hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None
    return out


def folder_listing(path: Path) -> list[str]:
    return sorted(os.listdir(path.parent))


def make_at_revision(path: Path, revision: str, *, wal: bool = False) -> None:
    """A file at ``revision``, written by alembic through a plain SQLAlchemy engine."""
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        if wal:
            conn.exec_driver_sql("PRAGMA journal_mode=WAL")
        migrate.upgrade(conn, revision)
    engine.dispose()


def revision_of(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]
    finally:
        conn.close()


def assert_refused_untouched(path: Path, error: type[Exception], *match: str) -> Exception:
    before, listing = snapshot(path), folder_listing(path)
    with pytest.raises(error) as info:
        EventStore(path)
    with pytest.raises(error):
        open_location(path)
    message = str(info.value)
    for m in match:
        assert m in message
    assert snapshot(path) == before, "the refused file was changed"
    assert folder_listing(path) == listing, "opening created files beside the refused one"
    return info.value


# --- new files ----------------------------------------------------------------------------


def test_new_file_is_created_at_head(db_path):
    assert not db_path.exists()
    with EventStore(db_path) as store:
        store.create_conversation("c").append(f.user())
    assert revision_of(db_path) == migrate.HEAD
    assert inspect_sqlite_file(db_path).revision == migrate.HEAD
    conn = sqlite3.connect(db_path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    conn.close()
    assert {"conversation", "event", "condensation", "forgotten_range", "alembic_version"} <= tables
    with EventStore(db_path) as store:  # reopening a file at head works and keeps its data
        assert len(store.conversation("c")) == 1


def test_empty_file_is_initialised(db_path):
    db_path.touch()
    with EventStore(db_path) as store:
        store.create_conversation("c")
    assert revision_of(db_path) == migrate.HEAD


def test_sqlite_file_without_tables_is_initialised(db_path):
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA user_version = 7")  # writes a header, no tables
    conn.commit()
    conn.close()
    assert db_path.stat().st_size > 0
    with EventStore(db_path) as store:
        store.create_conversation("c")
    assert revision_of(db_path) == migrate.HEAD


def test_missing_file_without_create(tmp_path):
    with pytest.raises(FileNotFoundError):
        EventStore(tmp_path / "nope.db", create=False)
    assert os.listdir(tmp_path) == []


def test_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        EventStore(tmp_path / "no" / "such" / "dir" / "m.db")
    assert os.listdir(tmp_path) == []


# --- refused files ------------------------------------------------------------------------


@pytest.mark.parametrize("older", migrate.REVISIONS[:-1])
def test_older_revision_is_refused(db_path, older):
    make_at_revision(db_path, older)
    assert revision_of(db_path) == older
    err = assert_refused_untouched(db_path, SchemaTooOld, "openhands-memory migrate", str(db_path), older)
    assert err.found == older and err.head == migrate.HEAD
    assert not Path(str(db_path) + "-wal").exists()


@pytest.mark.parametrize("older", migrate.REVISIONS[:-1])
def test_older_revision_in_wal_mode_is_refused(db_path, older):
    """Files an older version of the library wrote are in WAL mode; judging one read-only
    must not leave a -wal or -shm file behind."""
    make_at_revision(db_path, older, wal=True)
    assert not Path(str(db_path) + "-wal").exists()
    assert_refused_untouched(db_path, SchemaTooOld, "openhands-memory migrate")


def test_unknown_newer_revision_is_refused(db_path):
    with EventStore(db_path) as store:
        store.create_conversation("c").append(f.user())
    conn = sqlite3.connect(db_path)
    conn.execute("UPDATE alembic_version SET version_num = '9999'")
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    err = assert_refused_untouched(db_path, SchemaTooNew, "9999", "newer")
    assert err.found == "9999"


def test_text_file_is_refused(db_path):
    db_path.write_text("these are my notes, not a database\n" * 50)
    assert_refused_untouched(db_path, NotOurDatabase, "not an SQLite file", "untouched")


def test_short_text_file_is_refused(db_path):
    db_path.write_text("x")
    assert_refused_untouched(db_path, NotOurDatabase)


def test_random_bytes_are_refused(db_path):
    db_path.write_bytes(os.urandom(8192))
    assert_refused_untouched(db_path, NotOurDatabase)


def test_corrupt_sqlite_file_is_refused(db_path):
    db_path.write_bytes(b"SQLite format 3\x00" + os.urandom(4096))
    assert_refused_untouched(db_path, NotOurDatabase)


def test_someone_elses_sqlite_file_is_refused(db_path):
    conn = sqlite3.connect(db_path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, amount REAL)")
    conn.execute("INSERT INTO invoices (amount) VALUES (12.5)")
    conn.commit()
    conn.close()
    assert_refused_untouched(db_path, NotOurDatabase, "invoices")


def test_someone_elses_alembic_database_is_refused(db_path):
    conn = sqlite3.connect(db_path)
    conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)")
    conn.execute("INSERT INTO alembic_version VALUES ('abc123')")
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()
    assert_refused_untouched(db_path, NotOurDatabase)


def test_our_tables_without_revision_are_refused(db_path):
    make_at_revision(db_path, migrate.HEAD)
    conn = sqlite3.connect(db_path)
    conn.execute("DELETE FROM alembic_version")
    conn.commit()
    conn.close()
    assert_refused_untouched(db_path, NotOurDatabase, "no schema revision")


def test_directory_is_refused_clearly(tmp_path):
    folder = tmp_path / "a-folder.db"
    folder.mkdir()
    with pytest.raises(NotOurDatabase, match="directory"):
        EventStore(folder)
    assert os.listdir(folder) == []
    empty = tmp_path / "empty-folder"
    empty.mkdir()
    with pytest.raises(NotOurDatabase, match="directory"):
        inspect_sqlite_file(empty)


def test_refusals_are_schema_errors():
    for cls in (SchemaTooOld, SchemaTooNew, NotOurDatabase):
        assert issubclass(cls, SchemaError)


# --- revisions ----------------------------------------------------------------------------


def test_revision_list_matches_the_scripts():
    assert list(migrate.REVISIONS) == migrate.script_revisions()
    assert migrate.HEAD == migrate.script_revisions()[-1]


def test_pending():
    assert migrate.pending(None) == list(migrate.REVISIONS)
    assert migrate.pending(migrate.HEAD) == []
    assert migrate.pending(migrate.REVISIONS[0]) == list(migrate.REVISIONS[1:])


def test_older_file_opens_after_upgrade(db_path):
    make_at_revision(db_path, migrate.REVISIONS[0])
    engine = create_engine(f"sqlite:///{db_path}")
    with engine.begin() as conn:
        migrate.upgrade(conn, "head")
    engine.dispose()
    with EventStore(db_path) as store:
        assert store.create_conversation("c").append(f.user()) == 0


# --- server URLs: passwords never printed, psycopg missing is one line -----------------------


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nobody listens once it is closed


@pytest.mark.parametrize("url, label", [
    ("postgresql://om:s3cret@db.example:5432/agents", "postgresql://om:***@db.example:5432/agents"),
    ("postgres://om:p@ss:w@db.example/agents", "postgres://om:***@db.example/agents"),
    ("postgresql://db.example/agents?sslmode=require&password=s3cret", "postgresql://db.example/agents?sslmode=require&password=***"),
    ("postgresql://om@db.example/agents", "postgresql://om@db.example/agents"),
])
def test_a_url_is_named_without_its_password(url, label):
    from openhands_memory.database import Location

    assert Location.parse(url).label == label


def test_an_unreachable_server_is_one_line_without_the_password():
    from openhands_memory.errors import DatabaseUnreachable

    url = f"postgresql://om:s3cret@127.0.0.1:{_closed_port()}/agents"
    with pytest.raises(DatabaseUnreachable) as e:
        EventStore(url)
    assert str(e.value) == f"{url.replace('s3cret', '***')}: cannot connect: Connection refused"


def test_a_missing_postgres_database_is_one_line(postgres_server):
    from openhands_memory.errors import DatabaseUnreachable

    url = postgres_server.rsplit("/", 1)[0] + "/ohm_no_such_database"
    with pytest.raises(DatabaseUnreachable) as e:
        EventStore(url)
    assert str(e.value) == f'{url}: cannot connect: database "ohm_no_such_database" does not exist'


def test_missing_psycopg_is_one_line_saying_what_to_install(monkeypatch):
    from openhands_memory.errors import PostgresUnavailable
    from openhands_memory.storage import read_only_query

    monkeypatch.setitem(sys.modules, "psycopg", None)  # `import psycopg` raises ImportError
    expected = ("postgresql://om:***@db.example/agents: PostgreSQL needs psycopg 3; install it with "
                "`pip install 'openhands-memory[postgres]'`")
    for attempt in (lambda: EventStore("postgresql://om:s3cret@db.example/agents"),
                    lambda: read_only_query("postgresql://om:s3cret@db.example/agents", "SELECT 1",
                                            timeout=1, max_rows=1)):
        with pytest.raises(PostgresUnavailable) as e:
            attempt()
        assert str(e.value) == expected
