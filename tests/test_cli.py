"""The command-line tool: every command through click's CliRunner, a few as real processes.

Bad input must end with a one-line message and exit status 1 (2 for usage), no traceback,
and leave the database file byte for byte as it was.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from openhands_memory import migrate
from openhands_memory.storage import hidden
from openhands_memory.storage.sqlite import SqliteSession
from openhands_memory.conversation import EventStore

from . import factories as f
from .cli_runner import ENV, invoke, run
from .test_io import CONV_ID, sdk_events, write_folder

REPO = Path(__file__).resolve().parent.parent


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def narrow(text: str, width: int = 80) -> None:
    too_wide = [line for line in text.splitlines() if len(line) > width]
    assert not too_wide, too_wide[:3]


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> Path:
    """The demo database, made once by the demo command itself."""
    path = tmp_path_factory.mktemp("demo") / "openhands-memory-demo.db"
    result = run("demo", path)
    assert "stats of" in result.output
    assert f"openhands-memory history {path} demo" in result.output  # the next steps name the file
    return path


@pytest.fixture
def demo_copy(demo_db, tmp_path) -> Path:
    copy = tmp_path / "demo.db"
    shutil.copy(demo_db, copy)
    return copy


@pytest.fixture
def old_db(tmp_path) -> Path:
    """A file at the previous schema revision, with a conversation in it."""
    from sqlalchemy import create_engine

    path = tmp_path / "old.db"
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
        migrate.upgrade(conn, migrate.REVISIONS[-2])
        conn.exec_driver_sql("INSERT INTO conversation (id, created_at, metadata) VALUES ('c', '2026-01-01', '{}')")
    engine.dispose()
    return path


# --- the app, its help and its start-up ------------------------------------------------------


def test_help_lists_every_command_in_sections():
    out = run("--help").output
    for section in ("Database:", "Events:", "Condensing:", "Try it:"):
        assert section in out
    for name in ("init", "migrate", "conversations", "stats", "doctor", "sql", "append", "view", "history",
                 "import", "export", "condense", "request-condensation", "demo"):
        assert f"  {name} " in out
        sub = run(name, "--help").output
        assert sub.startswith(f"Usage: openhands-memory {name} ")
        narrow(sub)
    narrow(out)
    assert run("--version").output.startswith("openhands-memory ")
    assert run("no-such-command", code=2)


def test_start_up_loads_only_what_a_command_needs(demo_db):
    """--help and a reading command never import litellm, SQLAlchemy or alembic."""
    probe = (
        "import sys\nfrom openhands_memory.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in ('litellm', 'sqlalchemy', 'alembic') if m in sys.modules)\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    for args in (["--help"], ["conversations", str(demo_db)], ["history", str(demo_db), "demo", "--to", "3"]):
        proc = subprocess.run([sys.executable, "-c", probe, *args], cwd=REPO, capture_output=True, text=True,
                              env={**os.environ, **ENV}, timeout=60)
        assert "HEAVY []" in proc.stderr, (args, proc.stderr)


def test_python_cli_py_and_dash_m_run_the_same_app(tmp_path):
    db = tmp_path / "demo.db"
    env = {**os.environ, **ENV}
    proc = subprocess.run([sys.executable, "cli.py", "demo", str(db)], cwd=REPO, capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "into a summary; the view is" in proc.stdout and "stats of" in proc.stdout and "summary" in proc.stdout
    narrow(proc.stdout.split("Next, try:")[0])
    proc = subprocess.run([sys.executable, "-m", "openhands_memory.cli", "conversations", str(db), "--json"],
                          cwd=REPO, capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["id"] == "demo"
    proc = subprocess.run([sys.executable, "cli.py", "view", str(db), "nope"], cwd=REPO, capture_output=True,
                          text=True, env=env, timeout=60)
    assert proc.returncode == 1 and proc.stderr.strip() == "Error: no conversation with id 'nope' in this database"


# --- demo and init -------------------------------------------------------------------------------


def test_demo_replaces_an_earlier_demo_and_refuses_other_files(tmp_path, demo_db):
    db = tmp_path / "again.db"
    shutil.copy(demo_db, db)
    out = run("demo", db).output
    assert "Replaying" in out and "The model is sent" in out
    other = tmp_path / "mine.db"
    with EventStore(other) as store:
        store.create_conversation("work").append(f.user())
    before = digest(other)
    result = run("demo", other, code=1)
    assert "is not a demo database" in result.output
    assert digest(other) == before
    text = tmp_path / "notes.db"
    text.write_text("my notes")
    run("demo", text, code=1)
    assert text.read_text() == "my notes"


def test_demo_defaults_to_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run("demo")
    assert (tmp_path / "openhands-memory-demo.db").exists()


def test_init(tmp_path):
    db = tmp_path / "new.db"
    assert f"created {db}" in run("init", db).output
    assert "already an openhands-memory database" in run("init", db).output
    assert run("conversations", db).output.startswith(f"{db} holds no conversations")
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    assert "is not an openhands-memory database (it is not an SQLite file)" in run("init", notes, code=1).output
    assert notes.read_text() == "hello"


# --- reading commands ------------------------------------------------------------------------


def test_conversations_in_three_formats(demo_db):
    table = run("conversations", demo_db).output
    narrow(table)
    assert table.splitlines()[0].split() == ["id", "events", "visible", "tokens", "cond.", "last", "activity"]
    rows = json.loads(run("conversations", demo_db, "--json").output)
    (row,) = rows
    assert row["id"] == "demo" and 300 < row["events"] < 620 and 0 < row["visible"] < row["events"]
    assert row["condensations"] >= 2 and row["tokens"] is None and row["last_activity"]
    parsed = list(csv.DictReader(io.StringIO(run("conversations", demo_db, "--format", "csv").output)))
    assert parsed[0]["id"] == "demo" and int(parsed[0]["events"]) == row["events"]


def test_stats(demo_db):
    out = run("stats", demo_db, "de").output  # a unique prefix names the conversation
    narrow(out)
    assert out.startswith("conversation demo") and "condensations" in out and "llm" in out
    data = json.loads(run("stats", demo_db, "--json").output)
    assert data["scope"] == "all" and data["condensations"] == sum(s["count"] for s in data["condensations_by_strategy"])
    assert data["llm_calls"]["calls"] == 0  # the offline summarizer calls no model
    run("stats", demo_db, "zzz", code=1)


def test_stats_reads_the_llm_call_ledger(tmp_path):
    db = tmp_path / "calls.db"
    with EventStore(db) as store:
        store.create_conversation("c").append(f.user())
        store.db.executemany(
            "INSERT INTO llm_call (conversation_id, created_at, strategy, purpose, model, prompt_tokens, "
            "completion_tokens, cost_usd, latency_s, outcome, attempts) VALUES ('c', 'now', 'llm', 'summary', ?, ?, ?, ?, 1.0, ?, 1)",
            [("gpt-4o-mini", 1200, 300, 0.0009, "ok"), ("gpt-4o-mini", 1100, 0, None, "timeout"),
             ("gpt-4o-mini", 900, 250, 0.0007, "ok")],
        )
    data = json.loads(run("stats", db, "c", "--json").output)["llm_calls"]
    assert (data["calls"], data["prompt_tokens"], data["completion_tokens"]) == (3, 3200, 550)
    assert data["cost_usd"] == pytest.approx(0.0016)
    assert data["by_model"][0]["outcomes"] == {"ok": 2, "timeout": 1}
    out = run("stats", db).output
    assert "summarizer calls: 3" in out and "ok 2, timeout 1" in out and "$0.0016" in out


def test_view(demo_db):
    out = run("view", demo_db, "demo").output
    narrow(out)
    lines = out.splitlines()
    assert lines[0].startswith("demo · view after event ")
    assert any(line.split()[:2] == ["S", "summary"] for line in lines)  # the summary row
    data = json.loads(run("view", demo_db, "demo", "--json").output)
    assert data["events"][0]["id"] == 0 and any(e["id"] is None for e in data["events"])
    assert data["dropped"] == [] and data["unhandled_condensation_request"] is False
    messages = json.loads(run("view", demo_db, "demo", "--format", "messages").output)
    assert messages[0]["role"] == "system" and any(m["role"] == "tool" for m in messages)
    early = json.loads(run("view", demo_db, "demo", "--at", 25, "--json").output)
    assert early["upto"] == 25 and [e["id"] for e in early["events"]] == list(range(26))
    # Right after event 30 a call was still waiting for its result: left out, and said so.
    mid = json.loads(run("view", demo_db, "demo", "--at", 30, "--json").output)
    assert {d["property"] for d in mid["dropped"]} == {"tool_call_matching", "tool_loop_atomicity"}
    assert "left out because tool call matching requires it: 30" in run("view", demo_db, "demo", "--at", 30).output
    assert "has events 0.." in run("view", demo_db, "demo", "--at", 99999, code=1).output
    assert run("view", demo_db, "nobody", code=1).output == "Error: no conversation with id 'nobody' in this database\n"


def test_history_marks_forgotten_events(demo_db):
    out = run("history", demo_db, "demo").output
    narrow(out)
    rows = json.loads(run("history", demo_db, "demo", "--json").output)
    assert [r["id"] for r in rows] == list(range(len(rows)))
    conds = [r for r in rows if r["kind"] == "Condensation"]
    first = conds[0]
    assert first["condensation"]["strategy"] == "llm" and first["condensation"]["reason"] == "events"
    s, e = first["condensation"]["forgotten_ranges"][0]
    assert all(rows[i]["forgotten_by"] == first["id"] for i in range(s, e + 1))
    assert rows[0]["forgotten_by"] is None
    assert f"#{first['id']}" in out and "[llm/events] forgot" in out
    part = list(csv.DictReader(io.StringIO(run("history", demo_db, "demo", "--from", 5, "--to", 9, "--format", "csv").output)))
    assert [int(r["id"]) for r in part] == [5, 6, 7, 8, 9]


# --- sql: read-only by construction -----------------------------------------------------------


def test_sql_reads_in_three_formats(demo_db):
    out = run("sql", demo_db, "SELECT kind, COUNT(*) AS n FROM event GROUP BY kind ORDER BY n DESC").output
    assert out.splitlines()[0].split() == ["kind", "n"] and "ActionEvent" in out
    data = json.loads(run("sql", demo_db, "SELECT id, kind FROM event WHERE id < 2 ORDER BY id", "--json").output)
    assert data == [{"id": 0, "kind": "SystemPromptEvent"}, {"id": 1, "kind": "MessageEvent"}]
    rows = list(csv.reader(io.StringIO(run("sql", demo_db, "SELECT id FROM event WHERE id < 3", "--format", "csv").output)))
    assert rows == [["id"], ["0"], ["1"], ["2"]]
    assert "conversation_id" in run("sql", demo_db, "PRAGMA table_info(event)").output
    assert "user_version" in run("sql", demo_db, "PRAGMA user_version").output


@pytest.mark.parametrize("statement, named", [
    ("INSERT INTO conversation VALUES ('x', 'y', '{}')", "INSERT"),
    ("UPDATE event SET kind = 'x'", "UPDATE"),
    ("DELETE FROM event", "DELETE"),
    ("DROP TABLE event", "DROP TABLE"),
    ("CREATE TABLE t (x)", "CREATE TABLE"),
    ("ATTACH DATABASE 'other.db' AS other", "ATTACH"),
    ("PRAGMA user_version = 3", "PRAGMA user_version=3"),
    ("PRAGMA query_only = OFF", "PRAGMA query_only=OFF"),
    ("PRAGMA journal_mode = DELETE", "PRAGMA journal_mode=DELETE"),
    ("VACUUM", "VACUUM"),
    ("WITH x AS (SELECT 1) INSERT INTO conversation SELECT 'a', 'b', '{}' FROM x", "INSERT"),
])
def test_sql_refuses_every_write(demo_copy, statement, named):
    before = digest(demo_copy)
    result = run("sql", demo_copy, statement, code=1)
    assert result.output == f"Error: sql is read-only: {named} is not allowed\n"
    assert digest(demo_copy) == before


def test_sql_other_errors(demo_copy):
    assert "SQL error" in run("sql", demo_copy, "SELEC 1", code=1).output
    assert "one SQL statement" in run("sql", demo_copy, "SELECT 1; SELECT 2", code=2).output


# --- a file that is not ours, or too old -------------------------------------------------------


@pytest.mark.parametrize("command", [["conversations"], ["stats"], ["history", "c"], ["view", "c"], ["sql", "SELECT 1"],
                                     ["doctor"], ["append", "c", "-"], ["condense", "c"], ["export", "c"],
                                     ["request-condensation", "c"]])
def test_not_our_database(tmp_path, command):
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE notes (text)")
    conn.commit()
    conn.close()
    before = digest(other)
    out = run(command[0], other, *command[1:], input="{}", code=1).output
    assert "is not an openhands-memory database (it holds other tables: notes)" in out
    assert digest(other) == before
    missing = tmp_path / "missing.db"
    assert "no such database file" in run(command[0], missing, *command[1:], input="{}", code=1).output
    assert not missing.exists()


def test_old_schema_is_refused_until_migrated(old_db):
    old = migrate.REVISIONS[-2]
    before = digest(old_db)
    for args in (["conversations"], ["view", "c"], ["history", "c"], ["sql", "SELECT 1"], ["append", "c", "-"]):
        out = run(args[0], old_db, *args[1:], input="{}", code=1).output
        assert f"uses schema revision {old}, older than this library's {migrate.HEAD}" in out
        assert f"run `openhands-memory migrate {old_db}`" in out
    out = run("migrate", old_db, "--dry-run").output
    assert f"would upgrade {old_db} from {old} to {migrate.HEAD}" in out and migrate.HEAD in out
    assert digest(old_db) == before and not list(old_db.parent.glob("old.db.bak-*"))
    out = run("migrate", old_db).output
    (backup,) = old_db.parent.glob(f"old.db.bak-{old}-*")
    assert f"backed up {old_db} to {backup}" in out and f"{old} -> {migrate.HEAD}" in out
    assert sqlite3.connect(backup).execute("SELECT version_num FROM alembic_version").fetchone()[0] == old
    assert json.loads(run("conversations", old_db, "--json").output)[0]["id"] == "c"
    assert "nothing to do" in run("migrate", old_db).output
    run("migrate", old_db, "--downgrade", code=2)
    run("migrate", old_db, "--revision", "9999", code=1)
    out = run("migrate", old_db, "--downgrade", "--revision", old).output
    assert f"downgraded {old_db}: {migrate.HEAD} -> {old}" in out
    run("conversations", old_db, code=1)


def test_migrate_backup_includes_wal_content(tmp_path, old_db):
    """Rows still in the -wal file (a writer has the file open) are in the backup."""
    conn = sqlite3.connect(old_db)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("INSERT INTO conversation (id, created_at, metadata) VALUES ('in-wal', '2026-01-02', '{}')")
    conn.commit()
    assert Path(f"{old_db}-wal").stat().st_size > 0
    run("migrate", old_db)
    conn.close()
    (backup,) = old_db.parent.glob("old.db.bak-*")
    ids = {r[0] for r in sqlite3.connect(backup).execute("SELECT id FROM conversation")}
    assert ids == {"c", "in-wal"}


# --- doctor ----------------------------------------------------------------------------------------


def test_doctor_healthy_and_repairs(tmp_path, demo_db):
    assert "is healthy" in run("doctor", demo_db).output
    db = tmp_path / "sick.db"
    with EventStore(db) as store:
        conv = store.create_conversation("c")
        conv.append_many([f.system(), f.user(), f.action("r1", "c1"), f.observation("c1"), f.action("r2", "c2"),
                          f.observation("c2"), f.action("r3", "c3"), f.observation("c3")])
        conv.append(f.condensation(ranges=[(2, 5)]))
        conv.append_many([f.action("r4", "c4"), f.action("r4", "c5"), f.observation("c4")])  # c5 never answered
        store.db.execute("DELETE FROM hidden_run")  # out of date
    out = run("doctor", db, code=1).output  # c5 was just appended: its tool may still be running
    assert re.search(r"dangling tool call: action 10 \(terminal, c5\) has no result; left alone: it is \d+ s old and "
                     r"no later action follows it, so its tool may still be running", out), out
    assert "hidden out of date" in out and "1 can be repaired" in out
    out = run("doctor", db, "--min-age", "0", code=1).output
    assert "dangling tool call: action 10 (terminal, c5) has no result  [--fix repairs it]" in out
    assert "hidden out of date" in out and "2 can be repaired" in out
    before = digest(db)
    report = json.loads(run("doctor", db, "--json", "--min-age", "0", code=1).output)
    assert {p["check"] for p in report["problems"]} == {"dangling tool call", "hidden out of date"}
    assert digest(db) == before  # checking writes nothing
    out = run("doctor", db, "--fix", "--min-age", "0").output
    assert "appended an 'interrupted' result for 1 dangling call(s) as event 12" in out
    assert "recomputed the hidden runs" in out and "is healthy" in out
    with EventStore(db) as store:
        fixed = store.conversation("c").get(12)
        assert fixed.kind == "AgentErrorEvent" and fixed.tool_call_id == "c5" and "interrupted" in fixed.error
        assert hidden.live(SqliteSession(store.db), "c") == [(2, 5)]


def test_doctor_reports_what_it_cannot_fix(tmp_path):
    db = tmp_path / "gaps.db"
    with EventStore(db) as store:
        conv = store.create_conversation("c")
        conv.append_many([f.user(), f.action("r1", "c1"), f.observation("c1"), f.observation("c1"), f.agent_says()])
        store.db.execute("DELETE FROM event WHERE id = 4")
        store.db.execute("UPDATE event SET tool_call_id = 'zz' WHERE id = 1")
    out = run("doctor", db, "--fix", "--min-age", "0", code=1).output
    assert "fixed: c: appended an 'interrupted' result for 1 dangling call(s) as event 4" in out
    assert "problem: c: orphan result: result 2..3 answers c1, which no action made" in out
    assert "problem: c: duplicated result: tool call c1 has 2 results: 2..3" in out
    assert "problem: c: id gaps" not in out  # the repair filled the gap it left at 4


# --- writing commands ----------------------------------------------------------------------------


def test_append_from_file_and_stdin(tmp_path):
    db = tmp_path / "a.db"
    events = tmp_path / "events.jsonl"
    events.write_text(f.system().to_json() + "\n" + f.user("hi").to_json() + "\n")
    assert "no such database file" in run("append", db, "c", events, code=1).output
    assert not db.exists()
    assert "appended 2 events to c: ids 0..1" in run("append", db, "c", events, "--create").output
    assert "none.jsonl: cannot read it: No such file" in run("append", db, "c", tmp_path / "none.jsonl", code=1).output
    more = tmp_path / "more.json"
    more.write_text(json.dumps(f.user("again").to_json_dict(), indent=2))  # one pretty-printed object
    assert "appended 1 event to c: id 2" in run("append", db, "c", more).output
    listed = json.dumps([f.action("r", "x").to_json_dict(), f.observation("x").to_json_dict()])
    assert json.loads(run("append", db, "c", "--json", input=listed).output) == {"conversation": "c", "created": False, "ids": [3, 4]}
    assert "id 5" in run("append", db, "c", "-", input=f.agent_says().to_json()).output
    assert "no conversation with id 'nobody'" in run("append", db, "nobody", more, code=1).output
    before = digest(db)
    bad = f.user().to_json() + "\n" + '{"kind": "MessageEvent", "source": "user"}' + "\n"
    out = run("append", db, "c", input=bad, code=1).output
    assert out.startswith("Error: <stdin>:2: MessageEvent: field 'llm_message'")
    assert "is already in conversation" in run("append", db, "c", events, code=1).output
    assert digest(db) == before
    assert [r["id"] for r in json.loads(run("history", db, "c", "--json").output)] == list(range(6))


def test_import_export_round_trip_through_the_cli(tmp_path):
    folder = write_folder(tmp_path / "conv", sdk_events(), {"id": CONV_ID})
    one, two = tmp_path / "one.db", tmp_path / "two.db"
    out = run("import", one, folder).output
    assert f"imported {len(sdk_events())} events (1 condensation) from {folder} (OpenHands SDK folder)" in out
    assert f"conversation {CONV_ID}: the agent sees 6 events now" in out
    exported = tmp_path / "exported"
    assert "OpenHands SDK layout" in run("export", one, CONV_ID[:8], "--file-format", "openhands", "-o", exported).output
    assert run("import", two, exported, "--json").output
    assert "already exists; import it under another id with --as" in run("import", two, exported, code=1).output
    for db in (one, two):
        assert run("view", db, CONV_ID, "--json").output == run("view", one, CONV_ID, "--json").output
        assert run("history", db, CONV_ID, "--json").output == run("history", one, CONV_ID, "--json").output
    assert "already exists and is not an empty folder" in run("export", one, CONV_ID, "--file-format", "openhands", "-o", exported, code=1).output
    lines = run("export", two, CONV_ID).output.splitlines()
    assert [json.loads(line)["id"] for line in lines] == [e["id"] for e in sdk_events()]
    target = tmp_path / "c.jsonl"
    assert f"exported {len(lines)} events to {target}" in run("export", two, CONV_ID, "-o", target).output
    assert "already exists" in run("export", two, CONV_ID, "-o", target, code=1).output
    run("export", two, CONV_ID, "-o", target, "--force")
    data = json.loads(run("import", tmp_path / "three.db", target, "--as", "again", "--json").output)
    assert (data["conversation"], data["format"], data["events"]) == ("again", "jsonl", len(lines))


def test_import_refuses_bad_input_and_changes_nothing(tmp_path):
    db = tmp_path / "a.db"
    run("init", db)
    before = digest(db)
    not_conv = tmp_path / "photos"
    not_conv.mkdir()
    out = run("import", db, not_conv, code=1).output
    assert out == f"Error: {not_conv}: not an OpenHands conversation folder: it has no events/ folder holding event-NNNNN-<id>.json files\n"
    events = sdk_events()
    folder = write_folder(tmp_path / "conv", events)
    broken = folder / "events" / f"event-00005-{events[5]['id']}.json"
    broken.write_text('{"id": "x", ')
    out = run("import", db, folder, code=1).output
    assert str(broken) in out and "not valid JSON" in out
    assert digest(db) == before
    assert json.loads(run("conversations", db, "--json").output) == []
    fresh = tmp_path / "fresh.db"
    run("import", fresh, folder, code=1)
    assert not fresh.exists()  # a failed import into a new file leaves no file behind


def test_condense_dry_run_then_for_real(demo_copy):
    run("request-condensation", demo_copy, "demo")
    before = digest(demo_copy)
    out = run("condense", demo_copy, "demo", "--dry-run").output
    assert out.startswith("dry run: would condense demo with the default condenser (llm, reason: request)")
    assert "forgets" in out and "tokens" in out and "(chars/4 estimate)" in out and "nothing was written" in out
    assert digest(demo_copy) == before
    report = json.loads(run("condense", demo_copy, "demo", "--json").output)
    assert report["condensed"] and report["stored_as"] is not None and report["forgotten_count"] > 0
    assert report["tokens_after"] < report["tokens_before"]
    assert report["view_events_after"] < report["view_events"]
    out = run("condense", demo_copy, "demo").output
    assert out.startswith("nothing to condense: the default condenser keeps the view")


def test_dry_run_of_a_token_counting_condenser_writes_nothing(demo_copy):
    """Counting tokens caches counts in rows; a dry run does that on a snapshot, not the file."""
    before = digest(demo_copy)
    args = ["condense", demo_copy, "demo", "-t", "llm", "-s", "max_size=500", "-s", "keep_first=2",
            "-s", "max_tokens=4000", "-s", 'tokenizer="chars/4"']
    report = json.loads(run(*args, "--dry-run", "--json").output)
    assert report["condensed"] and report["reason"] == "tokens" and report["token_counter"] == "chars/4"
    assert report["tokens_after"] < report["tokens_before"]
    assert digest(demo_copy) == before
    stored = json.loads(run(*args, "--json").output)
    assert stored["forgotten_ids"] == report["forgotten_ids"] and stored["stored_as"] is not None


def test_condense_with_type_settings_and_config(demo_copy, tmp_path):
    out = run("condense", demo_copy, "demo", "--type", "amortized", "--set", "max_size=20", "--set", "keep_first=2",
              "--dry-run", "--json").output
    report = json.loads(out)
    assert report["strategy"] == "amortized" and report["reason"] == "events" and report["summary"] is None
    config = tmp_path / "config.toml"
    config.write_text('[condenser]\ntype = "noop"\n')
    assert "nothing to condense" in run("condense", demo_copy, "demo", "-c", config).output
    config.write_text(
        '[condenser.noop]\ntype = "noop"\n\n[condenser.small]\ntype = "llm"\nmax_size = 30\nkeep_first = 2\n'
        'max_tokens = 2000\ntokenizer = "chars/4"\n'
    )
    report = json.loads(run("condense", demo_copy, "demo", "-c", config, "--name", "small", "--json").output)
    assert report["condensed"] and report["strategy"] == "llm" and "tokens" in report["reason"]
    assert report["token_counter"] == "chars/4" and report["tokens_before"] > report["tokens_after"]
    assert "is not a setting of type 'amortized'" in run("condense", demo_copy, "demo", "-t", "amortized", "-s", "bogus=1", code=1).output
    assert "not key=value" in run("condense", demo_copy, "demo", "-t", "amortized", "-s", "oops", code=1).output
    run("condense", demo_copy, "demo", "-c", config, "-t", "noop", code=2)
    assert "not a condenser type" in run("condense", demo_copy, "demo", "-t", "magic", code=1).output


def test_request_condensation(demo_copy):
    data = json.loads(run("request-condensation", demo_copy, "demo", "--json").output)
    view = json.loads(run("view", demo_copy, "demo", "--json").output)
    assert view["unhandled_condensation_request"] and data["id"] == view["upto"]
    result = invoke("view", demo_copy, "demo")
    assert "a condensation was requested and not done yet" in result.output


def test_the_app_leaves_logging_as_it_found_it(demo_db):
    import logging

    log = logging.getLogger("openhands_memory")
    before = (log.level, log.propagate, list(log.handlers))
    run("view", demo_db, "demo", "--at", 30)
    run("-v", "view", demo_db, "demo", "--at", 30)
    assert (log.level, log.propagate, list(log.handlers)) == before


def test_doctor_rebuilds_condensation_bookkeeping(tmp_path):
    db = tmp_path / "books.db"
    with EventStore(db) as store:
        conv = store.create_conversation("c")
        conv.append_many([f.system(), f.user()] + [e for i in range(4) for e in (f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}"))])
        uids = [e.id for e in conv.events()]
        conv.append(f.condensation(forget=uids[2:6], summary="s", offset=1))  # id 10
        conv.append(f.condensation(ranges=[(6, 7)]))  # id 11
        store.db.execute("PRAGMA foreign_keys=OFF")
        store.db.execute("DELETE FROM condensation WHERE id = 10")  # its ranges stay behind
        store.db.execute("DELETE FROM forgotten_range WHERE condensation_id = 11")
        expected = json.loads(run("view", db, "c", "--json").output)
    out = run("doctor", db, "--full", code=1).output
    assert "condensation without row: Condensation 10 has no condensation row" in out
    assert "condensation without ranges: Condensation 11 forgets 2 events" in out
    assert "ranges without condensation" in out
    out = run("doctor", db, "--full", "--fix").output
    assert "rebuilt the condensation row of event 10" in out and "is healthy" in out
    with EventStore(db) as store:
        assert store.db.execute("SELECT condensation_id, start_id, end_id FROM forgotten_range ORDER BY 1, 2").fetchall() == [
            (10, 2, 5), (11, 6, 7)]
        assert hidden.live(SqliteSession(store.db), "c") == [(2, 7)]
    fixed = json.loads(run("view", db, "c", "--json").output)
    assert [e["id"] for e in fixed["events"]] == [0, None, 1, 8, 9]
    assert expected != fixed  # the broken file showed events it had forgotten


# --- server URLs: one line, never the password ------------------------------------------------

ONE_EVENT = f.user("hello").model_dump_json(exclude_none=True) + "\n"  # for append, read before connecting
SERVER_COMMANDS = [["conversations"], ["stats"], ["view", "c"], ["sql", "SELECT 1"], ["doctor"], ["migrate"],
                   ["append", "c", "-"], ["export", "c"]]


@pytest.mark.parametrize("command", SERVER_COMMANDS, ids=lambda c: c[0])
def test_an_unreachable_server_is_one_line_without_the_password(command):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    url = f"postgresql://om:s3cret@127.0.0.1:{port}/agents"
    out = run(command[0], url, *command[1:], input=ONE_EVENT, code=1).output
    assert out == f"Error: postgresql://om:***@127.0.0.1:{port}/agents: cannot connect: Connection refused\n"


@pytest.mark.parametrize("command", SERVER_COMMANDS, ids=lambda c: c[0])
def test_without_psycopg_a_server_url_says_what_to_install(monkeypatch, command):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # `import psycopg` raises ImportError
    out = run(command[0], "postgresql://om:s3cret@db.example/agents", *command[1:], input=ONE_EVENT, code=1).output
    assert out == ("Error: postgresql://om:***@db.example/agents: PostgreSQL needs psycopg 3; install it "
                   "with `pip install 'openhands-memory[postgres]'`\n")
