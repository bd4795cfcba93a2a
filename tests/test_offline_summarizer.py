"""The offline summarizer: facts in, a stable plain-text digest out, rolling over old digests."""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field

import pytest

from openhands_memory.events import (
    ActionEvent,
    CondensationSummaryEvent,
    Event,
    MessageToolCall,
    ObservationEvent,
    TextContent,
)
from openhands_memory.summarizers import HEADER, CommandRun, OfflineSummarizer, facts, shell_files
from openhands_memory.summarizers.offline import clip, first_meaningful_line

from .factories import action, agent_says, error, rejection, system, user

# --- a small seeded generator of agent histories -------------------------------------------


def obs(call: str, text: str, *, tool: str = "terminal", exit_code: int | None = None,
        meta_exit: int | None = None, is_error: bool = False, kind: str = "TerminalObservation",
        **extra) -> ObservationEvent:
    payload = {"kind": kind, "content": [{"type": "text", "text": text}], "is_error": is_error, **extra}
    if exit_code is not None or meta_exit is None:
        payload["exit_code"] = exit_code
    if meta_exit is not None:
        payload["metadata"] = {"exit_code": meta_exit, "pid": 7}
    return ObservationEvent(tool_name=tool, tool_call_id=call, observation=payload, action_id="a")


@dataclass
class Expected:
    requests: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    read: list[str] = field(default_factory=list)
    commands: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    pages: list[str] = field(default_factory=list)
    last_message: str = ""


VERBS = ["fix", "refactor", "document", "speed up", "test"]
NOUNS = ["parser", "cache", "scheduler", "exporter", "cli"]


def generate(seed: int, n_requests: int = 3, steps: int = 8) -> tuple[list[Event], Expected, list[int]]:
    """A plausible history. Also returns the index where each user request starts."""
    rng = random.Random(seed)
    ev: list[Event] = [system()]
    exp = Expected()
    starts: list[int] = []
    n = 0

    def call() -> str:
        nonlocal n
        n += 1
        return f"call-{seed}-{n}"

    for r in range(n_requests):
        noun = rng.choice(NOUNS)
        text = f"Please {rng.choice(VERBS)} the {noun} module (request {r}).\nKeep the public API as it is."
        starts.append(len(ev))
        ev.append(user(text))
        exp.requests.append(text)
        for i in range(steps):
            kind = rng.choice(["ok", "fail", "view", "create", "replace", "ok", "meta"])
            c = call()
            if kind in ("ok", "fail", "meta"):
                cmd = f"pytest tests/test_{noun}_{r}_{i}.py -q" if kind != "ok" else f"ls -la src/{noun}_{r}_{i}"
                ev.append(action(f"resp-{c}", c, args={"command": cmd}, thought=f"run step {r}.{i}"))
                if kind == "ok":
                    ev.append(obs(c, f"total 8\nfile_{i}.py", exit_code=0))
                    exp.commands.append((cmd, "0"))
                else:
                    code = rng.choice([1, 2, 4])
                    first = f"FAILED tests/test_{noun}_{r}_{i}.py::test_it - AssertionError: {r}.{i}"
                    output = f"{first}\n1 failed in 0.{i}s"
                    if kind == "meta":  # the exit code only in metadata, as some tools write it
                        ev.append(obs(c, output, meta_exit=code, is_error=True))
                    else:
                        ev.append(obs(c, output, exit_code=code))
                    exp.commands.append((cmd, str(code)))
                    exp.errors.append(first)
                    exp.read.append(f"tests/test_{noun}_{r}_{i}.py")  # pytest on a path reads it
            else:
                path = f"src/{noun}/part_{r}_{i}.py"
                command = {"view": "view", "create": "create", "replace": "str_replace"}[kind]
                args = {"command": command, "path": path}
                if command == "create":
                    args["file_text"] = "x = 1\n"
                if command == "str_replace":
                    args |= {"old_str": "x = 1", "new_str": "x = 2"}
                ev.append(action(f"resp-{c}", c, tool="file_editor", args=args))
                ev.append(obs(c, f"Here is {path}", tool="file_editor", kind="FileEditorObservation"))
                (exp.read if command == "view" else exp.changed).append(path)
        if r == 0:  # a browser visit
            c = call()
            url = f"https://docs.example.org/{seed}/guide"
            ev.append(action(f"resp-{c}", c, tool="browser_navigate", args={"url": url}))
            ev.append(obs(c, "# Guide", tool="browser_navigate", kind="BrowserObservation"))
            exp.pages.append(url)
        if r == 1:  # a tool call that never ran: unparsable arguments and an AgentErrorEvent
            c = call()
            ev.append(ActionEvent(
                thought=[], action=None, tool_name="file_editor", tool_call_id=c,
                tool_call=MessageToolCall(id=c, name="file_editor", arguments='{"command": "view", "path": '),
                llm_response_id=f"resp-{c}",
            ))
            first = f"Error validating tool call {c}: arguments are not valid JSON"
            ev.append(error(c, f"\n{first}\nExpecting value: line 1 column 30", tool="file_editor"))
            exp.errors.append(first)
        exp.last_message = f"Finished request {r}: the {noun} module is done."
        ev.append(agent_says(exp.last_message))
    return ev, exp, starts


