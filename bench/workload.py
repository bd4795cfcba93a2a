"""A deterministic, realistic coding-agent event stream for benchmarks.

``coding_events(n, seed=0)`` yields exactly ``n`` events shaped like what an OpenHands SDK agent
writes while working on a repository:

* a ``SystemPromptEvent`` with a few tool definitions, then a user task;
* agent turns: a batch of 1-3 parallel tool calls (``ActionEvent``s sharing one
  ``llm_response_id``; only the first carries the thought and, sometimes, thinking blocks),
  answered in order by ``ObservationEvent``s - terminal output, file views and edits, browser
  pages with their URL - or, for a malformed call, an ``AgentErrorEvent`` right after it;
* now and then the agent reports back (an assistant ``MessageEvent``) and the user follows up.

Every action is answered and every batch is whole, whatever ``n`` is: the last turn is shrunk
to fit. Ids, timestamps and text come from ``random.Random(seed)`` only, so the same arguments
give the same events, byte for byte.

``condense_every=N`` adds a ``Condensation`` roughly every ``N`` events, the way a
summarizing condenser with ``keep_first=2`` would: it forgets (as ``forgotten_ranges`` of
sequence ids, assuming the events are appended to an empty conversation in order) everything
from id 2 up to the start of a rolling tail of about ``N // 2`` events, cutting only where the
view stays well-formed (between turns, never inside a tool loop), and carries a summary shown
at ``summary_offset=2``.
"""

from __future__ import annotations

import json
import random
import string
import sys
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Iterator

if __package__ in (None, ""):  # run as a script: make the library importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from openhands_memory.events import (  # noqa: E402
    ActionEvent,
    AgentErrorEvent,
    Condensation,
    Event,
    Message,
    MessageEvent,
    MessageToolCall,
    ObservationEvent,
    SystemPromptEvent,
    TextContent,
    ThinkingBlock,
)

START = datetime(2026, 11, 21, 8, 0, 0)

# --- vocabulary ------------------------------------------------------------------------------

MODULES = ["api", "auth", "billing", "cache", "cli", "config", "db", "events", "jobs", "models",
           "parser", "queue", "routes", "schema", "search", "storage", "tasks", "utils", "views", "worker"]
PACKAGES = ["app", "service", "core", "lib"]
NOUNS = ["user", "order", "invoice", "session", "token", "record", "item", "payload", "request",
         "response", "config", "result", "batch", "entry", "message", "account", "report", "job"]
VERBS = ["get", "load", "parse", "build", "validate", "render", "save", "fetch", "update", "compute",
         "normalize", "resolve", "dispatch", "serialize", "merge", "check"]
ERRORS = ["KeyError", "TypeError", "ValueError", "AttributeError", "AssertionError", "IndexError"]
SITES = ["docs.python.org/3/library", "docs.sqlalchemy.org/en/20/orm", "github.com/org/project/issues",
         "stackoverflow.com/questions", "pypi.org/project", "developer.mozilla.org/en-US/docs/Web"]
WORDS = ("the a this that function value module test error fix change call return list dict file path "
         "config option default handler request user data field type check case loop index key cache "
         "result expected actual failing passing import class method argument parameter update").split()

TASKS = [
    "The test suite fails on {mod}: `pytest tests/test_{mod}.py` shows a {err}. Find the cause and fix it.",
    "Add a `--{noun}` option to the {mod} command and document it in the README.",
    "Refactor {pkg}/{mod}.py so that {verb}_{noun} no longer reads the global config.",
    "Our CI is red since the last merge. Please investigate and make the build pass again.",
    "Implement pagination for the /{noun}s endpoint (page and per_page query parameters), with tests.",
    "Upgrade the project to the latest SQLAlchemy and fix whatever breaks.",
    "Write unit tests for {pkg}/{mod}.py; coverage of that module should be above 90%.",
]
FOLLOW_UPS = [
    "Thanks. Can you also add a test for the empty case?",
    "Looks good, but please keep the old function name as an alias for backwards compatibility.",
    "The linter complains about line length in {pkg}/{mod}.py, please fix.",
    "Please also update the changelog.",
    "That broke the {mod} integration test, can you take another look?",
    "Great. Now run the whole test suite and tell me the result.",
]
THOUGHTS = [
    "Let me look at the repository layout first.",
    "I'll run the failing test to see the traceback.",
    "The error comes from {verb}_{noun}; let me open {pkg}/{mod}.py.",
    "I need to check how {noun} objects are built before changing this.",
    "Now I'll make the edit and re-run the tests.",
    "Let me search for other callers of {verb}_{noun}.",
    "The documentation may describe the expected behaviour; let me check it.",
    "Tests pass locally; let me also run the linter.",
]


