"""The history-tree commands: branches, navigate, fork, `view --at`,
and `history` marking the events off HEAD's path.

Each command is checked in text and JSON against what the library says; bad input must end
with one `Error:` line and exit status 1 (2 for usage), and leave the file as it was.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from openhands_memory.conversation import EventStore

from . import factories as f
from .cli_runner import ENV, invoke, run
from .test_cli import REPO, digest, narrow


def build(db: Path | str, cid: str = "tree-1") -> None:
    """0..4 on the first line; HEAD moved back to 2, then 5..6 appended: a branch forking at 2.

        0 ─ 1 ─ 2 ─ 3 ─ 4
                 └─ 5 ─ 6   (HEAD)
    """
    with EventStore(db) as store:
        conv = store.create_conversation(cid)
        conv.append_many([f.system(), f.user("first question"), f.action("r1", "c1"), f.observation("c1"),
                          f.user("abandoned follow-up")])
        conv.navigate(2)
        conv.append_many([f.observation("c1", "the retried output"), f.user("on the branch")])


@pytest.fixture
def db(tmp_path) -> Path:
    path = tmp_path / "tree.db"
    build(path)
    return path


def refused(db: Path, *args: object, code: int = 1) -> str:
    """Run a command that must fail: exit ``code``, one `Error:` line for status 1, and the
    database file byte for byte as it was."""
    before = digest(db)
    out = run(*args, code=code).output
    if code == 1:
        assert out.count("\n") == 1 and out.startswith("Error: "), out
    assert digest(db) == before
    return out


def table_rows(text: str) -> list[list[str]]:
    """A table's body rows (after the title and rule lines), split on runs of 2+ spaces."""
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if set(line.replace(" ", "")) <= {"─", "-"} and line.strip())
    return [re.split(r" {2,}", line.strip()) for line in lines[rule + 1:]]


# --- help --------------------------------------------------------------------------------------


def test_help_lists_the_tree_commands_with_examples():
    out = run("--help").output
    section = out.split("Branches:")[1].split("Condensing:")[0]
    for name in ("branches", "navigate", "fork"):
        assert f"  {name} " in section
        sub = run(name, "--help").output
        assert sub.startswith(f"Usage: openhands-memory {name} ")
        assert f"Example:\n    openhands-memory {name} agent.db" in sub
        assert "--json" in sub
        narrow(sub)
    assert "--at N" in run("view", "--help").output
    narrow(out)


def test_branches_reads_without_loading_heavy_modules(db):
    probe = (
        "import sys\nfrom openhands_memory.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in ('litellm', 'sqlalchemy', 'alembic') if m in sys.modules)\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe, "branches", str(db), "tree"], cwd=REPO,
                          capture_output=True, text=True, env={**os.environ, **ENV}, timeout=60)
    assert "HEAVY []" in proc.stderr, proc.stderr
    assert proc.stdout.startswith("tree-1 · 7 events · 2 branches")


# --- branches ----------------------------------------------------------------------------------


def test_branches_text_and_json(db):
    out = run("branches", db, "tree").output  # a prefix names the conversation
    narrow(out)
    lines = out.splitlines()
    assert lines[0] == "tree-1 · 7 events · 2 branches · HEAD at event 6 (*)"
    assert lines[1].split() == ["leaf", "length", "fork", "path"]
    assert lines[3:] == [
        "   4          5     2  0..4",
        "*  └─ 6       5     2  0..2, 5..6",
    ]
    data = json.loads(run("branches", db, "tree", "--json").output)
    assert data == [
        {"leaf": 4, "length": 5, "fork": 2, "head": False, "path": [[0, 4]]},
        {"leaf": 6, "length": 5, "fork": 2, "head": True, "path": [[0, 2], [5, 6]]},
    ]
    with EventStore(db, readonly=True) as store:
        library = store.conversation("tree-1").branches()
    assert data == [{"leaf": b.leaf, "length": b.length, "fork": b.fork, "head": b.head,
                     "path": [list(r) for r in b.path]} for b in library]
    assert run("branches", db, "tree", "--format", "json").output == run("branches", db, "tree", "--json").output


