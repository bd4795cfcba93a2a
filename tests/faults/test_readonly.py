"""Read-only places, for real: ``chmod``ed files and folders with root's override dropped
(``setpriv``), and a read-only remounted tmpfs.

Readers read what SQLite can read safely, and otherwise say exactly why in one line;
writers say the file, folder or mount is read-only. Before the fix, a writable file in a
read-only folder was "not an openhands-memory database (attempt to write a readonly
database)" for every command, readers included, and ``export`` failed on a read-only file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from .conftest import run_cli, unprivileged

N = 12


def events_file(path: Path, n: int = N, start: int = 0) -> Path:
    with path.open("w") as f:
        for i in range(start, start + n):
            f.write(json.dumps({
                "id": f"00000000-0000-0000-0000-{i:012d}", "timestamp": f"2026-11-20T14:00:{i % 60:02d}",
                "source": "user", "kind": "MessageEvent",
                "llm_message": {"role": "user", "content": [{"type": "text", "text": f"message {i} " * 50}]},
            }) + "\n")
    return path


def readers(db: Path) -> list[tuple[str, ...]]:
    return [("conversations", str(db)), ("view", str(db), "c1"), ("history", str(db), "c1"),
            ("export", str(db), "c1"), ("stats", str(db)), ("doctor", str(db), "--full"),
            ("sql", str(db), "SELECT COUNT(*) FROM event"), ("search-index", str(db)),
            ("replay", str(db), "c1", "--type", "noop")]  # a replay only reads its source


def writers(db: Path, more: Path) -> list[tuple[str, ...]]:
    return [("append", str(db), "c1", str(more)), ("request-condensation", str(db), "c1"),
            ("condense", str(db), "c1", "--type", "recent", "--set", "max_events=4", "--set", "keep_first=1"),
            ("import", str(db.with_name("new.db")), str(more)), ("search-index", str(db), "off"),
            ("append", str(db.with_name("new2.db")), "c1", str(more), "--create")]


@pytest.fixture
def made(tmp_path) -> tuple[Path, Path]:
    """(a database of N events in a folder of its own, N more events to append)."""
    folder = tmp_path / "place"
    folder.mkdir()
    db = folder / "a.db"
    run_cli("import", db, events_file(tmp_path / "in.jsonl"), "--as", "c1").ok()
    return db, events_file(tmp_path / "more.jsonl", start=N)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def check_place(db: Path, more: Path, writer_says: str) -> None:
    """Every reader reads all N events; every writer is one line saying ``writer_says``;
    nothing in the folder changes."""
    prefix = unprivileged()
    before = snapshot(db.parent)
    for args in readers(db):
        run = run_cli(*args, prefix=prefix).ok()
        if args[0] == "export":
            assert len(run.stdout.splitlines()) == N
        if args[0] == "conversations":
            assert "c1" in run.stdout
    for args in writers(db, more):
        line = run_cli(*args, prefix=prefix).one_error_line()
        assert writer_says in line and "not an openhands-memory database" not in line, (args, line)
    assert snapshot(db.parent) == before


@pytest.fixture
def restore_modes():
    changed: list[tuple[Path, int]] = []

    def chmod(path: Path, mode: int) -> None:
        changed.append((path, path.stat().st_mode & 0o7777))
        path.chmod(mode)

    yield chmod
    for path, mode in reversed(changed):
        path.chmod(mode)


def test_writable_file_in_a_read_only_folder(made, restore_modes):
    db, more = made
    restore_modes(db.parent, 0o555)
    check_place(db, more, "is read-only")


def test_read_only_file_and_folder(made, restore_modes):
    db, more = made
    restore_modes(db, 0o444)
    restore_modes(db.parent, 0o555)
    check_place(db, more, "is read-only")


def test_read_only_file_in_a_writable_folder(made, restore_modes):
    db, more = made
    restore_modes(db, 0o444)
    prefix = unprivileged()
    for args in readers(db):
        run_cli(*args, prefix=prefix).ok()
    line = run_cli("append", db, "c1", more, prefix=prefix).one_error_line()
    assert "the file is read-only" in line, line


def test_read_only_mount(small_tmpfs, tmp_path):
    mount = small_tmpfs(8_000_000)
    db = mount / "a.db"
    run_cli("import", db, events_file(tmp_path / "in.jsonl"), "--as", "c1").ok()
    more = events_file(tmp_path / "more.jsonl", start=N)
    done = subprocess.run(["mount", "-o", "remount,ro", str(mount)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    check_place(db, more, "read-only file system")


def make_wal(db: Path, extra: int) -> sqlite3.Connection:
    """A connection holding ``extra`` more events in ``db``'s WAL, not checkpointed (a
    writer at work). The caller closes it."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute(
        "INSERT INTO event (conversation_id, id, kind, source, timestamp, uid, llm_visible, has_thinking, payload) "
        "SELECT conversation_id, id + ?, kind, source, timestamp, uid || '-x', llm_visible, has_thinking, payload "
        "FROM event WHERE id < ?", (N, extra))
    return conn


def test_a_writer_at_work_in_a_read_only_folder_is_read_with_its_wal(made, restore_modes):
    """-wal and -shm exist (a writer has the file open): readers see what the WAL holds, and
    a writer can use them too."""
    db, more = made
    writer = make_wal(db, 3)
    try:
        restore_modes(db.parent, 0o555)
        run = run_cli("sql", db, "SELECT COUNT(*) FROM event", "--json", prefix=unprivileged()).ok()
        assert str(N + 3) in run.stdout
        # the files a writer needs are there already: SQLite can write, and does
        run_cli("append", db, "c1", more, prefix=unprivileged()).ok()
        run = run_cli("sql", db, "SELECT COUNT(*) FROM event", "--json", prefix=unprivileged()).ok()
        assert str(N + 3 + N) in run.stdout
    finally:
        writer.close()


def test_a_wal_without_its_shm_in_a_read_only_folder(made, tmp_path, restore_modes):
    """Only a -shm lets SQLite read a WAL, and none can be made: say so, for every command."""
    db, more = made
    writer = make_wal(db, 3)
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "a.db").write_bytes(db.read_bytes())
    (copy / "a.db-wal").write_bytes(Path(f"{db}-wal").read_bytes())
    writer.close()
    restore_modes(copy, 0o555)
    for args in readers(copy / "a.db") + writers(copy / "a.db", more)[:3]:
        line = run_cli(*args, prefix=unprivileged()).one_error_line()
        assert "-shm" in line and "not an openhands-memory database" not in line, (args, line)
    assert sorted(os.listdir(copy)) == ["a.db", "a.db-wal"]