@dataclass
class _Tool:
    name: str
    description: str
    parameters: dict


TOOLS = [
    _Tool("terminal", "Execute a bash command in the terminal. Long-running commands should be run in the "
          "background. Use `is_input` to send text to a running process.",
          {"type": "object", "properties": {
              "command": {"type": "string", "description": "The bash command to execute."},
              "is_input": {"type": "boolean", "description": "Whether the command is input to a running process."},
              "timeout": {"type": "number", "description": "Optional timeout in seconds."}},
           "required": ["command"]}),
    _Tool("file_editor", "View, create and edit files. `view` shows a file with line numbers or lists a "
          "directory; `create` writes a new file; `str_replace` replaces one exact occurrence of old_str.",
          {"type": "object", "properties": {
              "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert", "undo_edit"]},
              "path": {"type": "string", "description": "Absolute path to a file or directory."},
              "file_text": {"type": "string"}, "old_str": {"type": "string"}, "new_str": {"type": "string"},
              "insert_line": {"type": "integer"}, "view_range": {"type": "array", "items": {"type": "integer"}}},
           "required": ["command", "path"]}),
    _Tool("browser_navigate", "Open a URL in the browser and return the page's text content.",
          {"type": "object", "properties": {"url": {"type": "string"}, "new_tab": {"type": "boolean"}},
           "required": ["url"]}),
    _Tool("task_tracker", "Keep a list of the tasks of the current job and their status.",
          {"type": "object", "properties": {"command": {"type": "string", "enum": ["view", "plan"]},
                                            "task_list": {"type": "array", "items": {"type": "object"}}},
           "required": ["command"]}),
]

SYSTEM_PROMPT = (
    "You are OpenHands agent, a helpful AI assistant that can interact with a computer to solve tasks.\n\n"
    "<ROLE>Your primary role is to assist users by executing commands, modifying code, and solving technical "
    "problems effectively. Be thorough and methodical, and prefer small verified steps.</ROLE>\n\n"
    "<EFFICIENCY>Combine multiple bash commands into one when possible; use grep and find to search; avoid "
    "reading whole large files when a range will do.</EFFICIENCY>\n\n"
    "<FILE_SYSTEM_GUIDELINES>Always use absolute paths. Edit files in place instead of creating copies with "
    "new names. Do not leave backup files behind.</FILE_SYSTEM_GUIDELINES>\n\n"
    "<CODE_QUALITY>Write clean, minimal code with few comments. Follow the repository's conventions. Place "
    "imports at the top of the file.</CODE_QUALITY>\n\n"
    "<VERSION_CONTROL>Do not push to the remote or change git configuration unless asked. Commit with clear "
    "messages when the user asks you to.</VERSION_CONTROL>\n\n"
    "<TROUBLESHOOTING>When you hit repeated failures, step back, list possible causes, and test them one "
    "at a time.</TROUBLESHOOTING>"
)