def assert_states(summary: str, exp: Expected, *, commands: bool = True) -> None:
    lines = summary.splitlines()
    for req in exp.requests:
        first, second = req.splitlines()
        assert f"- {first}" in lines and f"  {second}" in lines, req
    for path in exp.changed:
        assert f"- {path}" in section(summary, "## Files changed"), path
    for path in exp.read:
        assert f"- {path}" in section(summary, "## Files read"), path
    if commands:
        cmds = section(summary, "## Commands run")
        for cmd, code in exp.commands:
            assert any(ln.startswith(f"- [exit {code}") and ln.endswith(f"] {cmd}") for ln in cmds), (cmd, code)
    errs = "\n".join(section(summary, "## Errors"))
    for first in exp.errors:
        assert first in errs, first
    for url in exp.pages:
        assert f"- {url}" in section(summary, "## Web pages")


def section(summary: str, prefix: str) -> list[str]:
    """The lines of the section whose heading starts with ``prefix``."""
    out: list[str] = []
    inside = False
    for ln in summary.splitlines():
        if ln.startswith("## "):
            inside = ln.startswith(prefix)
            continue
        if inside and ln:
            out.append(ln)
    return out


def state(summary: str) -> str:
    return "\n".join(section(summary, "## Where things stand"))


# --- the facts it promises -----------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generated_history_states_every_fact(seed):
    events, exp, _ = generate(seed)
    summary = OfflineSummarizer().summarize(events)
    assert summary.startswith(HEADER + "\n")
    assert len(exp.commands) <= 20  # so none is capped away here
    assert_states(summary, exp)
    st = state(summary)
    assert f"Last agent message: {exp.last_message}" in st
    assert "Finished: no" in st
    assert len(summary) <= 6000


def test_facts_extraction_directly():
    events, exp, _ = generate(7)
    f = facts(events)
    assert list(f.requests) == exp.requests
    assert list(f.files_changed) == list(dict.fromkeys(exp.changed))
    assert list(f.files_read) == list(dict.fromkeys(exp.read))
    assert [(c.command, c.exit_code) for c in f.commands] == exp.commands
    assert all(any(first in e for e in f.errors) for first in exp.errors)
    assert list(f.pages) == exp.pages
    assert f.last_agent_message == exp.last_message
    assert f.last_thought and f.last_thought.startswith("run step 2.")


def test_commands_are_deduplicated_with_counts_newest_last_and_paired_by_call_id():
    events = [
        action("r1", "c1", args={"command": "make build"}), obs("c1", "ok", exit_code=0),
        action("r2", "c2", args={"command": "make   test"}), obs("c2", "boom\n", exit_code=2),
        action("r3", "c3", args={"command": "make build"}), obs("c3", "ok", exit_code=0),
        action("r4", "c4", args={"command": "git status"}),  # no result seen: exit unknown
        # results arrive out of order; pairing is by tool_call_id, not position
        action("r5", "c5", args={"command": "echo late"}), action("r5", "c6", args={"command": "echo early"}),
        obs("c6", "early", exit_code=0), obs("c5", "late", meta_exit=0),
        action("r7", "c7", args={"command": "rm -rf /"}), rejection("c7"),
    ]
    f = facts(events)
    assert f.commands == (
        CommandRun("make test", "2"),
        CommandRun("make build", "0", 2),
        CommandRun("git status", "?"),
        CommandRun("echo late", "0"),
        CommandRun("echo early", "0"),
        CommandRun("rm -rf /", "rejected"),
    )
    summary = OfflineSummarizer().summarize(events)
    assert "- [exit 0, x2] make build" in summary
    assert "- [exit ?] git status" in summary
    assert "`make test` exited 2: boom" in summary
    assert "`rm -rf /` was rejected by the user: no" in summary
    assert "Last command: `rm -rf /` (exit rejected)" in summary
    assert "rm -rf" not in "\n".join(section(summary, "## Files changed"))  # a refused call touched nothing


