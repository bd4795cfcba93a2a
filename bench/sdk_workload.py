"""Histories shaped as the OpenHands SDK writes them, deterministically from a seed (issue 9).

``sdk_events(n, seed=0, thinking=False)`` yields exactly ``n`` events:

* a ``SystemPromptEvent`` (with the tools' definitions), the first user ``MessageEvent``;
* then steps. A step is one LLM response and what answers it:
  - 99 %: a tool-call batch - one ``ActionEvent`` (90 %) or 2-3 parallel ones sharing one
    ``llm_response_id`` (10 %), followed by their ``ObservationEvent``s in the same order
    (same ``tool_call_id``s). Actions are ~1.2 KB of JSON (only a batch's first action
    carries the thought, as the SDK does); observations ~2.8 KB: a ``TerminalObservation``
    with the command's output, its exit code and the working directory;
  - 1 %: an agent ``MessageEvent`` (the agent reports back) and a new user ``MessageEvent``;
* ``thinking=True``: each response's first action carries a thinking block (so every
  batch starts a tool loop);
* a ``Condensation`` whenever the view has grown past 120 events, as the SDK's
  ``LLMSummarizingCondenser(max_size=120, keep_first=4)`` writes it before the next LLM
  call: it keeps ``max_size // 2 - keep_first - 1`` = 55 events at the tail, forgets the
  view's events from ``find_next(4)`` to ``find_next(len - 55)`` - their SDK ids in
  ``forgotten_event_ids``, the previous summary's ``<condensation id>-summary`` among them
  when it is in that range, never a Condensation (those are never in a view) - and carries
  a ``summary`` shown at ``summary_offset=4``.

The generator tracks the view as the SDK's fold (``View.from_events``) would, so it knows
what a condensation can forget; it cuts only between steps, never inside a batch or between
an action and its observation. The first step is always a single tool call, so the head the
condenser keeps is [system prompt, user message, action, observation] and the summary lands
at 4. A view grows to at most 120 + one step (126 events) before it is condensed.

Every event has a random-looking but seeded UUID4 id, a naive ISO timestamp from a simulated
clock, and ``parent_id`` naming the event before it (SDK 1.58 appends through
``ConversationState``, which stamps it). Same arguments -> byte-identical events. The stream
is cut to exactly ``n`` events by shrinking the last step (fewer parallel calls, or one user
message), so every action is answered whatever ``n`` is.

``python bench/sdk_workload.py [N]`` prints the mix and sizes; ``--check`` verifies a 3,000-
event history of each variant against ``openhands_memory.view.View.from_events``.
"""

from __future__ import annotations

import json
import random
import string
import sys
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Iterator