@dataclass
class _State:
    rng: random.Random
    clock: datetime = START
    files: list[str] = field(default_factory=list)
    _seq: int = 0

    def uid(self) -> str:
        # Time-ordered like the library's own ids (UUID version 7, from the simulated clock),
        # so a bench appends what an agent built on the library appends. The OpenHands SDK's
        # random version-4 ids are what bench/import.py measures.
        ms = int(self.clock.timestamp() * 1000) + self._seq
        self._seq += 1
        rand = self.rng.getrandbits(74)
        value = (ms << 80) | (0x7 << 76) | ((rand >> 62) << 64) | (0b10 << 62) | (rand & ((1 << 62) - 1))
        return str(uuid.UUID(int=value))

    def tick(self, low: float = 0.05, high: float = 2.0) -> str:
        self.clock += timedelta(seconds=self.rng.uniform(low, high))
        return self.clock.isoformat()

    def fill(self, template: str) -> str:
        r = self.rng
        return template.format(mod=r.choice(MODULES), pkg=r.choice(PACKAGES), noun=r.choice(NOUNS),
                               verb=r.choice(VERBS), err=r.choice(ERRORS))

    def sentence(self, lo: int = 6, hi: int = 18) -> str:
        return self.rng.choice(self._sentences[self.rng.randint(lo, hi)])

    def path(self) -> str:
        r = self.rng
        if self.files and r.random() < 0.6:
            return r.choice(self.files)
        top = r.choice(["", "", "tests/"])
        name = f"/workspace/project/{top}{r.choice(PACKAGES) + '/' if not top else 'test_'}{r.choice(MODULES)}.py"
        if name not in self.files:
            self.files.append(name)
        return name

    def call_id(self) -> str:
        return "toolu_01" + "".join(self.rng.choices(string.ascii_letters + string.digits, k=22))

    def response_id(self) -> str:
        return "chatcmpl-" + "".join(self.rng.choices("0123456789abcdef", k=24))

    def length(self, low: int, high: int, mode: int) -> int:
        return int(self.rng.triangular(low, high, mode))

    # --- text of plausible shape ----------------------------------------------------------

    def __post_init__(self) -> None:
        # Pools of lines drawn from below: a repository repeats itself, and drawing keeps a
        # 100k-event stream quick to generate.
        self._sentences = {k: [self._make_sentence(k) for _ in range(120)] for k in range(1, 31)}
        self._code = [self._make_code_line() for _ in range(5000)]

    def code_line(self) -> str:
        return self.rng.choice(self._code)

    def _make_sentence(self, k: int) -> str:
        words = self.rng.choices(WORDS, k=k)
        return " ".join(words).capitalize() + "."

    def _make_code_line(self) -> str:
        r = self.rng
        noun, verb, mod = r.choice(NOUNS), r.choice(VERBS), r.choice(MODULES)
        make = r.choice([
            lambda: f"def {verb}_{noun}(self, {noun}_id: int, *, strict: bool = False) -> {noun.title()}:",
            lambda: f"    {noun} = self.{mod}.{verb}({noun}_id)",
            lambda: f"    if {noun} is None:",
            lambda: f"        raise {r.choice(ERRORS)}(f\"no {noun} with id {{{noun}_id}}\")",
            lambda: f"    return {verb}_{noun}({noun}, strict=strict)",
            lambda: f"from {r.choice(PACKAGES)}.{mod} import {verb}_{noun}",
            lambda: f"import {mod}",
            lambda: f"class {noun.title()}{r.choice(['Service', 'Repository', 'Handler', 'Model'])}:",
            lambda: f"    \"\"\"{self.sentence(4, 10)}\"\"\"",
            lambda: f"        for {noun} in {noun}s:",
            lambda: f"            result[{noun}.id] = {noun}.{verb}()",
            lambda: f"    # {self.sentence(3, 9)}",
            lambda: "",
            lambda: f"    assert {verb}_{noun}({r.randint(0, 99)}) == {r.randint(0, 999)}",
            lambda: f"{noun.upper()}_{r.choice(['TIMEOUT', 'LIMIT', 'RETRIES'])} = {r.randint(1, 600)}",
        ])
        return make()

    def text_of(self, size: int, line) -> str:
        lines, total = [], 0
        while total < size:
            s = line()
            lines.append(s)
            total += len(s) + 1
        return "\n".join(lines)[:size]

    def terminal_output(self, command: str, size: int) -> tuple[str, int]:
        r = self.rng
        kind = r.random()
        if command.startswith("pytest") or kind < 0.35:
            failed = r.random() < 0.4
            def line() -> str:
                m = r.choice(MODULES)
                return r.choice([
                    f"tests/test_{m}.py::test_{r.choice(VERBS)}_{r.choice(NOUNS)} {'FAILED' if failed and r.random() < 0.2 else 'PASSED'} [{r.randint(1, 99):3d}%]",
                    f"E       {r.choice(ERRORS)}: {self.sentence(3, 8)}",
                    f"{r.choice(PACKAGES)}/{m}.py:{r.randint(10, 900)}: in {r.choice(VERBS)}_{r.choice(NOUNS)}",
                    f"    {self.code_line().strip()}",
                ])
            text = self.text_of(size - 60, line)
            tail = f"\n===== {r.randint(1, 9)} failed, {r.randint(10, 300)} passed in {r.uniform(0.5, 40):.2f}s ====="
            return text + tail, 1 if failed else 0
        if kind < 0.55:
            def line() -> str:
                return (f"{r.choice(PACKAGES)}/{r.choice(MODULES)}.py:{r.randint(1, 800)}:"
                        f"{self.code_line()}")
            return self.text_of(size, line), 0
        if kind < 0.75:
            def line() -> str:
                return (f"-rw-r--r-- 1 root root {r.randint(100, 90000):6d} Nov {r.randint(1, 30):2d} "
                        f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d} {r.choice(MODULES)}{r.choice(['.py', '.md', '.toml', '.json', ''])}")
            return self.text_of(size, line), 0
        def line() -> str:
            return r.choice([
                f"Collecting {r.choice(MODULES)}-{r.choice(NOUNS)}>={r.randint(0, 9)}.{r.randint(0, 30)}",
                f"  Downloading {r.choice(MODULES)}-{r.randint(0, 9)}.{r.randint(0, 30)}.{r.randint(0, 9)}-py3-none-any.whl ({r.randint(10, 900)} kB)",
                f"Requirement already satisfied: {r.choice(NOUNS)} in /usr/lib/python3/site-packages",
                f"warning: {self.sentence(4, 10)}",
                f" M {r.choice(PACKAGES)}/{r.choice(MODULES)}.py",
            ])
        return self.text_of(size, line), 0

    def file_view(self, path: str, size: int) -> str:
        start = self.rng.randint(1, 300)
        n = [start]
        def line() -> str:
            s = f"{n[0]:6d}\t{self.code_line()}"
            n[0] += 1
            return s
        return f"Here's the result of running `cat -n` on {path}:\n" + self.text_of(size, line)

    def page_text(self, size: int) -> str:
        def line() -> str:
            return self.rng.choice([self.sentence(8, 30), self.code_line(), "", f"## {self.sentence(2, 5)}"])
        return self.text_of(size, line)