def test_branches_draws_nested_branches_and_new_roots(tmp_path):
    path = tmp_path / "deep.db"
    with EventStore(path) as store:
        conv = store.create_conversation("deep")
        conv.append_many([f.user(f"m{i}") for i in range(6)])  # 0..5
        conv.navigate(2)
        conv.append_many([f.user("b1"), f.user("b2"), f.user("b3")])  # 6..8, forking at 2
        conv.navigate(7)
        conv.append(f.user("c1"))  # 9, forking off 6..8 at 7
        conv.navigate(1)
        conv.append(f.user("d1"))  # 10, forking at 1
        conv.navigate(4)
        conv.append(f.user("e1"))  # 11, forking at 4
        conv.navigate(None)
        conv.append(f.user("a new root"))  # 12
        conv.navigate(8)
    out = run("branches", path, "deep").output
    narrow(out)
    assert out.splitlines()[0] == "deep · 13 events · 6 branches · HEAD at event 8 (*)"
    # 9 hangs under 8, which it leaves at 7; 10, 8 and 11 leave the first line at 1, 2, 4.
    # A leaf's fork is the nearest event before it with two children (5 and 11 part at 4).
    assert out.splitlines()[3:] == [
        "   5             6     4  0..5",
        "   ├─ 10         3     1  0..1, 10",
        "*  ├─ 8          6     7  0..2, 6..8",
        "   │  └─ 9       6     7  0..2, 6..7, 9",
        "   └─ 11         6     4  0..4, 11",
        "   12            1  root  12",
    ]
    heads = [b["leaf"] for b in json.loads(run("branches", path, "deep", "--json").output) if b["head"]]
    assert heads == [8]


def test_branches_says_where_head_is_when_it_is_no_leaf(db, tmp_path):
    with EventStore(db) as store:
        store.conversation("tree-1").navigate(1)
    out = run("branches", db, "tree-1").output
    assert out.splitlines()[0].startswith("tree-1 · 7 events · 2 branches · HEAD at event 1, inside a branch")
    assert "*" not in out
    assert not any(b["head"] for b in json.loads(run("branches", db, "tree-1", "--json").output))
    with EventStore(db) as store:
        store.conversation("tree-1").navigate(None)
    assert "HEAD is empty: the next event starts a new root" in run("branches", db, "tree-1").output
    with EventStore(db) as store:
        store.create_conversation("empty")
    assert run("branches", db, "empty").output == "empty has no events yet\n"
    assert json.loads(run("branches", db, "empty", "--json").output) == []


def test_branches_errors(db, tmp_path):
    assert refused(db, "branches", db, "nobody") == "Error: no conversation with id 'nobody' in this database\n"
    missing = tmp_path / "none.db"
    assert "no such database file" in run("branches", missing, "c", code=1).output
    assert not missing.exists()


# --- navigate ----------------------------------------------------------------------------------


def test_navigate_moves_head_and_the_next_append_branches(db):
    out = run("navigate", db, "tree", 3).output
    assert out == "HEAD of tree-1 is at event 3 now: the next event starts a new branch after it\n"
    with EventStore(db) as store:
        conv = store.conversation("tree-1")
        assert conv.head == 3
        assert conv.append(f.user("a third way")) == 7
    branches = json.loads(run("branches", db, "tree-1", "--json").output)
    assert [(b["leaf"], b["fork"], b["head"]) for b in branches] == [(4, 3, False), (6, 2, False), (7, 3, True)]
    out = run("navigate", db, "tree-1", 4).output
    assert out == "HEAD of tree-1 is at event 4 now, the leaf of its branch: the next event continues it\n"
    assert json.loads(run("view", db, "tree-1", "--json").output)["upto"] == 4
    assert json.loads(run("navigate", db, "tree-1", 6, "--json").output) == {"conversation": "tree-1", "head": 6}
    assert run("navigate", db, "tree-1", "--root").output == (
        "HEAD of tree-1 is empty now: the next event starts a new root\n")
    assert json.loads(run("navigate", db, "tree-1", "--root", "--json").output) == {"conversation": "tree-1", "head": None}
    with EventStore(db) as store:
        assert store.conversation("tree-1").head is None


