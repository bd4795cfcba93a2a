"""Every command on both backends: the same invocation with a file path or a postgresql:// URL
gives the same answers."""

from __future__ import annotations

import json

import pytest

from openhands_memory.conversation import EventStore

from . import factories as f
from .sdk_shape import sdk_history
from .test_cli import run


@pytest.fixture
def filled(database_url, tmp_path):
    """A database holding an SDK-shaped conversation, and the JSONL it was imported from."""
    events = list(sdk_history(200, seed=21))
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text("".join(e.model_dump_json(exclude_none=True) + "\n" for e in events))
    run("import", database_url, jsonl, "--as", "conv-1")
    return database_url, events, jsonl


def test_reading_commands(filled):
    db, events, _ = filled
    view = json.loads(run("view", db, "conv", "--json").output)  # a prefix names it
    with EventStore(db) as store:
        expected = [e.seq for e in store.conversation("conv-1").view()]
    assert [e["id"] for e in view["events"]] == expected
    listed = json.loads(run("conversations", db, "--format", "json").output)
    assert [(c["id"], c["events"]) for c in listed] == [("conv-1", len(events))]
    assert listed[0]["visible"] == sum(1 for e in view["events"] if e["id"] is not None)
    stats = json.loads(run("stats", db, "conv-1", "--json").output)
    assert stats["events"] == len(events) and stats["condensations"] >= 5
    history = json.loads(run("history", db, "conv-1", "--from", "0", "--to", "9", "--format", "json").output)
    assert [r["id"] for r in history] == list(range(10))
    out = run("sql", db, "SELECT COUNT(*) AS n FROM event", "--format", "json").output
    assert json.loads(out) == [{"n": len(events)}]


def test_sql_cannot_write(filled):
    db, events, _ = filled
    out = run("sql", db, "DELETE FROM event", code=1).output
    assert "read-only" in out
    assert json.loads(run("sql", db, "SELECT COUNT(*) AS n FROM event", "--format", "json").output) == [{"n": len(events)}]


def test_doctor_quick_and_full_and_fix(filled):
    db, _, _ = filled
    assert "is healthy" in run("doctor", db).output
    assert "is healthy" in run("doctor", db, "--full").output
    with EventStore(db) as store:
        store.conversation("conv-1").append(f.action("dangling-r", "dangling-c"))
    out = run("doctor", db, "--json", code=1).output
    assert [p["check"] for p in json.loads(out)["problems"]] == ["dangling tool call"]
    assert "is healthy" not in run("doctor", db, "--fix", code=1).output  # it may still be running
    assert "is healthy" in run("doctor", db, "--fix", "--min-age", "0").output


def test_export_import_round_trip_and_condense(filled, tmp_path):
    db, events, _ = filled
    out = tmp_path / "out.jsonl"
    run("export", db, "conv-1", "-o", out)
    back = [json.loads(line) for line in out.read_text().splitlines()]
    assert [e["id"] for e in back] == [e.id for e in events]
    before = len(json.loads(run("view", db, "conv-1", "--json").output)["events"])
    run("condense", db, "conv-1", "--type", "amortized", "--set", "max_size=20", "--set", "keep_first=2")
    after = json.loads(run("view", db, "conv-1", "--json").output)["events"]
    assert len(after) < before
    assert "already at revision" in run("migrate", db).output


def test_tree_commands(database_url):
    """branches, navigate, fork, view --at and history's on_head_path, on either backend."""
    db = database_url
    with EventStore(db) as store:
        conv = store.create_conversation("tree-1")
        conv.append_many([f.system(), f.user("first"), f.action("r1", "c1"), f.observation("c1"), f.user("more")])
        conv.navigate(2)
        conv.append_many([f.observation("c1", "retried"), f.user("on the branch")])
    branches = json.loads(run("branches", db, "tree", "--json").output)
    assert [(b["leaf"], b["length"], b["fork"], b["head"], b["path"]) for b in branches] == [
        (4, 5, 2, False, [[0, 4]]), (6, 5, 2, True, [[0, 2], [5, 6]])]
    assert run("branches", db, "tree-1").output.splitlines()[0] == (
        "tree-1 · 7 events · 2 branches · HEAD at event 6 (*)")
    first_line = json.loads(run("view", db, "tree-1", "--at", 4, "--json").output)
    assert [e["id"] for e in first_line["events"]] == [0, 1, 2, 3, 4]
    now = json.loads(run("view", db, "tree-1", "--json").output)
    assert [e["id"] for e in now["events"]] == [0, 1, 2, 5, 6] and now["path"] == [[0, 2], [5, 6]]
    history = json.loads(run("history", db, "tree-1", "--json").output)
    assert [r["id"] for r in history if not r["on_head_path"]] == [3, 4]
    assert run("navigate", db, "tree-1", 99, code=1).output == "Error: conversation 'tree-1' has no event 99\n"
    assert json.loads(run("navigate", db, "tree-1", 4, "--json").output) == {"conversation": "tree-1", "head": 4}
    assert json.loads(run("view", db, "tree-1", "--json").output)["upto"] == 4
    made = json.loads(run("fork", db, "tree-1", "--at", 6, "--as", "copy", "--json").output)
    assert made == {"conversation": "copy", "length": 5, "forked_from": "tree-1", "at": 6}
    assert run("fork", db, "tree-1", "--as", "copy", code=1).output == (
        "Error: a conversation with id 'copy' already exists\n")
    listed = json.loads(run("conversations", db, "--format", "json").output)
    assert sorted((c["id"], c["events"]) for c in listed) == [("copy", 5), ("tree-1", 7)]
    assert run("navigate", db, "tree-1", "--root").output == (
        "HEAD of tree-1 is empty now: the next event starts a new root\n")