def test_command_cap_keeps_the_newest_and_counts_the_rest():
    events: list[Event] = []
    for i in range(30):
        events += [action(f"r{i}", f"c{i}", args={"command": f"echo {i}"}), obs(f"c{i}", str(i), exit_code=0)]
    summary = OfflineSummarizer().summarize(events)
    cmds = section(summary, "## Commands run")
    assert cmds[0] == "(10 earlier commands omitted)"
    assert cmds[1] == "- [exit 0] echo 10" and cmds[-1] == "- [exit 0] echo 29"


def test_current_state_last_output_thought_tasks_finish_and_pages():
    long_output = "\n".join(f"line {i}" for i in range(50))
    events = [
        user("build it"),
        action("r1", "c1", args={"command": "python build.py > build.log"}, thought="Build first."),
        obs("c1", long_output, exit_code=0),
        action("r2", "c2", tool="think", args={"thought": "The build log looks clean."}),
        obs("c2", "Your thought has been logged.", tool="think", kind="ThinkObservation"),
        action("r3", "c3", tool="task_tracker", args={"command": "plan", "task_list": [
            {"title": "build", "status": "done"}, {"title": "ship", "status": "in_progress"}]}),
        obs("c3", "ok", tool="task_tracker", kind="TaskTrackerObservation"),
        action("r4", "c4", tool="browser_navigate", args={"url": "https://example.org/a"}),
        obs("c4", "page", tool="browser_navigate", kind="BrowserObservation", url="https://example.org/b"),
        action("r5", "c5", tool="finish", args={"message": "Shipped."}),
        obs("c5", "done", tool="finish", kind="FinishObservation"),
    ]
    summary = OfflineSummarizer().summarize(events)
    st = state(summary)
    assert "Last agent message: Shipped." in st
    assert "Last thought: The build log looks clean." in st
    assert "Last command: `python build.py > build.log` (exit 0)" in st
    assert "  line 49" in st and "  line 45" in st and "line 44" not in st
    assert "  [done] build" in st and "  [in_progress] ship" in st
    assert "Finished: yes" in st
    assert section(summary, "## Web pages") == ["- https://example.org/a", "- https://example.org/b"]
    assert "- build.py" in section(summary, "## Files read")
    assert "- build.log" in section(summary, "## Files changed")
    # a new user request after finish reopens the work
    assert "Finished: no" in state(OfflineSummarizer().summarize(events + [user("one more thing")]))


def test_failed_editor_calls_do_not_count_as_file_changes_and_errors_take_a_meaningful_line():
    trace = 'Traceback (most recent call last):\n  File "a.py", line 1\n    raise ParseError(x)\nlib.ParseError: bad token'
    events = [
        action("r1", "c1", tool="file_editor", args={"command": "str_replace", "path": "a.py"}),
        obs("c1", "No replacement was performed: old_str not found", tool="file_editor", is_error=True),
        action("r2", "c2", args={"command": "python a.py"}), obs("c2", trace, exit_code=1),
        action("r3", "c3", tool="x"), error("c3", "Tool 'x' not found"),
    ]
    f = facts(events)
    assert f.files_changed == ()
    assert f.files_read == ("a.py",)  # it ran, even though it crashed
    assert f.errors == (
        "file_editor str_replace a.py failed: No replacement was performed: old_str not found",
        "`python a.py` exited 1: lib.ParseError: bad token",
        "x: Tool 'x' not found",
    )
    assert first_meaningful_line("\n=====\n\n  first real line \nsecond") == "first real line"


def test_long_requests_are_clipped_keeping_head_and_tail_with_a_note():
    text = "START " + "word " * 1000 + " END"
    summary = OfflineSummarizer().summarize([user(text)])
    req = section(summary, "## What the user asked")[0]
    assert req.startswith("- START ") and req.endswith(" END") and "chars clipped ...]" in req
    assert len(req) <= 1002
    assert clip(clip(text, 300), 300) == clip(text, 300)