@pytest.mark.parametrize("args, message", [
    (["99"], "Error: conversation 'tree-1' has no event 99\n"),
    (["--", "-1"], "Error: Invalid value for '[SEQ]': '-1' is not an event id (a whole number from 0 to "
                   "4611686018427387903)\n"),
    ([], "Error: give the event to move HEAD to (SEQ), or --root for an empty HEAD\n"),
    (["3", "--root"], "Error: give SEQ or --root, not both\n"),
    (["3", "--json"], None),
])
def test_navigate_errors_write_nothing(db, args, message):
    if message is None:  # the control: the same file does change when the command is right
        before = digest(db)
        run("navigate", db, "tree-1", *args)
        assert digest(db) != before
        return
    if "give" in message:  # bad usage: exit 2, click's usage lines, then the error
        assert refused(db, "navigate", db, "tree-1", *args, code=2).endswith(message)
    else:
        assert refused(db, "navigate", db, "tree-1", *args) == message
    with EventStore(db, readonly=True) as store:
        assert store.conversation("tree-1").head == 6


def test_navigate_unknown_conversation(db):
    assert refused(db, "navigate", db, "nobody", 1) == "Error: no conversation with id 'nobody' in this database\n"


# --- fork --------------------------------------------------------------------------------------


def test_fork_copies_a_branch_into_a_new_conversation(db):
    out = run("fork", db, "tree-1", "--at", 6, "--as", "retry").output
    assert out == "forked tree-1 at event 6 into retry: 5 events\n"
    with EventStore(db, readonly=True) as store:
        source = store.conversation("tree-1")
        copy = store.conversation("retry")
        assert [e.id for e in copy] == [e.id for e in source.view(head=6) if e.seq is not None]
        assert copy.metadata["forked_from"] == {"conversation": "tree-1", "event": 6}
    # --at defaults to HEAD (6 here); without --as the id is new.
    data = json.loads(run("fork", db, "tree-1", "--json").output)
    assert data["length"] == 5 and data["forked_from"] == "tree-1" and data["at"] == 6
    fresh = data["conversation"]
    assert fresh not in ("tree-1", "retry")
    data = json.loads(run("fork", db, "tree-1", "--at", 4, "--as", "first-line", "--json").output)
    assert data == {"conversation": "first-line", "length": 5, "forked_from": "tree-1", "at": 4}
    view = json.loads(run("view", db, "first-line", "--json").output)
    assert [e["id"] for e in view["events"]] == [0, 1, 2, 3, 4] and view["path"] is None
    listed = {c["id"]: c["events"] for c in json.loads(run("conversations", db, "--json").output)}
    assert listed == {"tree-1": 7, "retry": 5, "first-line": 5, fresh: 5}


def test_a_fork_of_a_branch_condensed_across_its_jump_keeps_its_context(database_url, tmp_path):
    """30 events; HEAD back to 10; 5 more; condensed there (it forgets on both sides of the
    jump); forked; 20 appended to the fork: the fork shows what its source showed, then what
    was appended, and doctor --full and its ranges agree. Both backends, through the commands."""
    def jsonl(name: str, texts: list[str]) -> Path:
        path = tmp_path / name
        path.write_text("".join(f.user(t).model_dump_json(exclude_none=True) + "\n" for t in texts))
        return path

    db = database_url
    run("append", db, "S", jsonl("a.jsonl", [f"first line {i}" for i in range(30)]), "--create")
    run("navigate", db, "S", 10)
    run("append", db, "S", jsonl("b.jsonl", [f"branch {i}" for i in range(5)]))
    out = run("condense", db, "S", "-t", "llm", "--set", "max_size=10", "--set", "keep_first=1").output
    assert "forgets     12 of 16 events: 1..10, 30..31" in out
    assert "forgot 12 (1..10, 30..31)" in run("history", db, "S", "--from", 35).output
    history = json.loads(run("history", db, "S", "--json").output)  # the branch left is nobody's to forget
    assert {r["id"]: r["forgotten_by"] for r in history if r["forgotten_by"] is not None} == {
        i: 35 for i in [*range(1, 11), 30, 31]}
    source = json.loads(run("view", db, "S", "--json").output)["events"]
    assert [e["id"] for e in source] == [0, None, 32, 33, 34]

    run("fork", db, "S", "--as", "F")
    fork = json.loads(run("view", db, "F", "--json").output)["events"]
    assert [e["event"] for e in fork] == [e["event"] for e in source]
    assert run("append", db, "F", jsonl("c.jsonl", [f"after the fork {i}" for i in range(20)])).output == (
        "appended 20 events to F: ids 17..36\n")
    fork = json.loads(run("view", db, "F", "--json").output)["events"]
    assert [e["event"] for e in fork[:5]] == [e["event"] for e in source]
    assert [e["id"] for e in fork[5:]] == list(range(17, 37))
    assert "is healthy" in run("doctor", db, "--full").output


