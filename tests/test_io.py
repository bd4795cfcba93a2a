"""Import and export: OpenHands SDK folders (round trips), legacy trajectories, JSONL, bad input.

The SDK folders here are written by hand in the shape the SDK persists (``model_dump_json``
with ``exclude_none``: ``kind`` last, ``None`` fields left out, ``parent_id`` chains), not by
this library, so that the importer is tested against the format rather than against itself.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

import pytest

from openhands_memory.inspection import doctor
from openhands_memory.storage import hidden, tree
from openhands_memory.storage.sqlite import SqliteSession
from openhands_memory.condensers import AmortizedForgettingCondenser, default_condenser
from openhands_memory.errors import ConversationExists
from openhands_memory.events import Condensation
from openhands_memory.io import legacy, sdk
from openhands_memory.io.common import ImportFailed
from openhands_memory.io.importer import detect, import_path
from openhands_memory.io.jsonl import parse_text, write_jsonl
from openhands_memory.conversation import EventStore
from openhands_memory.view import View

from . import factories as f

CONV_ID = "7f3c2a1e-9b4d-4c8e-a1f0-3d2b5c6e7f80"


# --- an SDK conversation, written by hand -----------------------------------------------------


def _uid(n: int) -> str:
    return str(uuid.UUID(int=0xA11CE << 96 | n, version=4))


def _text(t: str) -> dict:
    return {"cache_prompt": False, "type": "text", "text": t}


def sdk_events() -> list[dict]:
    """A short SDK session: system, task, a thinking tool loop, a parallel batch, a bad call, a
    condensation forgetting the first turns (with the SDK's "-summary" id among them), more
    work, a request, a state update and a pause."""
    ts = iter(f"2026-11-21T08:{m:02d}:{s:02d}.000123" for m in range(60) for s in range(0, 60, 7))
    ev: list[dict] = []

    def add(d: dict) -> dict:
        d = {"id": _uid(len(ev)), "timestamp": next(ts), **d}
        if ev:
            d["parent_id"] = ev[-1]["id"]
        ev.append(d)
        return d

    def action(call: str, response: str, command: str, thought: str = "", think: bool = False) -> dict:
        args = json.dumps({"command": command})
        return add({
            "source": "agent", "thought": [_text(thought)] if thought else [],
            "thinking_blocks": [{"type": "thinking", "thinking": "plan the next step", "signature": "c2ln"}] if think else [],
            "action": {"command": command, "is_input": False, "kind": "TerminalAction"},
            "tool_name": "terminal", "tool_call_id": call,
            "tool_call": {"id": call, "name": "terminal", "arguments": args, "origin": "completion"},
            "llm_response_id": response, "security_risk": "LOW", "kind": "ActionEvent",
        })

    def observe(a: dict, out: str, code: int = 0) -> dict:
        return add({
            "source": "environment", "tool_name": "terminal", "tool_call_id": a["tool_call_id"],
            "observation": {"content": [_text(out)], "is_error": False, "command": a["action"]["command"],
                            "exit_code": code, "timeout": False, "kind": "TerminalObservation"},
            "action_id": a["id"], "kind": "ObservationEvent",
        })

    add({"source": "agent", "system_prompt": _text("You are a coding agent."), "tools": [{"description": "Run a command", "action_type": "TerminalAction",
                                                                         "observation_type": "TerminalObservation",
                                                                         "kind": "TerminalTool", "title": "terminal"}],
         "kind": "SystemPromptEvent"})
    add({"source": "user", "llm_message": {"role": "user", "content": [_text("Fix the failing test")],
                                           "thinking_blocks": []},
         "activated_skills": [], "extended_content": [], "kind": "MessageEvent"})
    a = action("toolu_01", "chatcmpl-1", "ls", "Let me look.", think=True)
    observe(a, "src tests")
    a = action("toolu_02", "chatcmpl-2", "pytest -q")
    observe(a, "1 failed", 1)
    a1 = action("toolu_03", "chatcmpl-3", "cat src/a.py", "Two files at once.")
    a2 = action("toolu_04", "chatcmpl-3", "cat tests/test_a.py")
    observe(a1, "def a(): ...")
    observe(a2, "def test_a(): ...")
    bad = add({"source": "agent", "thought": [], "thinking_blocks": [], "tool_name": "terminal",
               "tool_call_id": "toolu_05",
               "tool_call": {"id": "toolu_05", "name": "terminal", "arguments": "{\"comm", "origin": "completion"},
               "llm_response_id": "chatcmpl-4", "security_risk": "UNKNOWN", "kind": "ActionEvent"})
    add({"source": "agent", "tool_name": "terminal", "tool_call_id": bad["tool_call_id"],
         "error": "arguments are not valid JSON",
         "classification": {"kind": "unknown", "retryable": False, "user_action": "none"}, "kind": "AgentErrorEvent"})
    forgotten = [e["id"] for e in ev[2:12]] + [_uid(999) + "-summary"]
    add({"source": "environment", "forgotten_event_ids": forgotten, "summary": "USER_CONTEXT: fix the test",
         "summary_offset": 2, "llm_response_id": "chatcmpl-sum-1", "kind": "Condensation"})
    a = action("toolu_06", "chatcmpl-5", "pytest -q", "Run again.")
    observe(a, "3 passed")
    add({"source": "environment", "kind": "CondensationRequest"})
    add({"source": "environment", "key": "execution_status", "value": "finished",
         "kind": "ConversationStateUpdateEvent"})
    add({"source": "agent", "llm_message": {"role": "assistant", "content": [_text("Done.")], "thinking_blocks": []},
         "llm_response_id": "chatcmpl-6", "activated_skills": [], "extended_content": [], "kind": "MessageEvent"})
    add({"source": "user", "kind": "PauseEvent"})
    return ev


def write_folder(folder: Path, events: list[dict], base_state: dict | None = None) -> Path:
    (folder / "events").mkdir(parents=True)
    for i, d in enumerate(events):
        (folder / "events" / f"event-{i:05d}-{d['id']}.json").write_text(json.dumps(d, separators=(",", ":")))
    (folder / "events" / ".eventlog.lock").touch()
    (folder / "events" / f".eventlog-len-{len(events)}.marker").touch()
    if base_state is not None:
        (folder / "base_state.json").write_text(json.dumps(base_state))
    return folder


@pytest.fixture
def folder(tmp_path) -> Path:
    return write_folder(tmp_path / uuid.UUID(CONV_ID).hex, sdk_events(),
                        {"id": CONV_ID, "agent": {"kind": "Agent", "llm": {"model": "gpt-x"}},
                         "execution_status": "finished"})


def payloads(store: EventStore, cid: str) -> list[tuple]:
    return store.db.execute(
        "SELECT id, uid, kind, source, timestamp, tool_call_id, llm_response_id, has_thinking, llm_visible, payload "
        "FROM event WHERE conversation_id = ? ORDER BY id", (cid,)).fetchall()


def ranges_of(store: EventStore, cid: str) -> list[tuple]:
    return store.db.execute(
        "SELECT condensation_id, start_id, end_id FROM forgotten_range WHERE conversation_id = ? "
        "ORDER BY condensation_id, start_id", (cid,)).fetchall()


def condensation_rows(store: EventStore, cid: str) -> list[tuple]:
    """Each condensation's id, summary, offset and the runs hidden right after it."""
    rows = store.db.execute(
        "SELECT id, summary, summary_offset FROM condensation WHERE conversation_id = ? ORDER BY id",
        (cid,)).fetchall()
    return [(*r, hidden.at(SqliteSession(store.db), cid, r[0])) for r in rows]


def view_shape(view: View) -> list[tuple]:
    return [(e.seq, e.id, e.to_json()) for e in view.events if e.seq is not None] + [
        ("summary", e.id, getattr(e, "summary", None)) for e in view.events if e.seq is None
    ] + [("request", view.unhandled_condensation_request)]


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- the SDK folder -------------------------------------------------------------------------------


def test_import_sdk_folder_keeps_ids_order_and_maps_condensations(tmp_path, folder):
    events = sdk_events()
    with EventStore(tmp_path / "a.db") as store:
        result = import_path(store, folder)
        assert (result.conversation_id, result.format, result.events, result.condensations) == (
            CONV_ID, "openhands", len(events), 1)
        rows = payloads(store, CONV_ID)
        assert [r[0] for r in rows] == list(range(len(events)))  # ids are the file indexes
        assert [r[1] for r in rows] == [e["id"] for e in events]  # the SDK's UUIDs kept as uids
        assert [json.loads(r[9])["kind"] for r in rows] == [e["kind"] for e in events]
        assert rows[2][7] == 1 and rows[2][3] == "agent"  # thinking recorded on the loop's first action
        # The Condensation (id 12) forgot events 2..11 (the "-summary" id names no event).
        assert ranges_of(store, CONV_ID) == [(12, 2, 11)]
        conv = store.conversation(CONV_ID)
        assert conv.metadata["openhands"]["base_state"]["execution_status"] == "finished"
        view = conv.view()
        assert view.seqs == [0, 1, None, 13, 14, 17] and not view.dropped
        assert view.summary_event.summary == "USER_CONTEXT: fix the test"
        assert view.unhandled_condensation_request
        # The same answer as the plain fold over the events.
        assert view_shape(view) == view_shape(View.from_events(list(conv.events())))


def test_openhands_round_trip_is_equal(tmp_path, folder):
    with EventStore(tmp_path / "a.db") as one, EventStore(tmp_path / "b.db") as two:
        import_path(one, folder)
        out = tmp_path / "exported"
        result = sdk.export_folder(one.conversation(CONV_ID), out)
        assert result.events == len(sdk_events()) and not result.notes
        # Laid out and named as the SDK writes it.
        names = sorted(p.name for p in (out / "events").iterdir())
        assert names[0] == f".eventlog-len-{len(sdk_events())}.marker"
        assert names[1:] == sorted(f"event-{i:05d}-{e['id']}.json" for i, e in enumerate(sdk_events()))
        assert json.loads((out / "base_state.json").read_text())["id"] == CONV_ID
        # Imported SDK files are written back byte for byte.
        for i, e in enumerate(sdk_events()):
            written = json.loads((out / "events" / f"event-{i:05d}-{e['id']}.json").read_text())
            assert written == {**e, **{k: v for k, v in written.items() if k not in e}}
        import_path(two, out)
        assert payloads(one, CONV_ID) == payloads(two, CONV_ID)
        assert ranges_of(one, CONV_ID) == ranges_of(two, CONV_ID)
        assert condensation_rows(one, CONV_ID) == condensation_rows(two, CONV_ID)
        for at in (None, 5, 12, 15):
            assert view_shape(one.conversation(CONV_ID).view(at=at)) == view_shape(two.conversation(CONV_ID).view(at=at))


def test_our_condensations_export_in_the_sdks_shape(tmp_path):
    """Condensations made here forget id ranges; exported, they list the forgotten events' ids."""
    with EventStore(tmp_path / "a.db") as one, EventStore(tmp_path / "b.db") as two:
        conv = one.create_conversation("mine")
        conv.append_many([f.system(), f.user("task")])
        for i in range(40):
            conv.append_many([f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}")])
            conv.step(AmortizedForgettingCondenser(max_size=20, keep_first=2))
        conv.append(f.request())
        conv.step(default_condenser())  # a summary too
        stored = [e for e in conv.events() if isinstance(e, Condensation)]
        assert len(stored) >= 3 and all(c.forgotten_ranges for c in stored)
        out = tmp_path / "out"
        sdk.export_folder(conv, out)
        files = {int(p.name[6:11]): json.loads(p.read_text()) for p in (out / "events").glob("event-*.json")}
        uids = {seq: d["id"] for seq, d in files.items()}
        for c in stored:
            d = files[c.seq]
            assert "forgotten_ranges" not in d and d["llm_response_id"]
            assert d["forgotten_event_ids"] == [uids[i] for s, e in c.forgotten_ranges for i in range(s, e + 1)]
        import_path(two, out)
        a, b = one.conversation("mine"), two.conversation("mine")
        assert view_shape(a.view()) == view_shape(b.view())
        assert ranges_of(one, "mine") == ranges_of(two, "mine")  # the very same ranges
        assert condensation_rows(one, "mine") == condensation_rows(two, "mine")
        assert [(r[0], r[1], r[2]) for r in payloads(one, "mine")] == [(r[0], r[1], r[2]) for r in payloads(two, "mine")]


def test_conversation_id_defaults_and_override(tmp_path):
    events = sdk_events()[:4]
    plain = write_folder(tmp_path / "abc123", events)  # no base_state.json: the folder's name
    with EventStore(tmp_path / "a.db") as store:
        assert import_path(store, plain).conversation_id == "abc123"
        assert import_path(store, plain, "other").conversation_id == "other"
        with pytest.raises(ConversationExists):
            import_path(store, plain)
        assert import_path(store, plain / "events", "from-events-dir").events == 4  # the events folder itself


# --- bad input: named, and nothing imported ------------------------------------------------------


def _corrupt(tmp_path, how: str) -> tuple[Path, str]:
    events = sdk_events()
    folder = write_folder(tmp_path / "bad", events, {"id": "bad"})
    ev = folder / "events"
    name7 = f"event-00007-{events[7]['id']}.json"
    if how == "json":
        (ev / name7).write_text('{"id": "oops", "kind": "ActionEvent"')
        return folder, name7
    if how == "field":
        d = dict(events[7])
        del d["tool_call"]
        (ev / name7).write_text(json.dumps(d))
        return folder, "tool_call"
    if how == "kind":
        (ev / name7).write_text(json.dumps({**events[7], "kind": "TelepathyEvent"}))
        return folder, "TelepathyEvent"
    if how == "gap":
        (ev / name7).unlink()
        return folder, "00007 is missing"
    if how == "twice":
        (ev / f"event-00007-{_uid(777)}.json").write_text(json.dumps({**events[7], "id": _uid(777)}))
        return folder, "index 00007 is also used"
    if how == "mismatch":
        (ev / name7).write_text(json.dumps({**events[7], "id": _uid(4242)}))
        return folder, "file name says event id"
    if how == "duplicate":
        (ev / name7).unlink()
        (ev / f"event-00007-{events[3]['id']}.json").write_text(json.dumps(events[3]))
        return folder, "appears twice"
    if how == "base_state":
        (folder / "base_state.json").write_text("{not json")
        return folder, "base_state.json:1:2: not valid JSON"
    if how == "name":
        (ev / "event-7-x.json").write_text("{}")
        return folder, "event-7-x.json"
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["json", "field", "kind", "gap", "twice", "mismatch", "duplicate", "base_state", "name"])
def test_bad_folder_is_named_and_nothing_is_imported(tmp_path, how):
    folder, expected = _corrupt(tmp_path, how)
    db = tmp_path / "a.db"
    with EventStore(db) as store:
        store.create_conversation("keep").append(f.user())
    before = file_hash(db)
    with EventStore(db) as store:
        with pytest.raises(ImportFailed) as info:
            import_path(store, folder)
        assert expected in str(info.value)
        assert [c.id for c in store.conversations()] == ["keep"]
        assert store.db.execute("SELECT COUNT(*) FROM event").fetchone()[0] == 1
    assert file_hash(db) == before


def test_corrupt_last_file_rolls_back_every_batch(tmp_path):
    events = [f.user(f"m{i}").to_json_dict() for i in range(30)]
    folder = write_folder(tmp_path / "long", events)
    last = folder / "events" / f"event-00029-{events[29]['id']}.json"
    last.write_text("[1, 2")
    with EventStore(tmp_path / "a.db") as store:
        with pytest.raises(ImportFailed, match="event-00029"):
            import_path(store, folder, chunk=7)  # four batches written before the bad one
        assert store.conversations() == []


def test_not_a_conversation_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("hi")
    with pytest.raises(ImportFailed, match="not an OpenHands conversation folder"):
        detect(tmp_path / "empty")
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(ImportFailed, match="not an OpenHands conversation folder, a legacy"):
        detect(tmp_path / "x.txt")
    (tmp_path / "blank.jsonl").write_text("\n\n")
    with pytest.raises(ImportFailed, match="empty"):
        detect(tmp_path / "blank.jsonl")


# --- JSONL ---------------------------------------------------------------------------------------


def test_jsonl_round_trip_keeps_ranges_and_notes_bad_lines(tmp_path):
    with EventStore(tmp_path / "a.db") as one, EventStore(tmp_path / "b.db") as two:
        conv = one.create_conversation("j")
        conv.append_many([f.system(), f.user("go")] + [e for i in range(30) for e in (f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}"))])
        conv.condense(AmortizedForgettingCondenser(max_size=20, keep_first=2))
        path = tmp_path / "j.jsonl"
        with open(path, "w") as out:
            assert write_jsonl(conv, out) == 63
        assert detect(path) == "jsonl"
        result = import_path(two, path)
        assert (result.conversation_id, result.events, result.condensations) == ("j", 63, 1)
        assert payloads(one, "j") == payloads(two, "j")
        assert ranges_of(one, "j") == ranges_of(two, "j")
        assert view_shape(conv.view()) == view_shape(two.conversation("j").view())
        lines = path.read_text().splitlines()
        lines[41] = lines[41].replace('"kind":"ObservationEvent"', '"kind":"Nope"')
        bad = tmp_path / "bad.jsonl"
        bad.write_text("\n".join(lines) + "\n")
        with pytest.raises(ImportFailed, match=r"bad\.jsonl:42: unknown event kind 'Nope'"):
            import_path(two, bad, "other")
        assert "other" not in two


def test_forgotten_range_beyond_its_position_is_named(tmp_path):
    lines = [f.user("a").to_json(), f.condensation(ranges=[(0, 5)]).to_json()]
    (tmp_path / "c.jsonl").write_text("\n".join(lines))
    with EventStore(tmp_path / "a.db") as store:
        with pytest.raises(ImportFailed, match=r"c\.jsonl:2: .*\[0, 5\] must lie within the events before it \(0\.\.0\)"):
            import_path(store, tmp_path / "c.jsonl")


def test_parse_text_accepts_object_list_and_lines():
    one, two = f.user("x").to_json_dict(), f.agent_says("y").to_json_dict()
    assert len(parse_text(json.dumps(one), "-")) == 1
    assert len(parse_text(json.dumps([one, two], indent=2), "-")) == 2
    assert len(parse_text(json.dumps(one) + "\n\n" + json.dumps(two) + "\n", "-")) == 2
    assert len(parse_text(json.dumps(one, indent=2), "-")) == 1  # pretty-printed single object
    with pytest.raises(ImportFailed, match=r"-:2:2: not valid JSON"):
        parse_text(json.dumps(one) + "\n{oops\n", "-")
    with pytest.raises(ImportFailed, match=r"-\[1\]: field 'kind': missing"):
        parse_text(json.dumps([one, {"id": "x"}]), "-")


# --- legacy (V0) trajectories ------------------------------------------------------------------


def _tcm(call: str, response: str, fn: str, arguments: dict | None = None, calls: int = 1, extra_msg: dict | None = None) -> dict:
    message = {"role": "assistant", "content": None,
               "tool_calls": [{"id": call, "type": "function",
                               "function": {"name": fn, "arguments": json.dumps(arguments or {})}}],
               **(extra_msg or {})}
    return {"function_name": fn, "tool_call_id": call, "total_calls_in_response": calls,
            "model_response": {"id": response, "model": "claude-x", "choices": [{"index": 0, "message": message}]}}


def legacy_trajectory() -> list[dict]:
    ts = "2025-03-01T10:00:00.000000"
    return [
        {"id": 0, "timestamp": ts, "source": "agent", "message": "You are OpenHands agent.", "action": "system",
         "args": {"content": "You are OpenHands agent.", "tools": [{"type": "function", "function": {"name": "execute_bash"}}]}},
        {"id": 1, "timestamp": ts, "source": "user", "message": "Fix the bug", "action": "message",
         "args": {"content": "Fix the bug", "image_urls": ["http://x/screen.png"], "wait_for_response": False}},
        {"id": 2, "timestamp": ts, "source": "user", "message": "Retrieving content for: Fix the bug",
         "action": "recall", "args": {"recall_type": "workspace_context", "query": "Fix the bug", "thought": ""}},
        {"id": 3, "timestamp": ts, "source": "environment", "message": "Added workspace context", "cause": 2,
         "observation": "recall", "content": "Added workspace context",
         "extras": {"recall_type": "workspace_context", "repo_name": "acme/app", "repo_directory": "/workspace/app",
                    "repo_instructions": "Run make test.", "runtime_hosts": {"http://localhost:5000": 5000},
                    "microagent_knowledge": [{"name": "python", "trigger": "pytest", "content": "Use pytest -q."}]}},
        {"id": 4, "timestamp": ts, "source": "agent", "message": "", "observation": "agent_state_changed",
         "content": "", "extras": {"agent_state": "running", "reason": ""}},
        {"id": 5, "timestamp": ts, "source": "agent", "message": "Running command: ls", "action": "run",
         "args": {"command": "ls", "is_input": False, "thought": "Let me look around.", "blocking": False},
         "tool_call_metadata": _tcm("toolu_a", "resp-1", "execute_bash", {"command": "ls"},
                                    extra_msg={"reasoning_content": "think first",
                                               "thinking_blocks": [{"type": "thinking", "thinking": "hm", "signature": "s"}]})},
        {"id": 6, "timestamp": ts, "source": "agent", "message": "Command `ls` executed with exit code 0.", "cause": 5,
         "observation": "run", "content": "app.py\ntests",
         "extras": {"command": "ls", "metadata": {"exit_code": 0}, "hidden": False},
         "tool_call_metadata": _tcm("toolu_a", "resp-1", "execute_bash")},
        # two calls in one response, then their results
        {"id": 7, "timestamp": ts, "source": "agent", "message": "Reading file: app.py", "action": "read",
         "args": {"path": "/workspace/app/app.py", "thought": "Both files."},
         "tool_call_metadata": _tcm("toolu_b", "resp-2", "str_replace_editor", {"command": "view", "path": "/workspace/app/app.py"}, 2)},
        {"id": 8, "timestamp": ts, "source": "agent", "message": "Running command: cat tests", "action": "run",
         "args": {"command": "cat tests/test_app.py", "thought": ""},
         "tool_call_metadata": _tcm("toolu_c", "resp-2", "execute_bash", {"command": "cat tests/test_app.py"}, 2)},
        {"id": 9, "timestamp": ts, "source": "agent", "message": "I read the file", "cause": 7, "observation": "read",
         "content": "def f(): return 1", "extras": {"path": "/workspace/app/app.py"},
         "tool_call_metadata": _tcm("toolu_b", "resp-2", "str_replace_editor")},
        {"id": 10, "timestamp": ts, "source": "agent", "message": "error", "cause": 8, "observation": "error",
         "content": "cat: tests/test_app.py: No such file", "extras": {"error_id": ""},
         "tool_call_metadata": _tcm("toolu_c", "resp-2", "execute_bash")},
        {"id": 11, "timestamp": ts, "source": "agent", "message": "Visiting https://docs", "action": "browse",
         "args": {"url": "https://docs.python.org", "thought": ""},
         "tool_call_metadata": _tcm("toolu_d", "resp-3", "browser", {"url": "https://docs.python.org"})},
        {"id": 12, "timestamp": ts, "source": "agent", "message": "Visited", "cause": 11, "observation": "browse",
         "content": "Python docs", "extras": {"url": "https://docs.python.org", "trigger_by_action": "browse"},
         "tool_call_metadata": _tcm("toolu_d", "resp-3", "browser")},
        {"id": 13, "timestamp": ts, "source": "agent", "message": "", "action": "null", "args": {}},
        {"id": 15, "timestamp": ts, "source": "agent", "message": "Summary: ...", "action": "condensation",
         "args": {"forgotten_event_ids": None, "forgotten_events_start_id": 5, "forgotten_events_end_id": 10,
                  "summary": "The agent listed files and read app.py.", "summary_offset": 3}},
        {"id": 16, "timestamp": ts, "source": "user", "message": "Running command: make test", "action": "run",
         "args": {"command": "make test", "thought": "", "hidden": False}},
        {"id": 17, "timestamp": ts, "source": "user", "message": "", "cause": 16, "observation": "run",
         "content": "2 passed", "extras": {"command": "make test", "metadata": {"exit_code": 0}}},
        {"id": 18, "timestamp": ts, "source": "agent", "message": "", "action": "run",
         "args": {"command": "env", "thought": "", "hidden": True}},
        {"id": 19, "timestamp": ts, "source": "agent", "message": "Requesting a condensation", "action": "condensation_request",
         "args": {}},
        {"id": 20, "timestamp": ts, "source": "agent", "message": "Summary: again", "action": "condensation",
         "args": {"forgotten_event_ids": [1, 11, 12, 99], "summary": None, "summary_offset": None}},
        {"id": 21, "timestamp": ts, "source": "agent", "message": "All done", "action": "finish",
         "args": {"final_thought": "The bug is fixed.", "task_completed": "true", "outputs": {}, "thought": "Tests pass."},
         "tool_call_metadata": _tcm("toolu_e", "resp-4", "finish", {"message": "The bug is fixed."})},
    ]


def test_legacy_trajectory_is_mapped_honestly(tmp_path):
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(list(reversed(legacy_trajectory()))))  # any order: sorted by legacy id
    with EventStore(tmp_path / "a.db") as store:
        result = import_path(store, path)
        assert (result.conversation_id, result.format, result.events, result.condensations) == ("trajectory", "legacy", 21, 2)
        conv = store.conversation("trajectory")
        events = list(conv.events())
        assert [e.kind for e in events] == [
            "SystemPromptEvent", "MessageEvent", "RecallAction", "RecallObservation", "AgentStateChangedEvent",
            "ActionEvent", "ObservationEvent", "ActionEvent", "ActionEvent", "ObservationEvent", "AgentErrorEvent",
            "ActionEvent", "ObservationEvent", "NullEvent", "Condensation", "MessageEvent", "MessageEvent",
            "NullEvent", "CondensationRequest", "Condensation", "MessageEvent"]
        assert [e.id for e in events][:3] == ["0", "1", "2"] and events[14].id == "15"  # legacy ids kept as uids
        user, recalled, act, obs = events[1], events[3], events[5], events[6]
        assert [c.type for c in user.llm_message.content] == ["text", "image"]
        assert "acme/app" in recalled.content and "Use pytest -q." in recalled.content and recalled.action_id == "2"
        assert act.tool_call.arguments == '{"command": "ls"}' and act.llm_response_id == "resp-1"
        assert act.thinking_blocks and act.reasoning_content == "think first" and act.thought[0].text == "Let me look around."
        assert act.action["kind"] == "CmdRunAction" and "thought" not in act.action
        assert obs.tool_call_id == "toolu_a" and obs.action_id == "5" and obs.observation["kind"] == "CmdOutputObservation"
        assert events[7].llm_response_id == events[8].llm_response_id == "resp-2"  # a parallel batch
        assert not events[8].thinking_blocks
        assert events[10].error.startswith("cat:")
        assert events[12].browser_url == "https://docs.python.org"
        assert "User executed the command:\nmake test" in events[15].llm_message.content[0].text
        assert events[16].llm_message.role == "user" and "2 passed" in events[16].llm_message.content[0].text
        assert events[17].model_extra["legacy_event"]["args"]["command"] == "env"  # hidden: kept, never shown
        assert events[20].llm_message.content[0].text == "Tests pass.\n\nThe bug is fixed."
        # Legacy id ranges mapped onto ours: 5..10 -> ids 5..10; [1, 11, 12, 99] -> 1, 11, 12.
        assert ranges_of(store, "trajectory") == [(14, 5, 10), (19, 1, 1), (19, 11, 12)]
        view = conv.view()
        # The newest summary stays (a later summary-less condensation keeps it), at offset 3.
        assert [e.kind for e in view.events] == [
            "SystemPromptEvent", "RecallAction", "RecallObservation", "CondensationSummaryEvent", "MessageEvent",
            "MessageEvent", "MessageEvent"]
        assert not view.dropped


def test_legacy_errors_are_named(tmp_path):
    bad = legacy_trajectory()
    bad[6]["tool_call_metadata"] = {"function_name": "execute_bash"}
    (tmp_path / "t.json").write_text(json.dumps(bad))
    with EventStore(tmp_path / "a.db") as store:
        with pytest.raises(ImportFailed, match=r"t\.json\[6\] \(legacy id 6\): tool_call_metadata.tool_call_id is missing"):
            import_path(store, tmp_path / "t.json")
        bad = legacy_trajectory()
        bad[14]["args"]["summary_offset"] = None
        (tmp_path / "t.json").write_text(json.dumps({"history": bad}))
        with pytest.raises(ImportFailed, match="summary and summary_offset go together"):
            import_path(store, tmp_path / "t.json")
        assert store.conversations() == []
    assert legacy.looks_legacy(legacy_trajectory()[0]) and not legacy.looks_legacy(f.user().to_json_dict())


# --- the demo conversation ---------------------------------------------------------------------


def test_demo_conversation_is_generated_deterministically_and_well_formed():
    from collections import Counter

    from openhands_memory.data import DEMO_CONVERSATION
    from tools import make_demo

    text = make_demo.render(make_demo.events())
    assert text == DEMO_CONVERSATION.read_text(encoding="utf-8"), "run python tools/make_demo.py"
    events = [f_ for f_, _ in parse_text(text, "demo")]
    assert 300 <= len(events) <= 600
    kinds = Counter(e.kind for e in events)
    assert kinds["AgentErrorEvent"] >= 1 and kinds["SystemPromptEvent"] == 1
    users = [e for e in events if e.kind == "MessageEvent" and e.source == "user"]
    assert len(users) >= 4
    tools = Counter(e.tool_name for e in events if e.kind == "ActionEvent")
    assert set(tools) >= {"terminal", "file_editor", "browser"} and tools["browser"] == 1
    batches = Counter(e.llm_response_id for e in events if e.kind == "ActionEvent")
    assert max(batches.values()) >= 2  # parallel calls
    assert any(e.has_thinking for e in events)
    outputs = " ".join(json.dumps(e.to_json_dict()) for e in events if e.kind == "ObservationEvent")
    assert "Traceback" in outputs and "failed" in outputs and "passed" in outputs
    view = View.from_events(events)
    assert len(view) == len(events) and not view.dropped


def test_legacy_conversation_exports_with_notes_and_comes_back(tmp_path):
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(legacy_trajectory()))
    with EventStore(tmp_path / "a.db") as one, EventStore(tmp_path / "b.db") as two:
        import_path(one, path)
        # Its system prompt lists an OpenAI function, which the SDK cannot load as a tool.
        with pytest.raises(ImportFailed, match=r"event 0 \(SystemPromptEvent\) lists the tool .*execute_bash"):
            sdk.export_folder(one.conversation("trajectory"), tmp_path / "out")
        assert not (tmp_path / "out").exists() and list(tmp_path.glob(".out*")) == []
        trajectory = legacy_trajectory()
        trajectory[0]["args"]["tools"] = []
        path.write_text(json.dumps(trajectory))
        one.delete_conversation("trajectory")
        import_path(one, path)
        result = sdk.export_folder(one.conversation("trajectory"), tmp_path / "out")
        assert any("AgentStateChangedEvent" in n and "NullEvent" in n for n in result.notes)
        assert any("not hex UUIDs" in n for n in result.notes)  # legacy ids ("5") do not match the SDK's pattern
        assert (tmp_path / "out" / "events" / "event-00005-5.json").exists()
        import_path(two, tmp_path / "out")
        # Same events; the condensations now say in the SDK's words what they forget.
        assert [r for r in payloads(one, "trajectory") if r[2] != "Condensation"] == [
            r for r in payloads(two, "trajectory") if r[2] != "Condensation"]
        assert ranges_of(one, "trajectory") == ranges_of(two, "trajectory")
        assert view_shape(one.conversation("trajectory").view()) == view_shape(two.conversation("trajectory").view())


def test_json_list_of_events(tmp_path):
    events = [f.system().to_json_dict(), f.user("x").to_json_dict(), f.agent_says().to_json_dict()]
    (tmp_path / "list.json").write_text(json.dumps(events, indent=1))
    (tmp_path / "one.json").write_text(json.dumps(events[1]))  # a single object on one line is JSON Lines
    with EventStore(tmp_path / "a.db") as store:
        result = import_path(store, tmp_path / "list.json")
        assert (result.format, result.events, result.conversation_id) == ("json", 3, "list")
        assert import_path(store, tmp_path / "one.json").format == "jsonl"
        assert [e.kind for e in store.conversation("list").view()] == ["SystemPromptEvent", "MessageEvent", "MessageEvent"]


# --- history trees: branches and HEAD ------------------------------------------------------------


def branched_sdk_events() -> tuple[list[dict], dict[str, list[int]]]:
    """An SDK session that branches, as the SDK persists it: every event names its parent (the
    leaf when it was appended). The main line works and condenses (a summary); then
    ``navigate_to`` an observation and a new branch; ``navigate_to`` the task and a message;
    ``navigate_to(None)`` and a new root. Returns the events and each leaf's path (indexes)."""
    ts = iter(f"2026-11-22T09:{m:02d}:{s:02d}.000456" for m in range(60) for s in range(0, 60, 7))
    ev: list[dict] = []

    def add(d: dict, parent: int | str | None = -2) -> int:
        d = {"id": _uid(500 + len(ev)), "timestamp": next(ts), **d}
        if parent == -2:  # the previous event
            parent = len(ev) - 1 if ev else None
        if parent is not None:
            d["parent_id"] = parent if isinstance(parent, str) else ev[parent]["id"]
        ev.append(d)
        return len(ev) - 1

    def message(source: str, text: str, parent: int | str | None = -2) -> int:
        role = "user" if source == "user" else "assistant"
        extra = {"llm_response_id": f"chatcmpl-m{len(ev)}"} if source == "agent" else {}
        return add({"source": source, "llm_message": {"role": role, "content": [_text(text)], "thinking_blocks": []},
                    **extra, "activated_skills": [], "extended_content": [], "kind": "MessageEvent"}, parent)

    def step(n: int, parent: int | str | None = -2) -> int:
        call = f"toolu_t{n}"
        args = json.dumps({"command": f"echo {n}"})
        a = add({"source": "agent", "thought": [], "thinking_blocks": [],
                 "action": {"command": f"echo {n}", "is_input": False, "kind": "TerminalAction"},
                 "tool_name": "terminal", "tool_call_id": call,
                 "tool_call": {"id": call, "name": "terminal", "arguments": args, "origin": "completion"},
                 "llm_response_id": f"chatcmpl-t{n}", "security_risk": "LOW", "kind": "ActionEvent"}, parent)
        return add({"source": "environment", "tool_name": "terminal", "tool_call_id": call,
                    "observation": {"content": [_text(f"{n}")], "is_error": False, "command": f"echo {n}",
                                    "exit_code": 0, "timeout": False, "kind": "TerminalObservation"},
                    "action_id": ev[a]["id"], "kind": "ObservationEvent"})

    add({"source": "agent", "system_prompt": _text("You are a coding agent."), "tools": [], "kind": "SystemPromptEvent"},
        None)                                                   # 0
    task = message("user", "Fix the failing test")              # 1
    step(1)                                                     # 2, 3
    first_obs = 3
    step(2)                                                     # 4, 5
    step(3)                                                     # 6, 7
    add({"source": "environment", "forgotten_event_ids": [ev[i]["id"] for i in range(2, 6)],
         "summary": "USER_CONTEXT: main line", "summary_offset": 2, "llm_response_id": "chatcmpl-sum",
         "kind": "Condensation"})                               # 8
    step(4)                                                     # 9, 10
    add({"source": "environment", "key": "execution_status", "value": "idle",
         "kind": "ConversationStateUpdateEvent"}, 10)           # 11: not a tree node
    message("user", "Try another way", first_obs)               # 12 (navigate_to(obs 3))
    step(5)                                                     # 13, 14
    message("user", "Start over from the task", task)           # 15 (navigate_to(task))
    message("user", "A new root", tree.ROOT_PARENT_ID)          # 16 (navigate_to(None))
    message("agent", "On it.")                                  # 17
    paths = {
        "main": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
        "rewound": [0, 1, 2, 3, 12, 13, 14],
        "task": [0, 1, 15],
        "root": [16, 17],
    }
    return ev, paths


def folded(conv, path: list[int]) -> View:
    """The SDK's view of a branch: the fold over the events on its path, in path order."""
    return View.from_events([conv.get(s) for s in path])


@pytest.mark.parametrize("leaf", ["main", "rewound", "task", "root", "empty", "unknown"])
def test_an_imported_folder_keeps_its_branches_and_head(tmp_path, leaf):
    events, paths = branched_sdk_events()
    state: dict = {"id": CONV_ID, "execution_status": "idle"}
    if leaf == "empty":
        state.update(leaf_event_id=None, head_is_empty=True)
    elif leaf == "unknown":
        state.update(leaf_event_id=_uid(4242), head_is_empty=False)
    else:
        state.update(leaf_event_id=events[paths[leaf][-1]]["id"], head_is_empty=False)
    folder = write_folder(tmp_path / "tree", events, state)
    with EventStore(tmp_path / "a.db") as store:
        result = import_path(store, folder)
        conv = store.conversation(CONV_ID)
        if leaf == "unknown":
            assert any("names no event" in n for n in result.notes), result.notes
            assert conv.head == 17 and view_shape(conv.view()) == view_shape(folded(conv, paths["root"]))
        elif leaf == "empty":
            assert not result.notes and conv.head is None and conv.view().events == []
        else:
            assert not result.notes
            assert conv.head == paths[leaf][-1]
            assert view_shape(conv.view()) == view_shape(folded(conv, paths[leaf]))
        # Every branch, whatever HEAD is: the fold over its own path.
        for path in paths.values():
            assert view_shape(conv.view(at=path[-1])) == view_shape(folded(conv, path)), path
        # The main line's summary shows on it and nowhere else.
        assert conv.view(at=10).summary_event is not None
        assert all(conv.view(at=p[-1]).summary_event is None for k, p in paths.items() if k != "main")
        assert sorted(b.leaf for b in conv.branches()) == [10, 14, 15, 17]
        # A fresh store (nothing cached) agrees.
        with EventStore(tmp_path / "a.db") as fresh:
            assert view_shape(fresh.conversation(CONV_ID).view()) == view_shape(conv.view())
        assert doctor.check(store, full=True).healthy


@pytest.mark.parametrize("how", ["unknown", "later"])
def test_a_parent_that_is_no_earlier_event_is_named_and_nothing_is_imported(tmp_path, how):
    events, _ = branched_sdk_events()
    events[13]["parent_id"] = _uid(4242) if how == "unknown" else events[15]["id"]
    folder = write_folder(tmp_path / "bad", events, {"id": "bad"})
    with EventStore(tmp_path / "a.db") as store:
        with pytest.raises(ImportFailed, match=rf"event-00013-.*is not an earlier event of the folder"):
            import_path(store, folder)
        assert store.conversations() == []


def unparented(view: View) -> list[tuple]:
    """``view_shape`` without ``parent_id`` (which an export writes where the SDK needs it)."""
    def drop(shape: tuple) -> tuple:
        if shape[0] in ("summary", "request"):
            return shape
        data = json.loads(shape[2])
        data.pop("parent_id", None)
        return (shape[0], shape[1], data)
    return [drop(s) for s in view_shape(view)]


def grow(conv, start: int, n: int, summarizer) -> list[int]:
    """``n`` action/observation pairs, each step condensed; the Condensations stored."""
    made = []
    for i in range(start, start + n):
        conv.append_many([f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}")])
        done = conv.condense(summarizer)
        if done.stored_as is not None:
            made.append(done.stored_as)
    return made


def test_a_branched_conversation_exports_and_comes_back_with_the_same_views(tmp_path):
    from openhands_memory.condensers import LLMSummarizingCondenser

    summarizer = LLMSummarizingCondenser(max_size=8, keep_first=2)
    with EventStore(tmp_path / "a.db") as one, EventStore(tmp_path / "b.db") as two:
        conv = one.create_conversation("tree")
        conv.append_many([f.system(), f.user("task")])
        main = grow(conv, 0, 10, summarizer)
        assert len(main) >= 2, "two summaries on the main line"
        # Back to just after the first summary (before the second), and on from there.
        conv.navigate(main[0] + 2)
        rewound = grow(conv, 100, 8, summarizer)
        assert rewound, "a summary on the new branch"
        conv.navigate(1)
        conv.append(f.user("from the task again"))
        conv.navigate(None)
        conv.append_many([f.user("a new root"), f.agent_says("ok")])
        conv.navigate(rewound[-1] + 1)
        leaves = [b.leaf for b in conv.branches()]
        assert len(leaves) == 4

        out = tmp_path / "out"
        sdk.export_folder(conv, out)
        files = {int(p.name[6:11]): json.loads(p.read_text()) for p in (out / "events").glob("event-*.json")}
        with one.reading() as db:
            jumps = dict(db.jumps("tree"))
        assert jumps, "the tree has branches"
        for seq, parent in jumps.items():
            assert files[seq]["parent_id"] == (files[parent]["id"] if parent >= 0 else "__root__"), seq
        for seq, d in files.items():  # no parent where the SDK infers it (the row before)
            if seq not in jumps:
                assert "parent_id" not in d, seq
        state = json.loads((out / "base_state.json").read_text())
        assert (state["leaf_event_id"], state["head_is_empty"]) == (files[conv.head]["id"], False)
        # The branch's summary replaces the one in force on its own path (the main line's
        # first), not the main line's second, which the SDK never shows on this branch.
        summaries = [s for s in main if files[s].get("summary")]
        first_on_branch = files[rewound[0]]
        assert f"{files[summaries[0]]['id']}-summary" in first_on_branch["forgotten_event_ids"]
        assert all(f"{files[s]['id']}-summary" not in first_on_branch["forgotten_event_ids"] for s in summaries[1:])

        import_path(two, out)
        back = two.conversation("tree")
        assert back.head == conv.head
        with two.reading() as db:
            assert dict(db.jumps("tree")) == jumps
        assert [(e.seq, e.id, e.kind) for e in back.events()] == [(e.seq, e.id, e.kind) for e in conv.events()]
        # The same views (the first event of each branch now names its parent in its JSON).
        assert unparented(back.view()) == unparented(conv.view())
        for leaf in leaves:
            assert unparented(back.view(at=leaf)) == unparented(conv.view(at=leaf)), leaf
        assert doctor.check(two, full=True).healthy


def test_an_empty_head_exports_as_the_sdk_keeps_it(tmp_path):
    with EventStore(tmp_path / "a.db") as one, EventStore(tmp_path / "b.db") as two:
        conv = one.create_conversation("empty")
        conv.append_many([f.system(), f.user("task")])
        conv.navigate(None)
        sdk.export_folder(conv, tmp_path / "out")
        state = json.loads((tmp_path / "out" / "base_state.json").read_text())
        assert (state["leaf_event_id"], state["head_is_empty"]) == (None, True)
        import_path(two, tmp_path / "out")
        back = two.conversation("empty")
        assert back.head is None and back.view().events == [] and len(back) == 2
        back.append(f.user("a new root"))
        assert back.view().seqs == [2]
