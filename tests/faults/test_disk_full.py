"""A full disk, for real: a small tmpfs, filled. Every writing command either succeeds with
all its data there, or fails with one ``Error:`` line naming the full disk and the path, exit
1, nothing it reported committed missing, no temporary file left, and the database healthy.

Before the fix, ``import`` and ``append --create`` into a new file on a tmpfs of 2.6-3.8 MB
printed "imported 80 events", exited 0, and left a malformed file: the final checkpoint had
failed silently and publishing the built file deleted the WAL that held the import.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import string
import uuid
from pathlib import Path

import pytest

from .conftest import REPO, CliRun, run_cli

EVENTS, TEXT = 80, 20_000  # ~1.6 MB of JSON Lines


def write_events(path: Path, n: int = EVENTS, size: int = TEXT, seed: int = 7) -> Path:
    """``n`` user messages of ``size`` random letters each (nothing compresses them)."""
    rnd = random.Random(seed)
    with path.open("w") as f:
        for i in range(n):
            text = "".join(rnd.choice(string.ascii_letters + " \n") for _ in range(size))
            f.write(json.dumps({
                "id": str(uuid.UUID(int=rnd.getrandbits(128))), "timestamp": f"2026-11-20T14:{i // 60:02d}:{i % 60:02d}",
                "source": "user", "kind": "MessageEvent",
                "llm_message": {"role": "user", "content": [{"type": "text", "text": text}]},
            }) + "\n")
    return path


@pytest.fixture(scope="module")
def scale(tmp_path_factory, inputs) -> float:
    """How much larger a database is than before the search index (revision 0008), for the
    input the tests write: the sizes below were chosen when a database of the big input was
    about its 1.6 MB, and are multiplied by this, so that each case still lands where it was
    meant to (too small, room for the WAL only, room to spare)."""
    db = tmp_path_factory.mktemp("scale") / "a.db"
    run_cli("import", db, inputs["big"]).ok()
    return max(1.0, db.stat().st_size / inputs["big"].stat().st_size)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("inputs")
    return {"big": write_events(where / "big.jsonl"),
            "more": write_events(where / "more.jsonl", seed=9),
            "half": write_events(where / "half.jsonl", n=40, seed=11)}


def fill(mount: Path, free: int) -> Path:
    """Leave about ``free`` bytes free on ``mount``."""
    import os

    st = os.statvfs(mount)
    filler = mount / "filler"
    with filler.open("wb") as f:
        left = max(st.f_bavail * st.f_frsize - free, 0)
        while left > 0:
            try:
                left -= f.write(b"\0" * min(left, 1 << 20))
            except OSError:
                break
    return filler


def events_in(db: Path) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT COUNT(*) FROM event").fetchone()[0]
    finally:
        conn.close()


def revision_in(db: Path) -> str:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]
    finally:
        conn.close()


def leftovers(folder: Path) -> list[str]:
    """Temporary files a command may leave only while it runs."""
    return sorted(p.name for p in folder.iterdir()
                  if p.name.endswith((".building", ".partial")) or ".building-" in p.name or ".partial-" in p.name)


def assert_healthy(db: Path) -> None:
    out = run_cli("doctor", db, "--full").ok().stdout
    assert "is healthy" in out, out


def disk_full_line(run: CliRun, db: Path) -> str:
    line = run.one_error_line()
    assert "disk is full" in line and str(db) in line, line
    assert "not an openhands-memory database" not in line, line
    assert "was committed" not in line, "a write that committed is not an error"
    return line


def succeeded(run: CliRun, db: Path) -> bool:
    """The run succeeded, maybe with one warning that its committed write is still in the
    WAL (the copy into the file found the disk full); False: it failed with one line."""
    if run.code != 0:
        disk_full_line(run, db)
        return False
    run.ok()
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert lines == [] or (len(lines) == 1 and lines[0].startswith("Warning: ") and "disk is full" in lines[0]
                           and "was committed" in lines[0]), run.stderr
    return True


# Sizes around the input's (1.6 MB): too small for it, for it and its WAL, and room to spare.
SIZES = [1_200_000, 2_000_000, 2_600_000, 3_000_000, 3_400_000, 3_800_000, 6_000_000]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("how", ["import", "append --create"])
def test_a_new_file_is_whole_or_absent(small_tmpfs, scale, inputs, size, how):
    mount = small_tmpfs(int(size * scale))
    db = mount / "new.db"
    if how == "import":
        run = run_cli("import", db, inputs["big"])
    else:
        run = run_cli("append", db, "c1", inputs["big"], "--create")
    if run.code == 0:
        run.ok()
        assert f"{EVENTS} events" in run.stdout
        assert events_in(db) == EVENTS
        assert_healthy(db)
    else:
        line = disk_full_line(run, db)
        assert "was not created" in line, line
        assert not db.exists()
        assert sorted(p.name for p in mount.iterdir()) == [], "a failed build leaves nothing behind"


@pytest.mark.parametrize("free", [0, 200_000, 1_000_000, 1_800_000, 2_400_000, 3_400_000, 6_000_000])
def test_append_to_a_file_keeps_what_it_reports(small_tmpfs, scale, inputs, free):
    mount = small_tmpfs(int(10_000_000 * scale))
    db = mount / "a.db"
    run_cli("import", db, inputs["half"], "--as", "c1").ok()
    filler = fill(mount, int(free * scale))
    run = run_cli("append", db, "c1", inputs["more"])
    expected = 40 + EVENTS if succeeded(run, db) else 40
    filler.unlink()
    assert events_in(db) == expected
    assert_healthy(db)
    # "any later command on it finishes the copy": the WAL is emptied into the file
    run_cli("conversations", db).ok()
    assert not Path(f"{db}-wal").exists()
    assert leftovers(mount) == []


def test_a_committed_append_whose_copy_into_the_file_fails_is_a_warning(small_tmpfs, scale, inputs):
    """Room for the WAL, none for copying it into the file: the append committed, so the
    command succeeds (a retrying script must not append it twice) and warns, in one line,
    where the events are; the next command finishes the copy."""
    warned = []
    for free in (2_000_000, 2_400_000, 2_800_000, 3_400_000):
        mount = small_tmpfs(int(10_000_000 * scale))
        db = mount / "a.db"
        run_cli("import", db, inputs["half"], "--as", "c1").ok()
        filler = fill(mount, int(free * scale))
        run = run_cli("append", db, "c1", inputs["more"])
        if run.code == 0 and run.stderr.strip():
            assert succeeded(run, db)
            assert f"appended {EVENTS} events" in run.stdout
            warned.append(free)
            filler.unlink()
            assert events_in(db) == 40 + EVENTS
            run_cli("conversations", db).ok()
            assert not Path(f"{db}-wal").exists()
    assert warned, "no free space left the WAL committed and the copy failed: the case went untested"


@pytest.mark.parametrize("free", [0, 20_000, 60_000, 150_000, 400_000, 2_000_000])
def test_condense(small_tmpfs, scale, inputs, free):
    mount = small_tmpfs(int(10_000_000 * scale))
    db = mount / "a.db"
    run_cli("import", db, inputs["big"], "--as", "c1").ok()
    filler = fill(mount, int(free * scale))
    run = run_cli("condense", db, "c1", "--type", "amortized", "--set", "max_size=20", "--set", "keep_first=1")
    expected = EVENTS + 1 if succeeded(run, db) else EVENTS
    filler.unlink()
    assert events_in(db) == expected
    assert_healthy(db)


@pytest.mark.parametrize("free", [0, 800_000, 1_700_000, 2_200_000, 2_600_000, 3_200_000, 6_000_000])
def test_migrate(small_tmpfs, scale, inputs, tmp_path, free):
    old = tmp_path / "old.db"
    run_cli("import", old, inputs["big"], "--as", "c1").ok()
    run_cli("migrate", old, "--downgrade", "-r", "0002").ok()
    mount = small_tmpfs(int(12_000_000 * scale))
    db = mount / "a.db"
    db.write_bytes(old.read_bytes())
    filler = fill(mount, int(free * scale))
    run = run_cli("migrate", db)
    migrated = succeeded(run, db)
    filler.unlink()  # (reading on a full disk needs room for a -shm)
    backups = sorted(mount.glob("a.db.bak-*"))
    if migrated:
        assert revision_in(db) != "0002"
        assert len(backups) == 1
    else:
        assert revision_in(db) == "0002", run.stderr
        assert backups == [], "no backup is left by a migration that changed nothing"
    for backup in backups:  # a file named as a backup is a complete one
        assert revision_in(backup) == "0002" and events_in(backup) == EVENTS
    assert leftovers(mount) == []
    assert events_in(db) == EVENTS
    run_cli("migrate", db).ok()
    assert_healthy(db)


DANGLING = [
    {"id": "00000000-0000-0000-0000-000000000001", "timestamp": "2026-11-20T14:00:00", "source": "user",
     "kind": "MessageEvent", "llm_message": {"role": "user", "content": [{"type": "text", "text": "list the files"}]}},
    {"id": "00000000-0000-0000-0000-000000000002", "timestamp": "2026-11-20T14:00:01", "source": "agent",
     "kind": "ActionEvent", "thought": [], "tool_name": "terminal", "tool_call_id": "call_1",
     "llm_response_id": "resp_1", "action": {"kind": "TerminalAction", "command": "ls"},
     "tool_call": {"id": "call_1", "name": "terminal", "arguments": "{\"command\": \"ls\"}", "origin": "completion"}},
    {"id": "00000000-0000-0000-0000-000000000003", "timestamp": "2026-11-20T14:00:02", "source": "user",
     "kind": "MessageEvent", "llm_message": {"role": "user", "content": [{"type": "text", "text": "well?"}]}},
]


@pytest.mark.parametrize("free", [0, 8_000, 40_000, 200_000])
def test_doctor_fix(small_tmpfs, scale, inputs, tmp_path, free):
    mount = small_tmpfs(int(10_000_000 * scale))
    db = mount / "a.db"
    source = tmp_path / "dangling.jsonl"
    source.write_text("".join(json.dumps(e) + "\n" for e in DANGLING))
    run_cli("import", db, inputs["big"], "--as", "big").ok()
    run_cli("import", db, source, "--as", "c1").ok()
    filler = fill(mount, int(free * scale))
    run = run_cli("doctor", db, "--fix")
    if run.code == 0:
        succeeded(run, db)
        assert "fixed:" in run.stdout
        expected = len(DANGLING) + 1
    elif run.stderr.strip():
        disk_full_line(run, db)
        expected = len(DANGLING)
    else:  # doctor's own exit 1: problems remain, reported on stdout
        assert "problem" in run.stdout
        expected = len(DANGLING)
    filler.unlink()
    assert events_in(db) == EVENTS + expected
    run_cli("doctor", db, "--fix")
    assert_healthy(db)


def test_a_reader_on_a_full_disk_says_so_and_leaves_nothing(small_tmpfs, scale, inputs):
    """SQLite needs room for a -shm even to read a WAL file; a full disk is said as such (it
    used to be "not an openhands-memory database") and the stub -shm is not left behind."""
    mount = small_tmpfs(int(4_000_000 * scale))
    db = mount / "a.db"
    run_cli("import", db, inputs["half"], "--as", "c1").ok()
    filler = fill(mount, 0)
    for args in (("conversations", db), ("view", db, "c1"), ("export", db, "c1"), ("stats", db),
                 ("doctor", db), ("sql", db, "SELECT 1"), ("append", db, "c1", inputs["more"])):
        run = run_cli(*args)
        if run.code == 0:  # SQLite found room after all
            continue
        disk_full_line(run, db)
        assert sorted(p.name for p in mount.iterdir()) == ["a.db", "filler"], args
    filler.unlink()
    assert events_in(db) == 40


def test_a_full_temporary_folder_fails_a_large_write_and_says_where(small_tmpfs, inputs, tmp_path):
    """A large write (switching the search index off or on, deleting a conversation)
    journals in SQLite's temporary folder rather than in memory. With that folder full and
    the database's own disk roomy, the one line names the folder and SQLITE_TMPDIR, and the
    index is as it was; with room there, the same command works."""
    db = tmp_path / "a.db"
    run_cli("import", db, inputs["big"], "--as", "c1").ok()
    temp = small_tmpfs(1_000_000)
    filler = fill(temp, 0)
    run = run_cli("search-index", db, "off", env={"SQLITE_TMPDIR": str(temp)})
    line = run.one_error_line()
    assert f"{temp}: the disk is full" in line and "SQLITE_TMPDIR" in line and str(db) in line, line
    assert "nothing was written" in line, line
    assert "is on" in run_cli("search-index", db).ok().stdout
    assert_healthy(db)
    filler.unlink()
    run_cli("search-index", db, "off", env={"SQLITE_TMPDIR": str(temp)}).ok()
    assert "is off" in run_cli("search-index", db).ok().stdout


def write_many_small(path: Path, n: int) -> Path:
    """``n`` short user messages: an import whose deferred indexes' keys outgrow one sort run."""
    rnd = random.Random(5)
    with path.open("w") as f:
        for i in range(n):
            f.write(json.dumps({
                "id": str(uuid.UUID(int=rnd.getrandbits(128))), "timestamp": "2026-11-20T14:00:00",
                "source": "user", "kind": "MessageEvent",
                "llm_message": {"role": "user", "content": [{"type": "text", "text": f"m{i}"}]},
            }) + "\n")
    return path