def test_shell_file_heuristics():
    assert shell_files("cat README.md && sed -i 's/a/b/' src/x.py") == (["README.md"], ["src/x.py"])
    assert shell_files("python3 -m pytest tests/test_a.py::test_b -q 2>&1 | tee out.txt") == (
        ["tests/test_a.py"], ["out.txt"])
    assert shell_files("cat > notes.txt <<'EOF'\ncat secret.txt\nEOF") == ([], ["notes.txt"])
    assert shell_files("echo hi > /dev/null; grep foo *.py; ls $HOME") == ([], [])
    assert shell_files("echo 'unbalanced") == ([], [])
    assert shell_files("sed -e s/a/b/ -i x.py; head -n 20 src/a.py") == (["src/a.py"], ["x.py"])
    assert shell_files("pytest -k parse tests/unit") == (["tests/unit"], [])


# --- rolling ---------------------------------------------------------------------------


def test_rolling_keeps_the_first_half():
    events, exp, starts = generate(11)
    cut = starts[1]
    first_half, second_half = events[:cut], events[cut:]
    s1 = OfflineSummarizer().summarize(first_half)
    s2 = OfflineSummarizer().summarize(second_half, previous_summary=s1)
    assert_states(s2, exp)  # both halves, merged into one digest
    assert s2.count(HEADER) == 1 and "## Earlier summary" not in s2
    assert f"Last agent message: {exp.last_message}" in state(s2)
    # merged counts: the same command in both halves is counted once per run
    repeated = [action("ra", "ca", args={"command": "make"}), obs("ca", "", exit_code=0)]
    r1 = OfflineSummarizer().summarize(repeated)
    r2 = OfflineSummarizer().summarize([action("rb", "cb", args={"command": "make"}), obs("cb", "", exit_code=0)], r1)
    assert "- [exit 0, x2] make" in r2


def test_rolling_error_cap_accumulates_and_counts_omitted():
    def failing(tag: str, k: int) -> list[Event]:
        return [e for i in range(k) for e in (
            action(f"r{tag}{i}", f"c{tag}{i}", args={"command": f"false {tag}{i}"}),
            obs(f"c{tag}{i}", f"oops {tag}{i}", exit_code=1))]

    s1 = OfflineSummarizer().summarize(failing("a", 8))
    s2 = OfflineSummarizer().summarize(failing("b", 8), s1)
    errs = section(s2, "## Errors")
    assert errs[0] == "(6 earlier errors omitted)"
    assert errs[1].endswith("oops a6") and errs[-1].endswith("oops b7")


def test_rerunning_on_its_own_output_is_stable():
    events, _, _ = generate(5)
    events += [user("Two paragraphs:\n\n  indented code\n\nand ## not a heading\n- not an item"),
               agent_says("Line one.\n\nLine: two")]
    s = OfflineSummarizer().summarize(events, "foreign\n\n## with a heading-like line")
    assert OfflineSummarizer().summarize([], s) == s
    assert "- Two paragraphs:\n    indented code\n  and ## not a heading\n  - not an item" in s


def test_foreign_previous_summary_is_kept_verbatim_and_carried_along():
    foreign = "USER_CONTEXT: wants a CLI for exports\nCOMPLETED: parser rewrite\n\nPENDING: ## tests for the cli"
    s1 = OfflineSummarizer().summarize([user("now add tests")], foreign)
    kept = section(s1, "## Earlier summary")
    assert [ln.strip() for ln in kept] == [ln for ln in foreign.splitlines() if ln]
    assert "- now add tests" in s1
    s2 = OfflineSummarizer().summarize([agent_says("tests added")], s1)
    assert section(s2, "## Earlier summary") == kept
    assert "- now add tests" in s2 and "Last agent message: tests added" in s2
    huge = "H" * 3000 + "MIDDLE" + "T" * 3000
    s3 = OfflineSummarizer().summarize([], huge)
    body = "".join(section(s3, "## Earlier summary"))
    assert body.startswith("  HHH") and body.endswith("TTT") and "MIDDLE" not in body and len(body) <= 4002


