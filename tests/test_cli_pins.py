"""The pin commands (pin, unpin, pins) and what pins change in `view`, `condense --dry-run`
and `history`.

Each command is checked in text and JSON against what the library says; a refused pin must
end with one `Error:` line and exit status 1, and leave the file byte for byte as it was.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from openhands_memory.condensers import CONDENSER_TYPES
from openhands_memory.conversation import EventStore
from openhands_memory.events import ConversationStateUpdateEvent

from . import factories as f
from .cli_runner import invoke, run
from .test_cli import digest, narrow
from .test_cli_tree import refused, table_rows

CID = "pins-1"
STATE = 62  # the ConversationStateUpdateEvent: stored, never shown to the model
FIRST_PIN = 63  # the id the first pin event gets
# The condenser the tests run: forgets all but the first event and the last few.
CONDENSE = ("--type", "llm", "--set", "max_size=20", "--set", "keep_first=1")


def build(db: Path | str) -> None:
    """0: system, 1: the task, 2..61: 30 tool calls and results (every 7th the task tracker),
    62: a state update."""
    with EventStore(db) as store:
        conv = store.create_conversation(CID)
        events = [f.system(), f.user("Fix the bug in parser.py")]
        for i in range(30):
            tool = "task_tracker" if i % 7 == 0 else "terminal"
            events += [f.action(f"r{i}", f"c{i}", tool=tool), f.observation(f"c{i}", f"out {i}", tool=tool)]
        events.append(ConversationStateUpdateEvent(key="agent_status", value="running"))
        conv.append_many(events)


@pytest.fixture
def db(tmp_path) -> Path:
    path = tmp_path / "pins.db"
    build(path)
    return path


@pytest.fixture
def pinned(db) -> Path:
    """Event 1 (the task) and 20 pinned keep, 11 pinned reinject as 'plan': pin events 63..65."""
    run("pin", db, CID, 1)
    run("pin", db, CID, 11, "--mode", "reinject", "--label", "plan")
    run("pin", db, CID, 20)
    return db


def events_in(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COUNT(*) FROM event").fetchone()[0]


def library_pins(db: Path, at: int | None = None) -> list[tuple[int, str, str | None, int]]:
    with EventStore(db, create=False, readonly=True) as store:
        return [(p.seq, p.mode, p.label, p.at) for p in store.conversation(CID).pins(at=at)]


# --- help --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["pin", "unpin", "pins"])
def test_help_of_each_pin_command_has_an_example(name):
    top = run("--help").output
    assert f"  {name} " in top.split("Condensing:")[1].split("Try it:")[0]
    sub = run(name, "--help").output
    assert sub.startswith(f"Usage: openhands-memory {name} ")
    assert f"Example:\n    openhands-memory {name} agent.db fix-bug" in sub
    assert "--json" in sub
    narrow(sub)
    narrow(top)


# --- pin, unpin, pins --------------------------------------------------------------------------


def test_pins_of_a_conversation_without_any_says_so(db):
    out = run("pins", db, CID).output
    assert out == f"{CID} has no pins now (pin an event with `openhands-memory pin`)\n"
    assert json.loads(run("pins", db, CID, "--json").output) == {"conversation": CID, "upto": STATE, "pins": []}


def test_pin_prints_the_pin_event_and_stores_it(db):
    out = run("pin", db, CID, 1).output
    assert out == f"pinned event 1 (keep) as event {FIRST_PIN}\n"
    out = run("pin", db, CID[:4], 11, "-m", "reinject", "--label", "plan", "--group", "tasks").output
    assert out == f"pinned event 11 (reinject, 'plan', group tasks) as event {FIRST_PIN + 1}\n"
    report = json.loads(run("pin", db, CID, 20, "--json").output)
    assert report == {"conversation": CID, "event": 20, "mode": "keep", "label": None, "group": None,
                      "id": FIRST_PIN + 2}
    assert library_pins(db) == [(1, "keep", None, FIRST_PIN), (11, "reinject", "plan", FIRST_PIN + 1),
                                (20, "keep", None, FIRST_PIN + 2)]
    assert events_in(db) == STATE + 1 + 3


def test_pins_table_and_json_agree_with_the_library(pinned):
    result = invoke("pins", pinned, CID)
    assert result.exit_code == 0, result.output
    narrow(result.stdout)
    lines = result.stdout.splitlines()
    assert lines[0] == f"{CID} · 3 pins now"
    assert lines[1].split() == ["event", "mode", "label", "group", "rule", "pinned", "at", "shown"]
    rows = table_rows(result.stdout)
    assert rows == [["1", "keep", "63", "in view"], ["11", "reinject", "plan", "64", "in view"],
                    ["20", "keep", "65", "in view"]]
    report = json.loads(run("pins", pinned, CID, "--json").output)
    assert report["conversation"] == CID and report["upto"] == FIRST_PIN + 2
    assert [(p["id"], p["mode"], p["label"], p["pinned_at"]) for p in report["pins"]] == library_pins(pinned)
    assert [p["shown"] for p in report["pins"]] == ["in view"] * 3
    assert report["pins"][1] == {"id": 11, "mode": "reinject", "label": "plan", "group": None, "rule": None,
                                 "pinned_at": 64, "shown": "in view"}


def test_unpin_is_an_event_and_pins_at_sees_the_past(pinned):
    assert run("unpin", pinned, CID, 1).output == f"unpinned event 1 as event {FIRST_PIN + 3}\n"
    assert json.loads(run("unpin", pinned, CID, 20, "--json").output) == {
        "conversation": CID, "event": 20, "id": FIRST_PIN + 4}
    now = json.loads(run("pins", pinned, CID, "--json").output)["pins"]
    assert [p["id"] for p in now] == [11] == [p[0] for p in library_pins(pinned)]
    # Right after the second pin event, events 1 and 11 were pinned, 20 not yet.
    then = json.loads(run("pins", pinned, CID, "--at", FIRST_PIN + 1, "--json").output)
    assert then["upto"] == FIRST_PIN + 1 and [p["id"] for p in then["pins"]] == [1, 11]
    assert run("pins", pinned, CID, "--at", 10).output.startswith(f"{CID} has no pins after event 10")
    assert "has events 0..67" in run("pins", pinned, CID, "--at", 999, code=1).output


# --- refusals ----------------------------------------------------------------------------------


def test_pinning_an_unknown_event_is_refused(db):
    out = refused(db, "pin", db, CID, 999)
    assert out == f"Error: conversation '{CID}' has no event 999\n"
    assert events_in(db) == STATE + 1


def test_pinning_an_event_the_model_never_sees_is_refused(db):
    out = refused(db, "pin", db, CID, STATE)
    assert out.startswith(f"Error: event {STATE} is a ConversationStateUpdateEvent, which the model is never shown")


def test_pinning_a_pin_event_is_refused(pinned):
    out = refused(pinned, "pin", pinned, CID, FIRST_PIN)
    assert "is a PinEvent, which the model is never shown" in out


def test_keep_pinning_a_forgotten_event_is_refused_but_reinject_is_not(db):
    run("condense", db, CID, *CONDENSE)
    out = refused(db, "pin", db, CID, 4)
    assert out.startswith("Error: event 4 was already forgotten by a condensation: pin it with mode reinject")
    assert run("pin", db, CID, 4, "--mode", "reinject").output.startswith("pinned event 4 (reinject) as event ")
    assert json.loads(run("pins", db, CID, "--json").output)["pins"][0]["shown"] == "re-injected"


def test_unpinning_an_event_that_is_not_pinned_is_refused(pinned):
    out = refused(pinned, "unpin", pinned, CID, 5)
    assert out == "Error: event 5 is not pinned on the current branch\n"
    assert refused(pinned, "unpin", pinned, CID, 999) == f"Error: conversation '{CID}' has no event 999\n"


def test_a_pin_over_the_budget_is_refused_naming_the_pins(pinned):
    out = refused(pinned, "pin", pinned, CID, 0, "--budget", 10)
    assert "over the pin budget of 10" in out and "#0 (" in out
    assert refused(pinned, "pin", pinned, CID, 0, "--budget", -1)
    assert refused(pinned, "pin", pinned, CID, 0, "--mode", "sometimes")
    assert [p[0] for p in library_pins(pinned)] == [1, 11, 20]


# --- condense --dry-run ------------------------------------------------------------------------


def test_condense_dry_run_names_the_pins_it_carries_and_reinjects_and_writes_nothing(pinned):
    before, count = digest(pinned), events_in(pinned)
    result = invoke("condense", pinned, CID, *CONDENSE, "--dry-run")
    assert result.exit_code == 0, result.output
    out = result.stdout
    narrow(out)
    assert "  pins kept   #1, #20: carried out of the cut\n" in out  # the cut began at the task
    assert "  re-injects  #11 (plan): pinned, shown again after the summary\n" in out
    assert out.endswith("dry run: nothing was written\n")
    report = json.loads(run("condense", pinned, CID, *CONDENSE, "--dry-run", "--json").output)
    assert [p["id"] for p in report["pins_carried"]] == [1, 20]
    assert report["pins_reinjected"] == [{"id": 11, "mode": "reinject", "label": "plan", "group": None}]
    assert 20 not in report["forgotten_ids"] and 11 in report["forgotten_ids"]
    assert 2 in report["forgotten_ids"] and 19 in report["forgotten_ids"]  # the cut spans 20
    assert report["stored_as"] is None
    assert digest(pinned) == before and events_in(pinned) == count
    # For real, the same pins, and the condensation stored.
    stored = json.loads(run("condense", pinned, CID, *CONDENSE, "--json").output)
    assert stored["pins_carried"] == report["pins_carried"] and stored["forgotten_ids"] == report["forgotten_ids"]
    assert events_in(pinned) == count + 1


def test_condense_without_pins_says_nothing_of_them(db):
    out = run("condense", db, CID, *CONDENSE, "--dry-run").output
    assert "pins kept" not in out and "re-injects" not in out
    report = json.loads(run("condense", db, CID, *CONDENSE, "--dry-run", "--json").output)
    assert report["pins_carried"] == [] and report["pins_reinjected"] == []


# --- view --------------------------------------------------------------------------------------


def test_view_marks_pinned_and_reinjected_events(pinned):
    run("condense", pinned, CID, *CONDENSE)
    result = invoke("view", pinned, CID)
    assert result.exit_code == 0, result.output
    narrow(result.stdout)
    lines = result.stdout.splitlines()
    assert "+ 1 summary + 1 re-injected pin ·" in " ".join(lines[:2])
    header = next(line for line in lines if line.startswith("id "))
    assert header.split() == ["id", "kind", "source", "pin", "preview"]
    rows = {r[0]: r for r in table_rows(result.stdout)}
    assert rows["P"][:4] == ["P", "pinned", "user", "reinject"]
    assert rows["P"][4].startswith("#11 result of terminal (call c4): out 4")
    assert rows["1"][:4] == ["1", "message", "user", "keep"]
    assert rows["20"][3] == "keep"
    assert "keep" not in rows["21"] and "reinject" not in rows["21"]
    order = [r[0] for r in table_rows(result.stdout)]
    assert order[:4] == ["0", "S", "P", "1"]  # the re-injected pin right after the summary
    assert "pinned event #11 forgotten by a condensation, shown again after the summary" in result.stderr

    report = json.loads(run("view", pinned, CID, "--json").output)
    again = [e for e in report["events"] if e["event"]["kind"] == "PinnedContextEvent"]
    assert len(again) == 1 == report["reinjected"]
    assert again[0]["id"] is None and again[0]["pinned_seq"] == 11 and again[0]["pinned"] == "reinject"
    assert again[0]["event"]["pinned_seq"] == 11 and "out 4" in again[0]["event"]["text"]
    marked = {e["id"]: e["pinned"] for e in report["events"] if e["id"] is not None and "pinned" in e}
    assert marked == {1: "keep", 20: "keep"}
    assert [(p["id"], p["mode"], p["label"]) for p in report["pins"]] == [
        (1, "keep", None), (11, "reinject", "plan"), (20, "keep", None)]
    # The pins command says the same of how each is shown.
    shown = {p["id"]: p["shown"] for p in json.loads(run("pins", pinned, CID, "--json").output)["pins"]}
    assert shown == {1: "in view", 11: "re-injected", 20: "in view"}


def test_a_view_before_the_pins_has_no_pin_column(pinned):
    header = run("view", pinned, CID, "--at", 10).output.splitlines()[1]
    assert header.split() == ["id", "kind", "source", "preview"]
    report = json.loads(run("view", pinned, CID, "--at", 10, "--json").output)
    assert report["pins"] == [] and report["reinjected"] == 0
    assert not any("pinned" in e for e in report["events"])


# --- history -----------------------------------------------------------------------------------


def test_history_reads_pin_events(pinned):
    run("unpin", pinned, CID, 1)
    result = invoke("history", pinned, CID, "--from", FIRST_PIN)
    assert result.exit_code == 0, result.output
    rows = table_rows(result.stdout)
    assert rows == [["63", "pin", "user", "pin #1 keep"], ["64", "pin", "user", "pin #11 reinject 'plan'"],
                    ["65", "pin", "user", "pin #20 keep"], ["66", "pin", "user", "unpin #1"]]
    listed = json.loads(run("history", pinned, CID, "--from", FIRST_PIN, "--json").output)
    assert [(r["kind"], r["pinned_id"], r["preview"]) for r in listed] == [
        ("PinEvent", 1, "pin #1 keep"), ("PinEvent", 11, "pin #11 reinject 'plan'"),
        ("PinEvent", 20, "pin #20 keep"), ("PinEvent", 1, "unpin #1")]
