"""`doctor --fix` beside a live agent.

The fault: a writer process appends an action, runs its tool for 5 ms and appends the
observation, again and again. `doctor --fix` used to check in a read snapshot and write an
"interrupted" result later without looking again, so the real result landed a few ms after
ours: two results for one call, which no repair can take back. Now the repair checks again
under the conversation's write lock, and leaves alone a call whose agent may still be running
it (the newest batch, younger than --min-age).
"""

from __future__ import annotations

import re
import subprocess
import sys

from openhands_memory.inspection import doctor
from openhands_memory import EventStore
from tests import factories as f

from .conftest import REPO, run_cli

#: An agent: each step an action, its tool running 5 ms, its observation. Every tenth step
#: first leaves a call its crashed predecessor never answered (the next step moves on past
#: it): the calls a repair racing this writer must answer, and only those.
WRITER = """
import sys, time
from openhands_memory import EventStore
from tests import factories as f

store = EventStore(sys.argv[1])
conv = store.conversation("c")
print("started", flush=True)
end = time.monotonic() + float(sys.argv[2])
k = 0
while time.monotonic() < end:
    if k % 10 == 9:
        conv.append(f.action(f"lost-{k}", f"lost-{k}"))
    conv.append(f.action(f"r{k}", f"c{k}"))
    time.sleep(0.005)
    conv.append(f.observation(f"c{k}"))
    k += 1
store.close()
print(k, flush=True)
"""


def _start_writer(url: str, seconds: float) -> subprocess.Popen:
    with EventStore(url) as store:
        store.create_conversation("c").append_many([f.system(), f.user("go")])
    writer = subprocess.Popen([sys.executable, "-c", WRITER, url, str(seconds)], cwd=REPO, text=True,
                              stdout=subprocess.PIPE, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert writer.stdout is not None and writer.stdout.readline().strip() == "started"
    return writer


def _finish(writer: subprocess.Popen) -> int:
    out, _ = writer.communicate(timeout=60)
    assert writer.returncode == 0
    return int(out.split()[-1])


def _assert_every_call_answered_once(url: str, steps: int) -> None:
    """No call has two results, no real result has an 'interrupted' beside it, and every call
    the writer abandoned got exactly one (the last --fix ran once the writer had stopped)."""
    with EventStore(url) as store:
        events = list(store.conversation("c").events())
    results: dict[str, list[str]] = {}
    for e in events:
        if e.kind in ("ObservationEvent", "AgentErrorEvent"):
            results.setdefault(e.tool_call_id, []).append(e.kind)
    assert {call: kinds for call, kinds in results.items() if len(kinds) != 1} == {}
    assert {call for call, (kind,) in results.items() if kind == "AgentErrorEvent"} == {
        f"lost-{k}" for k in range(steps) if k % 10 == 9}
    assert {f"c{k}" for k in range(steps)} <= set(results)


def test_library_repairs_beside_a_live_agent(database_url):
    writer = _start_writer(database_url, 3)
    left_alone = repaired = 0
    with EventStore(database_url) as store:
        while writer.poll() is None:
            report = doctor.check(store)
            left_alone += any("left alone" in p.detail for p in report.problems)
            if report.plans:
                repaired += bool(doctor.repair(store, report).fixed)
    steps = _finish(writer)
    run_cli("doctor", database_url, "--fix").ok()  # the calls lost since the last repair
    assert "is healthy" in run_cli("doctor", database_url, "--full").ok().stdout
    _assert_every_call_answered_once(database_url, steps)
    # The race was run: checks caught calls in flight, and repairs wrote beside the writer.
    assert left_alone and repaired and steps >= 30


def test_cli_repairs_beside_a_live_agent(database_url):
    writer = _start_writer(database_url, 4)
    runs = []
    while writer.poll() is None:
        runs.append(run_cli("doctor", database_url, "--fix"))
    steps = _finish(writer)
    for done in runs:
        assert done.code in (0, 1) and "Traceback" not in done.stderr, done
        problems = [line for line in done.stdout.splitlines() if line.startswith("problem:")]
        # All that may remain: a call in flight, left alone saying why, or one the writer
        # abandoned after the repair (the next --fix answers it). Never a second result.
        for line in problems:
            assert "dangling tool call" in line, done.stdout
            assert "may still be running" in line or "(terminal, lost-" in line, done.stdout
    assert any(line.startswith("fixed:") for done in runs for line in done.stdout.splitlines())
    run_cli("doctor", database_url, "--fix").ok()
    assert "is healthy" in run_cli("doctor", database_url, "--full").ok().stdout
    _assert_every_call_answered_once(database_url, steps)


def test_a_result_that_lands_after_the_check_is_not_answered_again(database_url):
    """The stale check itself, step by step: the check sees a dangling call, its result lands,
    then the repair runs. It used to append 'interrupted' anyway (two results)."""
    with EventStore(database_url) as store:
        conv = store.create_conversation("c")
        conv.append_many([f.system(), f.user(), f.action("r1", "c1")])
        report = doctor.check(store, min_age=0)
        assert [d[1] for d in report.plans["c"].dangling] == ["c1"]
        conv.append(f.observation("c1"))
        done = doctor.repair(store, report)
        assert done.fixed == []
        assert done.left == ["c: action 2 (c1): its result landed after the check, as event 3; nothing to repair"]
        assert [e.kind for e in conv.events()][-1] == "ObservationEvent"
        assert doctor.check(store, full=True).healthy


def test_only_calls_the_agent_moved_past_or_old_enough_are_answered(database_url):
    """A call of the newest batch, just appended, may be running: left, saying why; a call an
    action of a later response follows is answered whatever its age; --min-age 0 answers all."""
    with EventStore(database_url) as store:
        conv = store.create_conversation("c")
        conv.append_many([f.system(), f.user(), f.action("r1", "lost"), f.action("r2", "c2"), f.action("r2", "c3"),
                          f.observation("c2")])
    done = run_cli("doctor", database_url, "--fix")
    assert done.code == 1
    assert "fixed: c: appended an 'interrupted' result for 1 dangling call(s) as event 6" in done.stdout
    assert re.search(r"problem: c: dangling tool call: action 4 \(terminal, c3\) has no result; left alone: it is "
                     r"\d+ s old and no later action follows it, so its tool may still be running \(--fix answers it "
                     r"once it is 600 s old; --min-age 0 if no agent is running\)", done.stdout), done.stdout
    assert "1 problem (1 conversation, 7 events checked)" in done.stdout
    assert "is healthy" in run_cli("doctor", database_url, "--fix", "--min-age", "0").ok().stdout
    with EventStore(database_url) as store:
        answered = [(getattr(e, "tool_call_id", None), e.kind) for e in store.conversation("c").events()][5:]
    assert answered == [("c2", "ObservationEvent"), ("lost", "AgentErrorEvent"), ("c3", "AgentErrorEvent")]