if __package__ in (None, ""):  # run as a script: make the library and bench importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workload import (  # noqa: E402  (the coding vocabulary is shared)
    ERRORS,
    FOLLOW_UPS,
    MODULES,
    NOUNS,
    PACKAGES,
    TASKS,
    THOUGHTS,
    VERBS,
    WORDS,
)
from openhands_memory.events import (  # noqa: E402
    ActionEvent,
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

MAX_SIZE = 120
KEEP_FIRST = 4
TAIL = MAX_SIZE // 2 - KEEP_FIRST - 1  # the SDK's events_from_tail for the EVENTS reason
MINIMUM_PROGRESS = 0.1  # the SDK's default: forget at least this share of the view
START = datetime(2026, 11, 21, 8, 0, 0, 123456)
WORKDIR = "/workspace/project"

SYSTEM_PROMPT = (
    "You are OpenHands agent, a helpful AI assistant that can interact with a computer to solve tasks.\n\n"
    "<ROLE>\nYour primary role is to assist users by executing commands, modifying code, and solving "
    "technical problems effectively. You should be thorough, methodical, and prioritize quality over "
    "speed.\n* If the user asks a question, like \"why is X happening\", don't try to fix the problem. "
    "Just give an answer to the question.\n</ROLE>\n\n"
    "<EFFICIENCY>\n* Each action you take is somewhat expensive. Wherever possible, combine multiple "
    "actions into a single action, e.g. combine multiple bash commands into one, using sed and grep to "
    "edit/view multiple files at once.\n* When exploring the codebase, use efficient tools like find, "
    "grep, and git commands with appropriate filters to minimize unnecessary operations.\n</EFFICIENCY>\n\n"
    "<FILE_SYSTEM_GUIDELINES>\n* When a user provides a file path, do NOT assume it's relative to the "
    "current working directory. First explore the file system to locate the file before working on it.\n"
    "* If asked to edit a file, edit the file directly, rather than creating a new file with a different "
    "filename.\n</FILE_SYSTEM_GUIDELINES>\n\n"
    "<CODE_QUALITY>\n* Write clean, efficient code with minimal comments.\n* When implementing solutions, "
    "focus on making the minimal changes needed to solve the problem.\n</CODE_QUALITY>\n\n"
    "<VERSION_CONTROL>\n* Exercise caution with git operations. Do NOT make potentially dangerous changes "
    "(e.g., pushing to main, deleting repositories) unless explicitly asked to do so.\n</VERSION_CONTROL>\n\n"
    "<TROUBLESHOOTING>\n* If you've made repeated attempts to solve a problem but tests still fail: step "
    "back and reflect on 5-7 different possible sources of the problem, assess the likelihood of each, "
    "and methodically address the most likely causes.\n</TROUBLESHOOTING>"
)

TOOLS = [
    {
        "name": "terminal",
        "description": (
            "Execute a bash command in the terminal within a persistent shell session.\n\n"
            "### Command Execution\n* One command at a time: you can only execute one bash command at a "
            "time. If you need to run multiple commands sequentially, use `&&` or `;` to chain them.\n"
            "* Persistent session: commands execute in a persistent shell session where environment "
            "variables, virtual environments, and working directory persist between commands.\n"
            "* Soft timeout: commands have a soft timeout of 10 seconds, once that's reached, you have the "
            "option to continue or interrupt the command.\n\n### Long-running Commands\n* For commands "
            "that may run indefinitely, run them in the background and redirect output to a file."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The bash command to execute."},
                "is_input": {"type": "boolean", "description": "If True, the command is an input to the running process."},
                "timeout": {"type": "number", "description": "Optional. Sets a hard timeout in seconds."},
                "reset": {"type": "boolean", "description": "If True, reset the terminal by creating a new session."},
                "summary": {"type": "string", "description": "A concise summary (approximately 10 words) of what this action does."},
                "security_risk": {"type": "string", "enum": ["LOW", "MEDIUM", "HIGH"]},
            },
            "required": ["command", "security_risk"],
        },
    },
    {
        "name": "file_editor",
        "description": (
            "Custom editing tool for viewing, creating and editing files in plain-text format.\n"
            "* State is persistent across command calls and discussions with the user.\n"
            "* If `path` is a text file, `view` displays the result of applying `cat -n`.\n"
            "* The `create` command cannot be used if the specified `path` already exists as a file."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert", "undo_edit"]},
                "path": {"type": "string", "description": "Absolute path to file or directory."},
                "file_text": {"type": "string"}, "old_str": {"type": "string"}, "new_str": {"type": "string"},
                "insert_line": {"type": "integer"}, "view_range": {"type": "array", "items": {"type": "integer"}},
            },
            "required": ["command", "path"],
        },
    },
    {
        "name": "task_tracker",
        "description": "Structured task management for the current job: view the list or plan it anew.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "enum": ["view", "plan"]},
                           "task_list": {"type": "array", "items": {"type": "object"}}},
            "required": ["command"],
        },
    },
    {
        "name": "finish",
        "description": "Signals the completion of the current task or conversation.",
        "parameters": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
    },
]


