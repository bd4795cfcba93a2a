"""The command line's text: examples in every --help, --json on every command, counts that
agree, lines within 80 columns, migrate failures in one line, and the README's library
example run twice."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from openhands_memory.cli import COMMANDS
from openhands_memory import migrate
from openhands_memory.conversation import EventStore

from . import factories as f
from .cli_runner import invoke

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_help_has_an_example_and_fits_80_columns(command):
    result = invoke(command, "--help")
    assert result.exit_code == 0
    assert "Example:" in result.stdout
    assert f"openhands-memory {command} " in result.stdout
    assert all(len(line) <= 80 for line in result.stdout.splitlines())


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_takes_json(command):
    assert "--json" in invoke(command, "--help").stdout


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, dict]:
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    result = invoke("demo", path, "--json")
    assert result.exit_code == 0, result.output
    return path, json.loads(result.stdout)


def test_demo_json_counts_what_was_stored(demo):
    path, built = demo
    assert built["stored"] == built["replayed"] + built["condensations"]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM event").fetchone()[0] == built["stored"]


def test_view_and_stats_count_visible_events_alike(demo):
    path, built = demo
    stats = json.loads(invoke("stats", path, "demo", "--json").stdout)
    visible = stats["visible"] if "visible" in stats else stats["conversations"][0]["visible"]
    header = invoke("view", path, "demo").stdout.splitlines()[0]
    assert f"· {visible} events + 1 summary ·" in header
    assert visible + built["view_summaries"] == built["view_events"]


def test_init_migrate_export_json(tmp_path):
    db = tmp_path / "a.db"
    assert json.loads(invoke("init", db, "--json").stdout) == {"path": str(db), "created": True, "revision": migrate.HEAD}
    assert json.loads(invoke("init", db, "--json").stdout)["created"] is False
    moved = json.loads(invoke("migrate", db, "--json").stdout)
    assert moved["steps"] == [] and moved["from"] == moved["to"] == migrate.HEAD
    with EventStore(db) as store:
        store.create_conversation("c").append(f.user("hi"))
    out = json.loads(invoke("export", db, "c", "-o", tmp_path / "c.jsonl", "--json").stdout)
    assert out["events"] == 1 and out["path"] == str(tmp_path / "c.jsonl")
    assert invoke("export", db, "c", "--json").exit_code == 2  # the events go to stdout


def test_migrate_with_a_revision_mark_that_disagrees_is_one_line(tmp_path):
    db = tmp_path / "a.db"
    EventStore(db).close()
    conn = sqlite3.connect(db)  # says 0001, but has 0002's llm_call table
    with conn:
        conn.execute("UPDATE alembic_version SET version_num = '0001'")
    conn.close()
    before = db.read_bytes()
    result = invoke("migrate", db)
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and f"upgrade 0001 -> {migrate.HEAD} failed" in lines[0]
    assert "revision mark (0001) may disagree with its tables; nothing was changed" in lines[0]
    assert "Traceback" not in result.output and "sqlalchemy" not in result.output.lower()
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.db"]  # no backup left either


def test_an_interrupted_init_leaves_no_file(tmp_path):
    """init builds beside the path and links the finished file into place: a process killed
    meanwhile leaves no file (a 0-byte one would be taken as a new database)."""
    db = tmp_path / "new.db"
    code = ("import os, sys\nfrom openhands_memory import database\nreal = database.create_schema\n"
            "def dying(location):\n    real(location)\n    os._exit(9)\n"
            "database.create_schema = dying\nfrom openhands_memory.conversation import EventStore\n"
            f"EventStore({str(db)!r})\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env={"PYTHONPATH": str(REPO)})
    assert proc.returncode == 9
    assert not db.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("new.db")] == []


def test_condense_lines_fit_80_columns(demo, tmp_path):
    path, _ = demo
    copy = tmp_path / "d.db"
    copy.write_bytes(path.read_bytes())
    for args in (("--dry-run",), ("--type", "llm", "--set", "max_size=50", "--dry-run"),
                 ("--type", "recent", "--set", "max_events=30", "--dry-run"), ()):
        result = invoke("condense", copy, "demo", *args)
        assert result.exit_code == 0, result.output
        assert all(len(line) <= 80 for line in result.output.splitlines()), result.output


def test_readme_library_example_runs_twice(tmp_path):
    text = (REPO / "README.md").read_text()
    code = re.search(r"## The library in 20 lines\s+```python\n(.*?)```", text, re.S).group(1)
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                              env={"PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("65 events stored; 14 in the view")
