"""Database paths that lead nowhere, and a migration's backup cut short.

* A symlink loop, a self-link or a dangling link as the database path used to say "was
  created by another process meanwhile … (run again)", which running again never fixed.
  Every command now says what the path is, and nothing follows a dangling link to create
  its target.
* ``migrate`` killed while copying its backup used to leave a partial ``DB.bak-…`` named like
  a complete backup; the copy is now made under a temporary name and renamed once complete.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO, run_cli


def commands(db: Path, events: Path) -> list[tuple[str, ...]]:
    d = str(db)
    return [("init", d), ("import", d, str(events)), ("append", d, "c1", str(events), "--create"),
            ("conversations", d), ("view", d, "c1"), ("export", d, "c1"), ("stats", d), ("doctor", d),
            ("sql", d, "SELECT 1"), ("migrate", d), ("condense", d, "c1"), ("request-condensation", d, "c1")]


def one_event(path: Path) -> Path:
    path.write_text(json.dumps({
        "id": "00000000-0000-0000-0000-000000000001", "timestamp": "2026-11-20T14:00:00", "source": "user",
        "kind": "MessageEvent", "llm_message": {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    }) + "\n")
    return path


@pytest.mark.parametrize("kind", ["self-link", "loop", "dangling", "dangling into a missing folder"])
def test_a_link_that_leads_nowhere_is_named(tmp_path, kind):
    db = tmp_path / "a.db"
    if kind == "self-link":
        db.symlink_to("a.db")
        says = "symbolic link loop"
    elif kind == "loop":
        db.symlink_to("b.db")
        (tmp_path / "b.db").symlink_to("a.db")
        says = "symbolic link loop"
    elif kind == "dangling":
        db.symlink_to("target.db")
        says = "dangling symbolic link to target.db"
    else:
        db.symlink_to("missing/target.db")
        says = "dangling symbolic link to missing/target.db"
    events = one_event(tmp_path.parent / f"{tmp_path.name}-events.jsonl")
    before = sorted(os.listdir(tmp_path))
    for args in commands(db, events):
        line = run_cli(*args).one_error_line()
        assert says in line and str(db) in line and "another process" not in line, (args, line)
    assert sorted(os.listdir(tmp_path)) == before, "no link was followed to create its target"


def test_a_link_to_a_database_still_works(tmp_path):
    real = tmp_path / "real.db"
    run_cli("append", real, "c1", one_event(tmp_path / "e.jsonl"), "--create").ok()
    link = tmp_path / "link.db"
    link.symlink_to("real.db")
    assert "c1" in run_cli("conversations", link).ok().stdout
    run_cli("request-condensation", link, "c1").ok()


def big_old_database(tmp_path: Path) -> Path:
    """A file at revision 0002, big enough (~40 MB) that its backup takes a while to copy."""
    events = tmp_path / "big.jsonl"
    with events.open("w") as f:
        for i in range(2000):
            text = base64.b64encode(os.urandom(15_000)).decode()
            f.write(json.dumps({
                "id": f"00000000-0000-0000-0000-{i:012d}", "timestamp": "2026-11-20T14:00:00", "source": "user",
                "kind": "MessageEvent", "llm_message": {"role": "user", "content": [{"type": "text", "text": text}]},
            }) + "\n")
    db = tmp_path / "old.db"
    run_cli("import", db, events, "--as", "c1").ok()
    run_cli("migrate", db, "--downgrade", "-r", "0002").ok()
    for p in tmp_path.glob("old.db.bak-*"):
        p.unlink()
    return db


def test_migrate_killed_while_backing_up_leaves_no_file_named_as_a_backup(tmp_path):
    db = big_old_database(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    caught = False
    for _ in range(5):  # until the kill lands while the copy is being made
        proc = subprocess.Popen([sys.executable, "-m", "openhands_memory.cli", "migrate", str(db)],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while proc.poll() is None:
            if any(".bak-" in p.name for p in tmp_path.iterdir()):  # a backup is being made
                os.kill(proc.pid, signal.SIGKILL)
                caught = True
                break
        proc.wait()
        if caught:
            break
        # it finished first: start again from the old revision
        for p in tmp_path.glob("old.db.bak-*"):
            p.unlink()
        run_cli("migrate", db, "--downgrade", "-r", "0002").ok()
        for p in tmp_path.glob("old.db.bak-*"):
            p.unlink()
    assert caught, "the backup was never seen in progress"
    for backup in tmp_path.glob("old.db.bak-*"):  # nothing is named as a backup until complete
        conn = sqlite3.connect(f"file:{backup}?mode=ro", uri=True)
        try:
            assert conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
            assert conn.execute("SELECT COUNT(*) FROM event").fetchone()[0] == 2000
        finally:
            conn.close()
    run_cli("migrate", db).ok()
    assert "is healthy" in run_cli("doctor", db, "--full").ok().stdout