def test_fork_errors_write_nothing(db):
    run("fork", db, "tree-1", "--as", "taken")
    assert refused(db, "fork", db, "tree-1", "--at", 2, "--as", "taken") == (
        "Error: a conversation with id 'taken' already exists\n")
    assert refused(db, "fork", db, "tree-1", "--as", "tree-1") == "Error: a conversation with id 'tree-1' already exists\n"
    assert refused(db, "fork", db, "tree-1", "--at", 99, "--as", "x") == "Error: conversation 'tree-1' has no event 99\n"
    assert refused(db, "fork", db, "tree-1", "--at", -1, "--as", "x") == (
        "Error: Invalid value for '--at': '-1' is not an event id (a whole number from 0 to 4611686018427387903)\n")
    assert refused(db, "fork", db, "tree-1", "--as", "") == "Error: --as needs a conversation id, not an empty string\n"
    assert refused(db, "fork", db, "nobody") == "Error: no conversation with id 'nobody' in this database\n"
    refused(db, "fork", db, "tree-1", "--as", code=2)
    with EventStore(db) as store:
        store.conversation("tree-1").navigate(None)
    assert refused(db, "fork", db, "tree-1", "--as", "x") == (
        "Error: HEAD of tree-1 is empty: there is no path to fork (give --at N)\n")
    with EventStore(db) as store:
        store.create_conversation("empty")
    assert refused(db, "fork", db, "empty") == "Error: empty has no events: there is nothing to fork\n"
    assert sorted(c["id"] for c in json.loads(run("conversations", db, "--json").output)) == ["empty", "taken", "tree-1"]


# --- view --at, on a branch -----------------------------------------------------------------------


def test_view_head_shows_a_branch(db):
    with EventStore(db, readonly=True) as store:
        conv = store.conversation("tree-1")
        expected = {n: [e.seq for e in conv.view(head=n)] for n in (4, 6)}
    assert expected == {4: [0, 1, 2, 3, 4], 6: [0, 1, 2, 5, 6]}
    for n in (4, 6):
        data = json.loads(run("view", db, "tree-1", "--at", n, "--json").output)
        assert [e["id"] for e in data["events"]] == expected[n] and data["upto"] == n
    assert json.loads(run("view", db, "tree-1", "--at", 6, "--json").output)["path"] == [[0, 2], [5, 6]]
    assert json.loads(run("view", db, "tree-1", "--at", 4, "--json").output)["path"] is None
    # HEAD is at 6: the plain view is that branch's.
    assert run("view", db, "tree-1", "--json").output == run("view", db, "tree-1", "--at", 6, "--json").output
    out = run("view", db, "tree-1", "--at", 6).output
    narrow(out)
    # Five ids on the path (not the seven up to 6): nothing left out.
    assert out.splitlines()[0] == "tree-1 · view as of event 6 (path 0..2, 5..6) · 5 events · 0 of 5 left out"
    assert [row[0] for row in table_rows(out)] == ["0", "1", "2", "5", "6"]
    out = run("view", db, "tree-1", "--at", 4).output
    assert out.splitlines()[0] == "tree-1 · view as of event 4 · 5 events · 0 of 5 left out"
    messages = json.loads(run("view", db, "tree-1", "--at", 4, "--format", "messages").output)
    assert messages[-1]["role"] == "user" and "abandoned follow-up" in json.dumps(messages[-1])


def test_view_header_counts_what_a_condensation_forgot_on_the_branch(db):
    with EventStore(db) as store:
        conv = store.conversation("tree-1")
        conv.append(f.condensation(forget=[conv[1].id, conv[6].id]))  # 7, on the branch
        conv.append(f.user("after the condensation"))  # 8
        view = conv.view()
    assert [e.seq for e in view] == [0, 2, 5, 8]
    out = run("view", db, "tree-1").output
    # The path holds 0..2, 5..8: seven ids, four of them shown.
    assert out.splitlines()[0] == "tree-1 · view after event 8 (path 0..2, 5..8) · 4 events · 3 of 7 left out"