def _text(t: str) -> TextContent:
    return TextContent(text=t)


# --- one tool call and its answer ------------------------------------------------------------


def _call(s: _State) -> tuple[str, dict, dict, dict, str]:
    """(tool, arguments, action payload, observation payload, observation text) for one call."""
    r = s.rng
    roll = r.random()
    if roll < 0.55:
        command = r.choice([
            f"cd /workspace/project && python -m pytest tests/test_{r.choice(MODULES)}.py -x -q",
            f"grep -rn \"{r.choice(VERBS)}_{r.choice(NOUNS)}\" /workspace/project --include=*.py",
            "cd /workspace/project && git status && git diff --stat",
            f"ls -la /workspace/project/{r.choice(PACKAGES)}",
            f"pip install -e '.[test]' 2>&1 | tail -20",
            f"python -c 'import {r.choice(MODULES)}; print({r.choice(MODULES)}.__file__)'",
            f"find /workspace/project -name '*{r.choice(MODULES)}*' -type f | head -50",
        ])
        args = {"command": command, "is_input": False}
        action = {**args, "timeout": None, "reset": False, "kind": "TerminalAction"}
        out, code = s.terminal_output(command.split("&&")[-1].strip(), s.length(200, 3000, 600))
        obs = {
            "content": [{"cache_prompt": False, "type": "text", "text": out}],
            "is_error": False, "command": command, "exit_code": code, "timeout": False,
            "metadata": {"exit_code": code, "pid": r.randint(100, 40000), "username": "root",
                         "hostname": "sandbox", "working_dir": "/workspace/project",
                         "py_interpreter_path": "/usr/bin/python", "prefix": "", "suffix": ""},
            "kind": "TerminalObservation",
        }
        return "terminal", args, action, obs, out
    if roll < 0.87:
        path = s.path()
        sub = r.random()
        if sub < 0.55:
            args = {"command": "view", "path": path}
            out = s.file_view(path, s.length(300, 4000, 1400))
        elif sub < 0.9:
            old = "\n".join(s.code_line() for _ in range(r.randint(1, 6)))
            new = "\n".join(s.code_line() for _ in range(r.randint(1, 8)))
            args = {"command": "str_replace", "path": path, "old_str": old, "new_str": new}
            snippet = s.file_view(path, s.length(200, 1200, 500))
            out = f"The file {path} has been edited. {snippet}\nReview the changes and make sure they are as expected."
        else:
            body = s.text_of(s.length(200, 2500, 800), s.code_line)
            args = {"command": "create", "path": path, "file_text": body}
            out = f"File created successfully at: {path}"
        action = {**args, "kind": "FileEditorAction"}
        obs = {"content": [{"cache_prompt": False, "type": "text", "text": out}], "is_error": False,
               "command": args["command"], "path": path, "prev_exist": args["command"] != "create",
               "kind": "FileEditorObservation"}
        return "file_editor", args, action, obs, out
    if roll < 0.97:
        url = f"https://{r.choice(SITES)}/{r.choice(MODULES)}-{r.choice(NOUNS)}"
        args = {"url": url, "new_tab": False}
        action = {**args, "kind": "BrowserNavigateAction"}
        out = s.page_text(s.length(500, 3500, 1500))
        obs = {"content": [{"cache_prompt": False, "type": "text", "text": out}], "is_error": False,
               "url": url, "title": s.sentence(2, 6), "kind": "BrowserObservation"}
        return "browser_navigate", args, action, obs, out
    args = {"command": "plan", "task_list": [
        {"title": s.sentence(3, 7), "status": r.choice(["todo", "in_progress", "done"])}
        for _ in range(r.randint(2, 5))]}
    action = {**args, "kind": "TaskTrackerAction"}
    out = "Task list has been updated with {} items.".format(len(args["task_list"]))
    obs = {"content": [{"cache_prompt": False, "type": "text", "text": out}], "is_error": False,
           "command": "plan", "task_list": args["task_list"], "kind": "TaskTrackerObservation"}
    return "task_tracker", args, action, obs, out