def test_a_full_temporary_folder_fails_an_import_whose_indexes_sort_there(small_tmpfs, tmp_path):
    """The indexes a new file's import builds after its rows sort their keys in runs kept in
    SQLite's temporary folder (``SqliteSession.build_indexes``): with that folder full, the
    one line names it and SQLITE_TMPDIR, and no file is left; with room, the same import
    works."""
    source = write_many_small(tmp_path / "many.jsonl", 150_000)  # ~9 MB of (conversation, uid) keys
    temp = small_tmpfs(40_000_000)
    filler = fill(temp, 1_000_000)  # room for the small journals before, not for the sort
    db = tmp_path / "a.db"
    run = run_cli("import", db, source, "--no-search-index", env={"SQLITE_TMPDIR": str(temp)})
    line = run.one_error_line()
    assert f"{temp}: the disk is full" in line and "SQLITE_TMPDIR" in line and "nothing was written" in line, line
    assert leftovers(tmp_path) == [] and not db.exists()
    filler.unlink()
    run_cli("import", db, source, "--no-search-index", env={"SQLITE_TMPDIR": str(temp)}).ok()
    assert events_in(db) == 150_000
    assert_healthy(db)


# Asks for the writeback every 4 KB of payload, in batches of 8 events, and notes each request.
WRITEBACK_EVERY_4_KB = '''
import os
from openhands_memory import sqlite_file
from openhands_memory.io import importer
from openhands_memory.storage import sqlite as storage

storage.WRITEBACK_BYTES = 4096
_import_path, _start = importer.import_path, sqlite_file.Writeback.start
importer.import_path = lambda *a, **k: _import_path(*a, **{**k, "chunk": 8})
def start(self):
    with open(os.environ["OHM_TEST_WRITEBACKS"], "a") as f:
        f.write(str(self.path) + "\\n")
    _start(self)
sqlite_file.Writeback.start = start
'''


@pytest.mark.parametrize("size", [2_000_000, 3_000_000, 4_000_000, 8_000_000])
def test_a_new_file_handed_to_the_disk_as_it_grows_is_whole_or_absent(small_ext4, tmp_path, scale, inputs, size):
    """On a disk with the kernel's writeback (ext4, not tmpfs), a new file's pages asked to be
    written back batch after batch: a full disk is still one line, exit 1, and no file."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(WRITEBACK_EVERY_4_KB)
    asked = tmp_path / "writebacks.txt"
    mount = small_ext4(int(size * scale))
    db = mount / "new.db"
    run = run_cli("import", db, inputs["big"], env={"PYTHONPATH": f"{hook}{os.pathsep}{REPO}",
                                                    "OHM_TEST_WRITEBACKS": str(asked)})
    if run.code == 0:
        run.ok()
        assert events_in(db) == EVENTS
        assert_healthy(db)
        assert len(asked.read_text().splitlines()) >= EVENTS // 8 - 1  # a request a batch, about
    else:
        line = disk_full_line(run, db)
        assert "was not created" in line, line
        assert not db.exists()
        assert sorted(p.name for p in mount.iterdir()) == ["lost+found"], "a failed build leaves nothing behind"