def test_view_with_an_empty_head_and_bad_options(db):
    with EventStore(db) as store:
        store.conversation("tree-1").navigate(None)
    assert run("view", db, "tree-1").output == (
        "tree-1: HEAD is empty, so the view is too (the next event starts a new root)\n")
    assert json.loads(run("view", db, "tree-1", "--json").output)["events"] == []
    assert "has events 0..6" in refused(db, "view", db, "tree-1", "--at", 7)


# --- history -----------------------------------------------------------------------------------


def test_history_marks_the_events_off_heads_path(db):
    result = invoke("history", db, "tree-1")
    assert result.exit_code == 0
    narrow(result.stdout)
    assert result.stdout.splitlines()[0].split() == ["id", "kind", "source", "hid", "by", "branch", "preview"]
    rows = {int(r[0]): r for r in table_rows(result.stdout)}
    assert [n for n, r in rows.items() if "other" in r] == [3, 4]
    assert result.stderr == "note: 2 events not on HEAD's path (other branches, see `branches`): 3..4\n"
    data = json.loads(run("history", db, "tree-1", "--json").output)
    assert [(r["id"], r["on_head_path"]) for r in data] == [
        (0, True), (1, True), (2, True), (3, False), (4, False), (5, True), (6, True)]
    part = list(csv.DictReader(io.StringIO(run("history", db, "tree-1", "--to", 4, "--format", "csv").output)))
    assert [r["on_head_path"] for r in part] == ["True", "True", "True", "False", "False"]
    # HEAD moved to the first line: the branch's events are the ones marked now.
    run("navigate", db, "tree-1", 4)
    data = json.loads(run("history", db, "tree-1", "--json").output)
    assert [r["id"] for r in data if not r["on_head_path"]] == [5, 6]
    result = invoke("history", db, "tree-1", "--from", 5)
    assert [r[-2] for r in table_rows(result.stdout)] == ["other", "other"]
    assert "2 events not on HEAD's path" in result.stderr


def test_history_without_branches_looks_as_before(db, tmp_path):
    # A range all on HEAD's path, and a linear history: no branch column, no note.
    result = invoke("history", db, "tree-1", "--to", 2)
    assert result.stdout.splitlines()[0].split() == ["id", "kind", "source", "hid", "by", "preview"]
    assert result.stderr == ""
    linear = tmp_path / "linear.db"
    with EventStore(linear) as store:
        store.create_conversation("c").append_many([f.user(f"m{i}") for i in range(4)])
    result = invoke("history", linear, "c")
    assert "branch" not in result.stdout and result.stderr == ""
    assert all(r["on_head_path"] for r in json.loads(run("history", linear, "c", "--json").output))


def test_a_deep_tree_fits_80_columns_and_draws_in_ascii_too(tmp_path):
    """Thirty branches, each leaving the one before: the drawing loses its left part, the
    path column is cut, and every leaf still shows; without UTF-8 the drawing is ASCII."""
    path = tmp_path / "deep.db"
    with EventStore(path) as store:
        conv = store.create_conversation("deep")
        a, _ = conv.append_many([f.user("a0"), f.user("b0")])
        for k in range(30):
            conv.navigate(a)
            a, _ = conv.append_many([f.user(f"a{k + 1}"), f.user(f"b{k + 1}")])
    out = run("branches", path, "deep").output
    narrow(out)
    rows = out.splitlines()[3:]
    assert len(rows) == 31
    assert [int(re.match(r"\D*(\d+)", line[3:]).group(1)) for line in rows] == [1 + 2 * k for k in range(31)]
    # The drawing keeps its right part, the path its first and last intervals.
    assert rows[-1].startswith("*  …") and rows[-1].endswith("  0, …, 50, 52, 54, 56, 58, 60..61")
    proc = subprocess.run([sys.executable, "-m", "openhands_memory.cli", "branches", str(path), "deep"],
                          cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **ENV, "PYTHONIOENCODING": "ascii"})
    assert proc.returncode == 0, proc.stderr
    assert "`- 3" in proc.stdout and "-  ----" in proc.stdout
    assert all(ord(c) < 128 for line in proc.stdout.splitlines()[1:] for c in line)  # the table's lines