def _turn(s: _State, width: int) -> list[Event]:
    """One LLM response with ``width`` tool calls, and their answers."""
    r = s.rng
    response = s.response_id()
    think = r.random() < 0.3
    events: list[Event] = []
    answers: list[tuple[str, str, dict, str]] = []
    for k in range(width):
        tool, args, action, obs, _ = _call(s)
        call = s.call_id()
        arguments = json.dumps(args)
        broken = r.random() < 0.03  # the model produced a call that cannot run
        if broken:
            arguments = arguments[: max(1, len(arguments) // 2)]  # truncated JSON
        a = ActionEvent(
            id=s.uid(), timestamp=s.tick(0.5, 6.0) if k == 0 else s.tick(0.0, 0.01),
            thought=[_text(s.fill(r.choice(THOUGHTS)) + (" " + s.sentence() if r.random() < 0.4 else ""))]
            if k == 0 else [],
            thinking_blocks=[ThinkingBlock(
                thinking=" ".join(s.sentence(8, 25) for _ in range(r.randint(1, 4))),
                signature="".join(r.choices(string.ascii_letters + string.digits + "+/", k=r.randint(200, 420))) + "==",
            )] if k == 0 and think else [],
            action=None if broken else action,
            tool_name=tool,
            tool_call_id=call,
            tool_call=MessageToolCall(id=call, name=tool, arguments=arguments),
            llm_response_id=response,
        )
        events.append(a)
        if broken:  # the SDK answers a broken call at once, before the next action of the batch
            events.append(AgentErrorEvent(
                id=s.uid(), timestamp=s.tick(0.0, 0.01), tool_name=tool, tool_call_id=call,
                error=f"Error validating args {arguments} for tool '{tool}': invalid JSON",
            ))
        else:
            answers.append((tool, call, obs, a.id))
    # the valid calls run after the whole batch is in, and answer in execution order
    for tool, call, obs, action_id in answers:
        events.append(ObservationEvent(
            id=s.uid(), timestamp=s.tick(0.05, 8.0), tool_name=tool, tool_call_id=call,
            observation=obs, action_id=action_id,
        ))
    return events


def _user(s: _State, text: str) -> MessageEvent:
    return MessageEvent(id=s.uid(), timestamp=s.tick(5, 120), source="user",
                        llm_message=Message(role="user", content=[_text(text)]))


def _report(s: _State) -> MessageEvent:
    r = s.rng
    lines = [f"I have {r.choice(['fixed', 'implemented', 'updated', 'refactored'])} {r.choice(VERBS)}_{r.choice(NOUNS)} in {s.path()}."]
    lines += [f"- {s.sentence(5, 14)}" for _ in range(r.randint(1, 5))]
    lines.append(f"All {r.randint(20, 400)} tests pass.")
    return MessageEvent(id=s.uid(), timestamp=s.tick(1, 10), source="agent",
                        llm_message=Message(role="assistant", content=[_text("\n".join(lines))]),
                        llm_response_id=s.response_id())


def _system(s: _State) -> SystemPromptEvent:
    return SystemPromptEvent(
        id=s.uid(), timestamp=s.clock.isoformat(), system_prompt=_text(SYSTEM_PROMPT),
        tools=[{"name": t.name, "description": t.description, "parameters": t.parameters} for t in TOOLS],
    )


# --- the stream ------------------------------------------------------------------------------


def _units(s: _State) -> Iterator[list[Event]]:
    """Endless stream of whole units: user messages, agent turns, agent reports."""
    r = s.rng
    yield [_system(s)]
    yield [_user(s, s.fill(r.choice(TASKS)))]
    while True:
        for _ in range(r.randint(4, 30)):
            yield _turn(s, r.choices([1, 2, 3], weights=[70, 20, 10])[0])
        yield [_report(s)]
        text = s.fill(r.choice(FOLLOW_UPS)) if r.random() < 0.6 else s.fill(r.choice(TASKS))
        yield [_user(s, text)]


def _shrink(s: _State, unit: list[Event], room: int) -> list[Event]:
    """A well-formed unit of at most ``room`` events in place of ``unit``.

    A turn of width w is always 2w events (each call is answered by one observation or error).
    """
    if len(unit) <= room:
        return unit
    if room >= 2 and isinstance(unit[0], ActionEvent):
        return _turn(s, room // 2)
    return [_report(s)]


def coding_events(n: int, *, seed: int = 0, condense_every: int | None = None) -> Iterator[Event]:
    """Exactly ``n`` events of a coding agent's conversation (see the module's docstring)."""
    if n <= 0:
        return
    s = _State(random.Random(seed))
    tail = max(4, (condense_every or 0) // 2)
    produced = 0
    since = 0  # events since the last condensation
    in_loop = False  # inside a tool loop that began with thinking blocks (view semantics)
    cuts: list[int] = []  # ids where a kept tail may start without splitting a unit or loop
    last_cut = 2
    for unit in _units(s):
        room = n - produced
        if room <= 0:
            return
        if (condense_every and since >= condense_every and room >= 2):
            cut = max((c for c in cuts if c <= produced - tail), default=None)
            if cut is not None and cut > last_cut:
                yield Condensation(
                    id=s.uid(), timestamp=s.tick(2, 20), forgotten_ranges=[(2, cut - 1)],
                    summary=_summary(s, cut), summary_offset=2, llm_response_id=s.response_id(),
                )
                produced += 1
                since = 0
                last_cut = cut
                room -= 1
        unit = _shrink(s, unit, room)
        first = unit[0]
        starts_loop = isinstance(first, ActionEvent) and bool(first.thinking_blocks)
        if produced >= 2 and (starts_loop or not in_loop):
            cuts.append(produced)
        if isinstance(first, ActionEvent):
            in_loop = in_loop or starts_loop
        else:
            in_loop = False
        for e in unit:
            yield e
        produced += len(unit)
        since += len(unit)


def _summary(s: _State, cut: int) -> str:
    r = s.rng
    parts = [
        f"USER_CONTEXT: {s.fill(r.choice(TASKS))}",
        f"COMPLETED: {'; '.join(s.sentence(3, 8) for _ in range(r.randint(2, 5)))}",
        f"PENDING: {s.sentence(4, 10)}",
        f"CODE_STATE: {', '.join(s.path() for _ in range(r.randint(1, 4)))}",
        f"TESTS: {r.randint(0, 5)} failing ({r.choice(ERRORS)} in {r.choice(MODULES)})",
        f"(events 2..{cut - 1} summarized)",
    ]
    return "\n".join(parts)


if __name__ == "__main__":
    from collections import Counter

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    events = list(coding_events(n, condense_every=500))
    kinds = Counter(e.kind for e in events)
    sizes = [len(e.to_json()) for e in events]
    print(f"{len(events)} events, mean JSON {sum(sizes) / len(sizes):.0f} B")
    for kind, count in kinds.most_common():
        ks = [z for e, z in zip(events, sizes) if e.kind == kind]
        print(f"  {kind:<22} {count:6d}  mean {sum(ks) / len(ks):6.0f} B  max {max(ks):6d} B")