class _Gen:
    """The random source, the clock and the text pools of one history."""

    def __init__(self, seed: int, thinking: bool):
        self.rng = random.Random(seed)
        self.thinking = thinking
        self.clock = START
        self.parent: str | None = None  # the id of the last event emitted
        r = self.rng
        self.conversation_hex = f"{r.getrandbits(128):032x}"
        self.host = f"runtime-{r.getrandbits(32):08x}"
        # Pools drawn from below: a repository repeats itself, and drawing keeps a million-
        # event stream quick to generate.
        self.sentences = [self._sentence() for _ in range(3000)]
        self.code = [self._code_line() for _ in range(4000)]
        self.test_lines = [self._test_line() for _ in range(3000)]
        self.ls_lines = [self._ls_line() for _ in range(2000)]
        self.diff_lines = [self._diff_line() for _ in range(3000)]

    # --- identity, time -----------------------------------------------------------------

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def tick(self, low: float, high: float) -> str:
        self.clock += timedelta(seconds=self.rng.uniform(low, high))
        return self.clock.isoformat()

    def chain(self) -> dict:
        """id, parent_id (the previous event) for the next event."""
        uid, parent = self.uid(), self.parent
        self.parent = uid
        return {"id": uid, "parent_id": parent}

    def call_id(self) -> str:
        return "toolu_01" + "".join(self.rng.choices(string.ascii_letters + string.digits, k=22))

    def response_id(self) -> str:
        return "chatcmpl-" + "".join(self.rng.choices("0123456789abcdef", k=29))

    # --- text ---------------------------------------------------------------------------

    def _sentence(self) -> str:
        return " ".join(self.rng.choices(WORDS, k=self.rng.randint(5, 22))).capitalize() + "."

    def sentence(self) -> str:
        return self.rng.choice(self.sentences)

    def fill(self, template: str) -> str:
        r = self.rng
        return template.format(mod=r.choice(MODULES), pkg=r.choice(PACKAGES), noun=r.choice(NOUNS),
                               verb=r.choice(VERBS), err=r.choice(ERRORS))

    def path(self) -> str:
        r = self.rng
        if r.random() < 0.3:
            return f"{WORKDIR}/tests/test_{r.choice(MODULES)}.py"
        return f"{WORKDIR}/{r.choice(PACKAGES)}/{r.choice(MODULES)}.py"

    def _code_line(self) -> str:
        r = self.rng
        noun, verb, mod = r.choice(NOUNS), r.choice(VERBS), r.choice(MODULES)
        return r.choice([
            f"def {verb}_{noun}(self, {noun}_id: int, *, strict: bool = False) -> {noun.title()}:",
            f"    {noun} = self.{mod}.{verb}({noun}_id)",
            f"    if {noun} is None:",
            f"        raise {r.choice(ERRORS)}(f\"no {noun} with id {{{noun}_id}}\")",
            f"    return {verb}_{noun}({noun}, strict=strict)",
            f"from {r.choice(PACKAGES)}.{mod} import {verb}_{noun}",
            f"class {noun.title()}{r.choice(['Service', 'Repository', 'Handler', 'Model'])}:",
            f"        for {noun} in {noun}s:",
            f"            result[{noun}.id] = {noun}.{verb}()",
            f"    # {self._sentence()}",
            "",
            f"    assert {verb}_{noun}({r.randint(0, 99)}) == {r.randint(0, 999)}",
        ])

    def _test_line(self) -> str:
        r = self.rng
        m = r.choice(MODULES)
        return r.choice([
            f"tests/test_{m}.py::test_{r.choice(VERBS)}_{r.choice(NOUNS)} PASSED{' ' * r.randint(1, 20)}[{r.randint(1, 99):3d}%]",
            f"tests/test_{m}.py::test_{r.choice(VERBS)}_{r.choice(NOUNS)} FAILED{' ' * r.randint(1, 20)}[{r.randint(1, 99):3d}%]",
            f"E       {r.choice(ERRORS)}: {self._sentence()}",
            f"{r.choice(PACKAGES)}/{m}.py:{r.randint(10, 900)}: in {r.choice(VERBS)}_{r.choice(NOUNS)}",
            f">       {self._code_line().strip()}",
        ])

    def _ls_line(self) -> str:
        r = self.rng
        return (f"-rw-r--r-- 1 openhands openhands {r.randint(100, 90000):6d} Nov {r.randint(1, 30):2d} "
                f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d} {r.choice(MODULES)}{r.choice(['.py', '.md', '.toml', '.cfg', ''])}")

    def _diff_line(self) -> str:
        r = self.rng
        return r.choice(["+", "-", " ", " "]) + self._code_line()

    def lines(self, size: int, pool: list[str], numbered: int | None = None) -> str:
        out, total = [], 0
        choice = self.rng.choice
        while total < size:
            line = choice(pool)
            if numbered is not None:
                line = f"{numbered:6d}\t{line}"
                numbered += 1
            out.append(line)
            total += len(line) + 1
        return "\n".join(out)[:size]

    # --- a terminal call: (arguments, output, exit code, working dir) -------------------

    def terminal(self) -> tuple[str, str, int, str]:
        r = self.rng
        size = int(r.triangular(150, 5200, 750))
        mod, pkg = r.choice(MODULES), r.choice(PACKAGES)
        kind = r.random()
        wd = WORKDIR
        if kind < 0.3:
            cmd = f"cd {WORKDIR} && python -m pytest tests/test_{mod}.py -x -q 2>&1 | tail -60"
            failed = r.random() < 0.4
            out = self.lines(size - 70, self.test_lines)
            out += f"\n===== {r.randint(1, 9) if failed else 0} failed, {r.randint(10, 300)} passed in {r.uniform(0.5, 40):.2f}s ====="
            code = 1 if failed else 0
        elif kind < 0.5:
            path = self.path()
            start = r.randint(1, 400)
            cmd = f"sed -n '{start},{start + r.randint(40, 120)}p' {path}"
            out = self.lines(size, self.code, numbered=start) if r.random() < 0.5 else self.lines(size, self.code)
            code = 0
        elif kind < 0.68:
            cmd = f"grep -rn \"{r.choice(VERBS)}_{r.choice(NOUNS)}\" {WORKDIR}/{pkg} --include='*.py' | head -80"
            out = "\n".join(f"{WORKDIR}/{pkg}/{r.choice(MODULES)}.py:{r.randint(1, 900)}:{line}"
                            for line in self.lines(size, self.code).split("\n"))[:size]
            code = 0 if out else 1
        elif kind < 0.8:
            cmd = f"cd {WORKDIR} && git diff {pkg}/{mod}.py"
            out = (f"diff --git a/{pkg}/{mod}.py b/{pkg}/{mod}.py\nindex {r.getrandbits(28):07x}..{r.getrandbits(28):07x} 100644\n"
                   f"--- a/{pkg}/{mod}.py\n+++ b/{pkg}/{mod}.py\n@@ -{r.randint(1, 300)},7 +{r.randint(1, 300)},9 @@\n")
            out += self.lines(max(0, size - len(out)), self.diff_lines)
            code = 0
        elif kind < 0.9:
            wd = f"{WORKDIR}/{pkg}"
            cmd = f"cd {wd} && ls -la"
            out = f"total {r.randint(20, 900)}\n" + self.lines(size, self.ls_lines)
            code = 0
        else:
            path = self.path()
            cmd = (f"cd {WORKDIR} && python - <<'EOF'\nimport re\np = '{path}'\ns = open(p).read()\n"
                   f"s = s.replace('{r.choice(VERBS)}_{r.choice(NOUNS)}(', '{r.choice(VERBS)}_{r.choice(NOUNS)}(')\n"
                   "open(p, 'w').write(s)\nprint('ok')\nEOF")
            out = "ok" if r.random() < 0.7 else (
                "Traceback (most recent call last):\n" + self.lines(size // 3, self.test_lines))
            code = 0 if out == "ok" else 1
        return cmd, out, code, wd


def _text(t: str) -> TextContent:
    return TextContent(text=t)


# --- the units a history is made of ------------------------------------------------------


def _system(g: _Gen) -> SystemPromptEvent:
    return SystemPromptEvent(**g.chain(), timestamp=g.clock.isoformat(), source="agent",
                             system_prompt=_text(SYSTEM_PROMPT), tools=TOOLS)


def _user(g: _Gen, text: str) -> MessageEvent:
    return MessageEvent(**g.chain(), timestamp=g.tick(5, 300), source="user",
                        llm_message=Message(role="user", content=[_text(text)]))


def _task(g: _Gen) -> str:
    r = g.rng
    text = g.fill(r.choice(TASKS))
    if r.random() < 0.5:
        text += "\n\n" + " ".join(g.sentence() for _ in range(r.randint(1, 6)))
    return text


def _report(g: _Gen) -> MessageEvent:
    r = g.rng
    lines = [f"I have {r.choice(['fixed', 'implemented', 'updated', 'refactored'])} "
             f"{r.choice(VERBS)}_{r.choice(NOUNS)} in {g.path()}."]
    lines += [f"- {g.sentence()}" for _ in range(r.randint(2, 8))]
    lines.append(f"All {r.randint(20, 400)} tests pass.")
    return MessageEvent(**g.chain(), timestamp=g.tick(1, 20), source="agent",
                        llm_message=Message(role="assistant", content=[_text("\n".join(lines))]),
                        llm_response_id=g.response_id())


def _batch(g: _Gen, width: int) -> list[Event]:
    """One LLM response with ``width`` terminal calls, then their observations."""
    r = g.rng
    response = g.response_id()
    actions: list[ActionEvent] = []
    calls = []
    for k in range(width):
        cmd, out, code, wd = g.terminal()
        call = g.call_id()
        summary = " ".join(r.choices(WORDS, k=r.randint(5, 10)))
        arguments = {"command": cmd, "is_input": False, "summary": summary, "security_risk": "LOW"}
        if r.random() < 0.2:
            arguments["timeout"] = r.choice([30, 60, 120, 300])
        action = {"command": cmd, "is_input": False, "reset": False, "kind": "TerminalAction"}
        if "timeout" in arguments:
            action["timeout"] = float(arguments["timeout"])
        thought: list[TextContent] = []
        thinking: list[ThinkingBlock] = []
        if k == 0:
            parts = [g.fill(r.choice(THOUGHTS))]
            for _ in range(r.randint(1, 5)):
                parts.append(g.sentence())
            thought = [_text(" ".join(parts))]
            if g.thinking:
                thinking = [ThinkingBlock(
                    thinking=" ".join(g.sentence() for _ in range(r.randint(2, 8))),
                    signature="".join(r.choices(string.ascii_letters + string.digits + "+/", k=r.randint(240, 480))) + "==",
                )]
        actions.append(ActionEvent(
            **g.chain(), timestamp=g.tick(2, 25) if k == 0 else g.tick(0.0, 0.002), source="agent",
            thought=thought, thinking_blocks=thinking, action=action, tool_name="terminal",
            tool_call_id=call, tool_call=MessageToolCall(id=call, name="terminal", arguments=json.dumps(arguments)),
            llm_response_id=response, security_risk="LOW", summary=summary,
        ))
        calls.append((call, cmd, out, code, wd))
    events: list[Event] = list(actions)
    for action, (call, cmd, out, code, wd) in zip(actions, calls):
        suffix = f"\n[The command completed with exit code {code}.]"
        events.append(ObservationEvent(
            **g.chain(), timestamp=g.tick(0.05, 30), source="environment", tool_name="terminal",
            tool_call_id=call, action_id=action.id,
            observation={
                "content": [{"cache_prompt": False, "type": "text", "text": out}],
                "is_error": False, "command": cmd, "exit_code": code, "timeout": False,
                "metadata": {"exit_code": code, "pid": r.randint(100, 60000), "username": "openhands",
                             "hostname": g.host, "working_dir": wd,
                             "py_interpreter_path": "/openhands/micromamba/envs/openhands/bin/python",
                             "prefix": "", "suffix": suffix},
                "full_output_save_dir": f"/workspace/conversations/{g.conversation_hex}/observations",
                "kind": "TerminalObservation",
            },
        ))
    return events


def _summary(g: _Gen, forgotten: int) -> str:
    r = g.rng
    parts = [
        f"USER_CONTEXT: {g.fill(r.choice(TASKS))} {g.sentence()}",
        "COMPLETED: " + "; ".join(g.sentence() for _ in range(r.randint(3, 7))),
        "PENDING: " + "; ".join(g.sentence() for _ in range(r.randint(1, 4))),
        "CURRENT_STATE: " + g.sentence(),
        "CODE_STATE: " + ", ".join(f"{g.path()} ({r.choice(VERBS)}_{r.choice(NOUNS)})" for _ in range(r.randint(2, 6))),
        f"TESTS: {r.randint(0, 5)} failing ({r.choice(ERRORS)} in tests/test_{r.choice(MODULES)}.py)",
        "CHANGES: " + "; ".join(g.sentence() for _ in range(r.randint(1, 4))),
        f"DEPS: {', '.join(r.sample(MODULES, 3))}",
        f"VERSION_CONTROL_STATUS: branch fix/{r.choice(NOUNS)}-{r.choice(VERBS)}, {r.randint(0, 9)} commits ahead",
        f"({forgotten} events summarized)",
    ]
    return "\n".join(parts)


# --- the stream --------------------------------------------------------------------------


def sdk_events(n: int, *, seed: int = 0, thinking: bool = False, condense: bool = True) -> Iterator[Event]:
    """Exactly ``n`` events of an SDK agent's conversation (see the module's docstring)."""
    if n <= 0:
        return
    g = _Gen(seed, thinking)
    r = g.rng
    # The view as the SDK's fold sees it: (event id, whether a step starts there). Whole
    # steps are always in or out of it, so a cut may go exactly where a step starts.
    view: list[tuple[str, bool]] = []
    produced = 0
    steps = 0
    while produced < n:
        room = n - produced
        if condense and len(view) > MAX_SIZE:
            cond = _condense(g, view)
            if cond is not None:
                yield cond
                produced += 1
                if produced == n:
                    return
                room -= 1
        if produced == 0:
            unit: list[Event] = [_system(g)]
        elif produced == 1:
            unit = [_user(g, _task(g))]
        elif room == 1:
            unit = [_user(g, g.fill(r.choice(FOLLOW_UPS)))]
        else:
            roll = r.random()
            if steps > 0 and roll < 0.01:
                unit = [_report(g)]
                text = g.fill(r.choice(FOLLOW_UPS)) if r.random() < 0.6 else _task(g)
                unit.append(_user(g, text))
            else:
                width = 1 if steps == 0 or roll < 0.901 else r.choice((2, 3))
                unit = _batch(g, min(width, room // 2))
            steps += 1
        if isinstance(unit[0], MessageEvent) and len(unit) == 2:
            view.extend([(unit[0].id, True), (unit[1].id, True)])
        else:
            view.extend((e.id, i == 0) for i, e in enumerate(unit))
        yield from unit
        produced += len(unit)


def _condense(g: _Gen, view: list[tuple[str, bool]]) -> Condensation | None:
    """The SDK summarizer's Condensation for ``view`` (changed in place to the view after it)."""
    starts = [i for i, (_, s) in enumerate(view) if s] + [len(view)]

    def find_next(t: int) -> int | None:
        return next((i for i in starts if i >= t), None)

    start = find_next(KEEP_FIRST)
    end = find_next(len(view) - TAIL)
    if start is None or end is None or end <= start:
        return None  # SOFT: no valid range, try again at the next step
    forgotten = view[start:end]
    if len(forgotten) < len(view) * MINIMUM_PROGRESS:
        return None
    ident = g.chain()
    cond = Condensation(
        **ident, timestamp=g.tick(3, 40), source="environment",
        forgotten_event_ids=[uid for uid, _ in forgotten], summary=_summary(g, len(forgotten)),
        summary_offset=start, llm_response_id=g.response_id(),
    )
    view[start:end] = [(f"{cond.id}-summary", True)]
    return cond


def step_pairs(seed: int = 0, thinking: bool = False) -> Iterator[list[Event]]:
    """Endless single-call steps (an action and its observation) of the same shape, from a
    stream of their own: what a bench appends to a built history as an agent's next steps.
    They name no parent: the store gives each the one it follows (its own stream cannot know
    the condensations a bench writes between them, and naming the event before one of those
    would start a branch beside it, as the SDK's tree has it)."""
    g = _Gen(seed ^ 0x5EED5EED, thinking)
    g.clock = START + timedelta(days=400)
    while True:
        yield [e.model_copy(update={"parent_id": None}) for e in _batch(g, 1)]


# --- checks and stats --------------------------------------------------------------------


def check(n: int = 3000, seed: int = 0, thinking: bool = False) -> dict:
    """Verify the stream against the library's own fold at every condensation and at the end."""
    from openhands_memory.view import View

    events = list(sdk_events(n, seed=seed, thinking=thinking))
    assert len(events) == n, len(events)
    again = [e.to_json() for e in sdk_events(n, seed=seed, thinking=thinking)]
    assert again == [e.to_json() for e in events], "not deterministic"
    ids = [e.id for e in events]
    assert len(set(ids)) == n, "duplicate ids"
    assert all(e.parent_id == (ids[i - 1] if i else None) for i, e in enumerate(events)), "parent chain"
    points = [i for i, e in enumerate(events) if isinstance(e, Condensation)] + [n]
    longest = 0
    conds = 0
    for p in points:  # the view right before each condensation is the largest it gets
        v = View.from_events(events[:p])
        assert not v.dropped, f"view before event {p} dropped {v.dropped}"
        longest = max(longest, len(v))
        if p < n:
            cond = events[p]
            assert isinstance(cond, Condensation) and cond.summary_offset == KEEP_FIRST, cond.summary_offset
            assert len(v) > MAX_SIZE, (p, len(v))
            in_view = {e.id for e in v.events}
            assert set(cond.forgotten_event_ids) <= in_view, "forgets an event that is not in the view"
            # The SDK's slice: forgotten events are one contiguous run of the view from 4.
            pos = [k for k, e in enumerate(v.events) if e.id in set(cond.forgotten_event_ids)]
            assert pos == list(range(KEEP_FIRST, KEEP_FIRST + len(pos))), "not a contiguous cut at 4"
            kept = len(v) - pos[-1] - 1  # the SDK keeps at most TAIL, cutting where a step starts
            assert TAIL - 6 < kept <= TAIL, ("tail", kept)
            if conds:
                assert f"{events[points[conds - 1]].id}-summary" in cond.forgotten_event_ids
            after = View.from_events(events[: p + 1])
            assert not after.dropped and len(after) <= MAX_SIZE // 2 + 8, len(after)
            conds += 1
    return {"events": n, "condensations": conds, "longest view": longest,
            "final view": len(View.from_events(events))}


def describe(n: int, seed: int = 0, thinking: bool = False) -> None:
    from collections import Counter

    events = list(sdk_events(n, seed=seed, thinking=thinking))
    kinds = Counter(e.kind for e in events)
    sizes = [len(e.to_json().encode()) for e in events]
    widths = Counter(Counter(e.llm_response_id for e in events if isinstance(e, ActionEvent)).values())
    print(f"{len(events)} events (thinking={thinking}), mean JSON {sum(sizes) / len(sizes):,.0f} B; "
          f"batch widths {dict(sorted(widths.items()))}")
    for kind, count in kinds.most_common():
        ks = [z for e, z in zip(events, sizes) if e.kind == kind]
        print(f"  {kind:<18} {count:7d}  mean {sum(ks) / len(ks):7,.0f} B  max {max(ks):7,d} B")


if __name__ == "__main__":
    import time

    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--check" in sys.argv:
        for thinking in (False, True):
            t0 = time.perf_counter()
            result = check(int(args[0]) if args else 3000, thinking=thinking)
            print(f"thinking={thinking}: OK {result} ({time.perf_counter() - t0:.1f} s)")
    else:
        t0 = time.perf_counter()
        describe(int(args[0]) if args else 20000, thinking="--thinking" in sys.argv)
        print(f"({time.perf_counter() - t0:.1f} s)")