def test_summary_event_among_forgotten_events_counts_as_previous():
    s1 = OfflineSummarizer().summarize([user("first ask")])
    s2 = OfflineSummarizer().summarize([CondensationSummaryEvent(summary=s1), user("second ask")])
    assert s2.count(HEADER) == 1 and "- first ask" in s2 and "- second ask" in s2


def test_empty_events():
    assert "Nothing to report" in OfflineSummarizer().summarize([])
    own = OfflineSummarizer().summarize([user("do the thing")])
    assert OfflineSummarizer().summarize([], own) == own
    assert "PENDING: all" in OfflineSummarizer().summarize([], "PENDING: all")


# --- size and robustness -------------------------------------------------------------------


@pytest.mark.parametrize("max_chars", [6000, 1500])
def test_huge_history_respects_max_chars_and_keeps_the_current_state(max_chars):
    t0 = time.perf_counter()
    events, exp, _ = generate(99, n_requests=25, steps=40)
    events.insert(3, user("x" * 50_000))  # one enormous paste
    summarizer = OfflineSummarizer(max_chars=max_chars)
    summary = summarizer.summarize(events, previous_summary="Foreign notes. " * 1000)
    assert len(summary) <= max_chars
    assert summary.startswith(HEADER)
    st = state(summary)
    assert f"Last agent message: {exp.last_message}" in st
    assert "Last command:" in st and "Finished: no" in st
    # the newest items survive; the oldest go first
    assert exp.requests[-1].splitlines()[0] in summary
    assert "earlier commands omitted)" in summary
    if max_chars < 2000:
        assert "earlier requests omitted)" in summary
    # and rolling over its own trimmed output stays within bounds
    again = summarizer.summarize(events[-10:], summary)
    assert len(again) <= max_chars and f"Last agent message: {exp.last_message}" in again
    assert time.perf_counter() - t0 < 3


def test_deterministic():
    a_events, _, _ = generate(21)
    b_events, _, _ = generate(21)  # fresh ids and timestamps, same content
    s = OfflineSummarizer()
    assert s.summarize(a_events) == s.summarize(a_events) == s.summarize(b_events)
    assert s.summarize(a_events, "prev") == s.summarize(b_events, "prev")


def test_malformed_tool_arguments_do_not_crash():
    def raw(call: str, tool: str, arguments: str, act: dict | None) -> ActionEvent:
        return ActionEvent(thought=[TextContent(text="hm")], action=act, tool_name=tool, tool_call_id=call,
                           tool_call=MessageToolCall(id=call, name=tool, arguments=arguments), llm_response_id="r")

    events = [
        raw("c1", "terminal", "not json {", {"kind": "TerminalAction", "command": "make lint"}),
        obs("c1", "ok", exit_code="0"),
        raw("c2", "terminal", "[1, 2]", {"kind": "MCPToolAction", "data": {"command": "cat setup.cfg"}}),
        obs("c2", "[metadata]", exit_code=True),  # nonsense exit code: unknown, not 1
        raw("c3", "file_editor", '{"command": 5, "path": ["a"]}', {"kind": "X"}), obs("c3", "?", tool="file_editor"),
        raw("c4", "browser_navigate", "", {"kind": "BrowserAction", "url": 42}),
        raw("c5", "task_tracker", json.dumps({"task_list": ["plain string", 3, {"status": None}]}), {}),
        raw("c6", "finish", "{}", {}),
        raw("c7", "", "null", {}),
    ]
    f = facts(events)
    assert f.commands == (CommandRun("make lint", "0"), CommandRun("cat setup.cfg", "?"))
    assert f.files_read == ("setup.cfg",)
    assert f.tasks == ("plain string", "3", "[todo] (untitled)")
    assert f.finished
    summary = OfflineSummarizer().summarize(events)
    assert "- [exit 0] make lint" in summary


def test_rejects_a_tiny_cap():
    with pytest.raises(ValueError, match=r"^OfflineSummarizer\.max_chars \(10\) must be at least 200$"):
        OfflineSummarizer(max_chars=10)


def test_tiny_cap_keeps_the_header_and_the_newest_state():
    events = [user("go"), agent_says("A very long final report. " * 40)]
    summary = OfflineSummarizer(max_chars=300).summarize(events)
    assert len(summary) <= 300
    assert summary.startswith(HEADER) and summary.endswith("Finished: no")
