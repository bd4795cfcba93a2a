"""Reading commands beside writers, and `sql`'s limits.

* A reader never reports a healthy file as corrupt and never reads stale data while another
  process writes: tried with a real writer process that starts after the reader's check.
* Reading commands leave no -wal/-shm files behind.
* `sql` accepts reads SQLite implements as virtual tables (table-valued pragmas, dbstat),
  refuses writes naming what was refused, stops at its time limit and at Ctrl-C, and
  bounds rows and value sizes.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from openhands_memory.conversation import EventStore

from . import factories as f
from .cli_runner import ENV, invoke

REPO = Path(__file__).resolve().parent.parent
RUNAWAY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT MAX(x) FROM c"


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("readers") / "agent.db"
    with EventStore(path) as store:
        store.create_conversation("c").append_many([f.user(f"message {i}") for i in range(30)])
    return path


@pytest.fixture
def db(template, tmp_path) -> Path:
    target = tmp_path / "agent.db"
    shutil.copyfile(template, target)
    return target


def beside(db: Path) -> set[str]:
    return {p.name for p in db.parent.iterdir()} - {db.name}


# --- no files left behind ------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ("view", "{db}", "c"), ("view", "{db}", "c", "--json"), ("view", "{db}", "c", "--format", "messages"),
    ("history", "{db}", "c"), ("stats", "{db}"), ("conversations", "{db}"), ("doctor", "{db}"),
    ("sql", "{db}", "SELECT COUNT(*) FROM event"), ("export", "{db}", "c"),
    ("condense", "{db}", "c", "--dry-run"),
])
def test_reading_commands_leave_no_files_behind(db, args):
    assert beside(db) == set()
    result = invoke(*[str(a).format(db=db) for a in args])
    assert result.exit_code == 0, result.output
    assert beside(db) == set()


def test_view_of_a_read_only_file_leaves_no_files(db):
    db.chmod(0o444)
    try:
        result = invoke("view", db, "c")
        assert result.exit_code == 0, result.output
        assert beside(db) == set()
    finally:
        db.chmod(0o644)


# --- a writer starting meanwhile -----------------------------------------------------------

WRITER = """
import sys, time
from openhands_memory.conversation import EventStore
from tests import factories as f
store = EventStore(sys.argv[1], create=False)
conv = store.conversation("c")
print("started", flush=True)
deadline = time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    conv.append_many([f.user("from the writer %d" % i) for i in range(50)])
store.close()
"""


def test_readers_beside_a_writer_that_starts_later_see_no_corruption(db):
    """The file starts closed (no -wal: the case that used to be opened immutable). A writer
    process then appends as fast as it can while `sql` and `doctor` read: every read is
    consistent, counts never go back, and nothing reports corruption."""
    assert beside(db) == set()
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), "2"], cwd=REPO, stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)}, text=True,
    )
    try:
        seen = []
        started = False
        while writer.poll() is None or not seen:
            if not started and writer.stdout is not None:
                started = writer.stdout.readline().strip() == "started"
            result = invoke("sql", db, "SELECT COUNT(*), MAX(id) FROM event", "--format", "csv")
            assert result.exit_code == 0, result.output
            count, last = map(int, result.stdout.splitlines()[1].split(","))
            assert count == last + 1  # a consistent snapshot: ids 0..last, no gaps
            seen.append(count)
            doctor = invoke("doctor", db)
            assert doctor.exit_code == 0, doctor.output
            assert "malformed" not in doctor.output
        assert writer.wait(timeout=30) == 0
    finally:
        writer.kill()
    assert seen == sorted(seen) and seen[-1] > 30  # never stale, and the writer's rows show
    final = invoke("sql", db, "SELECT COUNT(*) FROM event", "--format", "csv")
    assert int(final.stdout.splitlines()[1]) == seen[-1] or seen[-1] <= int(final.stdout.splitlines()[1])


# --- sql -------------------------------------------------------------------------------------


@pytest.mark.parametrize("query, expected", [
    ("SELECT name FROM pragma_table_info('event') WHERE name = 'payload'", "payload"),
    ("SELECT * FROM pragma_user_version", "user_version"),
    ("SELECT name FROM dbstat WHERE name = 'event' LIMIT 1", "event"),
    ("PRAGMA table_info(event)", "conversation_id"),
    ("PRAGMA user_version", "user_version"),
])
def test_sql_accepts_real_reads(db, query, expected):
    result = invoke("sql", db, query)
    assert result.exit_code == 0, result.output
    assert expected in result.stdout


@pytest.mark.parametrize("query, refused", [
    ("DELETE FROM event", "DELETE"),
    ("UPDATE event SET kind = 'x'", "UPDATE"),
    ("WITH t AS (SELECT 1) DELETE FROM event", "DELETE"),
    ("PRAGMA user_version = 3", "PRAGMA user_version=3"),
    ("PRAGMA query_only = OFF", "PRAGMA query_only=OFF"),
    ("ATTACH DATABASE 'x.db' AS x", "ATTACH"),
    ("DROP TABLE event", "DROP TABLE"),
    ("UPDATE sqlite_master SET sql = ''", "UPDATE"),
])
def test_sql_refuses_writes_naming_them(db, query, refused):
    before = db.read_bytes()
    result = invoke("sql", db, query)
    assert result.exit_code == 1
    assert result.stderr == f"Error: sql is read-only: {refused} is not allowed\n"
    assert db.read_bytes() == before


def test_sql_stops_at_its_time_limit(db):
    started = time.monotonic()
    result = invoke("sql", db, RUNAWAY, "--timeout", "0.5")
    assert time.monotonic() - started < 10
    assert result.exit_code == 1
    assert "ran past its time limit of 0.5 s" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_sql_bounds_value_size_and_rows(db):
    started = time.monotonic()
    result = invoke("sql", db, "SELECT length(zeroblob(200000000))")
    assert result.exit_code == 1 and "too big" in result.stderr
    result = invoke("sql", db, "SELECT length(printf('%.*c', 200000000, 'x'))", "--format", "csv")
    assert result.exit_code == 0 and result.stdout.splitlines()[1] in ('', '""')  # printf gives NULL
    assert time.monotonic() - started < 10  # no 200 MB value was made
    result = invoke("sql", db, "SELECT id FROM event", "--max-rows", "5", "--format", "csv")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[1:] == ["0", "1", "2", "3", "4"]
    assert "only the first 5 rows are shown" in result.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a process group")
def test_ctrl_c_stops_sql(db):
    proc = subprocess.Popen(
        [sys.executable, "cli.py", "sql", str(db), RUNAWAY, "--timeout", "120"], cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), **ENV},
    )
    time.sleep(1.5)  # past start-up, inside the query
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert err.strip() == "interrupted"
