"""The offline summarizer: a deterministic digest of forgotten events, with no model.

It is the summarizer used when no model is configured, and the fallback when a model call
fails. So it must never raise on odd input. It must give the same text for the same input,
and it must keep what an agent needs to carry on: what the user asked, which files were
touched, what ran and how it ended, what went wrong, and where things stand now.

The text it writes opens with :data:`HEADER`. When that text comes back as the previous
summary of a later condensation, it is parsed and merged with the new events rather than
nested inside itself. Any other previous summary (for example one written by an LLM) is kept
verbatim in its own section.

Layout rules, which keep the parser simple and make it safe from odd event text:
* section headings start with ``## `` in column 0;
* a list item starts with ``- ``, and its further lines are indented by two spaces;
* every line of a kept earlier summary is indented by two spaces;
* a note ``(N earlier <things> omitted)`` counts the items that were dropped to fit the caps.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterable, Sequence

from ..events import (
    ActionEvent,
    AgentErrorEvent,
    CondensationSummaryEvent,
    Event,
    ImageContent,
    MessageEvent,
    ObservationBase,
    ObservationEvent,
    TextContent,
    UserRejectObservation,
)
from ..messages import observation_text

HEADER = "[Offline digest of earlier events, format 1]"

# Length limits for single entries. Each one is clipped on its own, so one huge paste or
# output cannot crowd out the rest.
REQUEST_CHARS = 1000
COMMAND_CHARS = 240
ERROR_CHARS = 300
PATH_CHARS = 240
EARLIER_CHARS = 4000
MESSAGE_CHARS = 800
THOUGHT_CHARS = 400
OUTPUT_LINES = 5
OUTPUT_LINE_CHARS = 200
TASK_LINES = 15

# How many items each list keeps before the oldest ones become an "omitted" count.
CAPS: dict[str, int] = {
    "requests": 30,
    "changed": 40,
    "read": 40,
    "commands": 20,
    "errors": 10,
    "pages": 10,
}

_TITLES: dict[str, str] = {
    "earlier": "## Earlier summary (kept as written)",
    "requests": "## What the user asked (oldest first)",
    "changed": "## Files changed",
    "read": "## Files read or run",
    "commands": "## Commands run (newest last; [exit code, times run])",
    "errors": "## Errors seen (oldest first)",
    "pages": "## Web pages visited",
    "state": "## Where things stand",
}
_KEY_OF_TITLE = {title: key for key, title in _TITLES.items()}
_LIST_KEYS = ("requests", "changed", "read", "commands", "errors", "pages")
_NOUNS = {
    "requests": "requests",
    "changed": "changed files",
    "read": "read files",
    "commands": "commands",
    "errors": "errors",
    "pages": "pages",
}
_OMITTED = re.compile(r"^\((\d+) earlier [a-z ]+ omitted\)$")
_COMMAND_ITEM = re.compile(r"^\[exit ([^\],]+)(?:, x(\d+))?\] (.*)$", re.S)
_STATE_LINE = re.compile(r"^([A-Z][A-Za-z ]*):(?: (.*))?$")

# State keys, in the order they are shown.
_STATE_KEYS = ("Last agent message", "Last thought", "Last command", "Last output", "Task list", "Finished")

# Tool names. OpenHands' SDK uses ``terminal`` and ``file_editor``. Its legacy CodeAct agent
# used ``execute_bash`` and ``str_replace_editor``.
_TERMINAL_TOOLS = frozenset({"terminal", "execute_bash", "bash"})
_EDITOR_TOOLS = frozenset({"file_editor", "str_replace_editor"})
_EDITOR_READS = frozenset({"view"})
_EDITOR_WRITES = frozenset({"create", "str_replace", "insert", "undo_edit"})


# --- small text helpers ------------------------------------------------------------------


def clip(text: str, limit: int) -> str:
    """Keep the head and tail of ``text`` within ``limit`` characters, saying how much was cut.

    The result is never longer than ``limit``, so clipping clipped text changes nothing. That
    keeps a rolled summary stable as it passes through the parser again and again.
    """
    if len(text) <= limit:
        return text
    # Size the note for the largest number it could hold, then spend the rest on text.
    budget = limit - len(f" [... {len(text)} chars clipped ...] ")
    if budget < 2:
        return text[:limit]
    head = (budget * 2 + 2) // 3  # the start of a request or message usually says the most
    tail = budget - head
    cut = len(text) - head - tail
    return f"{text[:head]} [... {cut} chars clipped ...] {text[len(text) - tail:] if tail else ''}".rstrip(" ")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _block(text: str) -> str:
    """``text`` without blank lines or trailing spaces.

    Each entry is then one unbroken block, which reads back exactly as it was written. That is
    why a digest is unchanged when it is rolled over with no new events.
    """
    return "\n".join(ln.rstrip() for ln in text.splitlines() if ln.strip())


def _content_text(parts: Sequence[Any]) -> str:
    texts = [p.text for p in parts if isinstance(p, TextContent) and p.text.strip()]
    images = sum(len(p.image_urls) for p in parts if isinstance(p, ImageContent))
    if images:
        texts.append(f"[{images} image{'s' if images > 1 else ''} attached]")
    return _block("\n".join(texts))


_TRACEBACK_END = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b")
_ERRORISH = re.compile(
    r"error|exception|fail|fatal|denied|not found|no such|cannot|can't|invalid|refused|timed? ?out",
    re.I,
)
_DECORATION = re.compile(r"^[\W_]+$|^[=\-*#_]{3,}.*[=\-*#_]{3,}$")


def first_meaningful_line(text: str) -> str:
    """The line of an error output most worth keeping. This is a heuristic.

    * A Python traceback gives its final exception line. Its first line only says
      "Traceback".
    * Otherwise the first line that sounds like an error. Tools such as pytest print banners
      and platform lines before the failure.
    * Otherwise the first non-blank line that is not decoration.
    """
    lines = [ln.strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln and not _DECORATION.match(ln)]
    if not lines:
        return ""
    if any(ln.startswith("Traceback (most recent call last)") for ln in lines):
        ends = [ln for ln in lines if _TRACEBACK_END.match(ln)]
        if ends:
            return ends[-1]
    for ln in lines:
        if _ERRORISH.search(ln) and not ln.startswith("Traceback (most recent call last)"):
            return ln
    return lines[0]


def _last_lines(text: str) -> str:
    lines = _block(text).splitlines()[-OUTPUT_LINES:]
    return "\n".join(clip(ln.rstrip(), OUTPUT_LINE_CHARS) for ln in lines)


# --- tool calls ---------------------------------------------------------------------------


def tool_arguments(e: ActionEvent) -> dict[str, Any]:
    """The call's arguments. Bad or partial JSON is expected, so it never raises.

    The model's JSON comes first. Keys it lacks are filled from the parsed ``action``, both
    at the top level and under ``data``, which is where MCP actions keep them. If the JSON
    is unreadable, the ``action`` alone is used.
    """
    args: dict[str, Any] = {}
    try:
        parsed = json.loads(e.tool_call.arguments)
    except (ValueError, TypeError):
        parsed = None
    if isinstance(parsed, dict):
        args.update(parsed)
    action = e.action if isinstance(e.action, dict) else {}
    data = action.get("data")
    for source in (action, data if isinstance(data, dict) else {}):
        for k, v in source.items():
            if k != "kind":
                args.setdefault(k, v)
    return args


def _arg(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    return value if isinstance(value, str) else ""


def _tool(e: ActionEvent) -> str:
    return (e.tool_name or e.tool_call.name or "").strip().lower()


def _is_browser(tool: str) -> bool:
    return tool.startswith("browser")


_GOTO = re.compile(r"""goto\(\s*['"]([^'"]+)['"]""")


def _urls(args: dict[str, Any]) -> list[str]:
    url = _arg(args, "url").strip()
    if url:
        return [url]
    # The legacy ``browser`` tool took BrowserGym code such as goto("https://…").
    return _GOTO.findall(_arg(args, "code"))


# --- files named in shell commands --------------------------------------------------------
# Only commands whose file use is plain are read, and only arguments that look like paths are
# kept. Globs, variables and options are skipped. Paths are kept as written; they are not
# resolved against ``cd``. So a guess is left out rather than reported wrongly.

_READERS = frozenset({"cat", "head", "tail", "less", "more", "nl", "wc", "bat"})
_WRITERS = frozenset({"touch", "rm", "mv", "tee"})
_PREFIXES = frozenset({"sudo", "env", "time", "nohup", "command", "exec"})
_PATHLIKE = re.compile(r"^[\w./~@+-]+$")
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")", "|&", ";;"})
_WRITE_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>"})


def _pathlike(token: str) -> bool:
    return (
        bool(_PATHLIKE.match(token))
        and not token.startswith("-")
        and any(c.isalpha() for c in token)
        and token != "/dev/null"
    )


def _segments(line: str) -> tuple[list[list[str]], bool]:
    """Split one command line into simple commands. Returns (segments, heredoc_seen)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    segments: list[list[str]] = [[]]
    try:
        for tok in lexer:
            if tok.startswith("<<"):
                return segments, True  # the rest is a heredoc body, not commands
            if tok in _SEPARATORS:
                segments.append([])
            else:
                segments[-1].append(tok)
    except ValueError:  # unbalanced quotes: keep what was read so far
        pass
    return segments, False


def _segment_files(tokens: list[str], read: list[str], changed: list[str]) -> None:
    words: list[str] = []
    i = 0
    while i < len(tokens):  # take redirections out first; they apply to any command
        tok = tokens[i]
        if tok in _WRITE_REDIRECTS or tok == "<":
            if i + 1 < len(tokens) and _pathlike(tokens[i + 1]):
                (changed if tok != "<" else read).append(tokens[i + 1])
            i += 2
            continue
        if tok.startswith((">", "<")):  # >&, <> and other fd plumbing
            i += 2
            continue
        words.append(tok)
        i += 1
    while words and ("=" in words[0] and not words[0].startswith("=") or words[0] in _PREFIXES):
        words = words[1:]
    if not words:
        return
    name, args = words[0].rsplit("/", 1)[-1], words[1:]
    if re.fullmatch(r"python[\d.]*", name):
        if len(args) >= 2 and args[0] == "-m" and args[1] == "pytest":
            name, args = "pytest", args[2:]
        else:
            for a in args:
                if a in ("-c", "-m"):
                    return  # inline code or a module, not a file
                if a.endswith(".py") and _pathlike(a):
                    read.append(a)
                    return
            return
    operands = _operands(args, _VALUED_OPTIONS.get(name, frozenset()))
    plain = [a for a in operands if _pathlike(a)]
    if name == "pytest":
        # Test ids such as tests/test_a.py::test_b name their file before the "::".
        files = [a.split("::", 1)[0] for a in operands]
        read.extend(f for f in files if ("/" in f or f.endswith(".py")) and _pathlike(f))
    elif name in _READERS:
        read.extend(plain)
    elif name in _WRITERS:
        changed.extend(plain)
    elif name == "cp":
        if len(plain) >= 2:
            read.extend(plain[:-1])
            changed.append(plain[-1])
    elif name == "sed":
        in_place = any(a == "--in-place" or (a.startswith("-i") and not a.startswith("--")) for a in args)
        if not any(a in _VALUED_OPTIONS["sed"] for a in args):
            plain = [a for a in operands[1:] if _pathlike(a)]  # the first operand is the script
        (changed if in_place else read).extend(plain)


# Options whose value is the next word, so that the value is not taken for a file name.
_VALUED_OPTIONS: dict[str, frozenset[str]] = {
    "head": frozenset({"-n", "-c", "--lines", "--bytes"}),
    "tail": frozenset({"-n", "-c", "--lines", "--bytes"}),
    "sed": frozenset({"-e", "-f", "--expression", "--file"}),
    "pytest": frozenset({"-k", "-m", "-p", "-c", "-o", "--rootdir", "--maxfail", "--tb"}),
}


def _operands(args: list[str], valued: frozenset[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a in valued:
            skip = True
        elif not a.startswith("-"):
            out.append(a)
    return out


def shell_files(command: str) -> tuple[list[str], list[str]]:
    """(read, changed) paths that a shell command plainly reads or writes. See the note above."""
    read: list[str] = []
    changed: list[str] = []
    for line in command.splitlines():
        segments, heredoc = _segments(line)
        for seg in segments:
            _segment_files(seg, read, changed)
        if heredoc:
            break
    return read, changed


# --- facts --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CommandRun:
    """One command, shown as a single line, with how it ended and how many times it ran so.

    ``exit_code`` is the code as text, or ``?`` when unknown, ``rejected`` when the user or
    a hook refused it, or ``error`` when the tool itself failed.
    """

    command: str
    exit_code: str
    count: int = 1


@dataclass(frozen=True)
class Facts:
    """What a list of events states, with nothing capped. The summary is rendered from this."""

    requests: tuple[str, ...] = ()
    files_read: tuple[str, ...] = ()
    files_changed: tuple[str, ...] = ()
    commands: tuple[CommandRun, ...] = ()  # one per (command, exit code), newest last
    errors: tuple[str, ...] = ()  # identical lines listed once, at their newest position
    pages: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()  # the last task list the agent wrote, as "[status] title"
    last_agent_message: str | None = None
    last_thought: str | None = None
    last_command: str | None = None
    last_exit_code: str | None = None
    last_output: str | None = None
    finished: bool = False  # a finish call with no user request after it
    active: bool = False  # any user or agent step at all (decides whether the state is news)


def _exit_code(result: ObservationBase | None) -> str:
    if result is None:
        return "?"
    if isinstance(result, UserRejectObservation):
        return "rejected"
    if not isinstance(result, ObservationEvent):
        return "error"
    code = result.observation.get("exit_code")
    if code is None:
        meta = result.observation.get("metadata")
        code = meta.get("exit_code") if isinstance(meta, dict) else None
    if isinstance(code, int) and not isinstance(code, bool):
        return str(code)
    if isinstance(code, str) and re.fullmatch(r"-?\d+", code.strip()):
        return code.strip()
    return "?"


def _failed(result: ObservationEvent) -> bool:
    code = _exit_code(result)
    return result.observation.get("is_error") is True or (code not in ("?", "0"))


def _output(result: ObservationEvent) -> str:
    return "\n".join(str(p.get("text", "")) for p in observation_text(result) if p.get("type") == "text")


def _describe(e: ActionEvent | None, tool_name: str) -> str:
    """A short name for a call in an error line: the command, or the tool and its target."""
    if e is None:
        return tool_name or "tool"
    args = tool_arguments(e)
    tool = _tool(e)
    if tool in _TERMINAL_TOOLS and _arg(args, "command"):
        return f"`{clip(_one_line(_arg(args, 'command')), COMMAND_CHARS)}`"
    target = _arg(args, "path") or (_urls(args) or [""])[0]
    parts = [tool or tool_name, _arg(args, "command") if tool in _EDITOR_TOOLS else "", target]
    return " ".join(p for p in parts if p)


class _Collector:
    """Walks events once, in order, keeping ordered de-duplicated lists."""

    def __init__(self, events: Sequence[Event]) -> None:
        # The first result per call id answers it, as in the view's observation uniqueness.
        self.results: dict[str, ObservationBase] = {}
        self.calls: dict[str, ActionEvent] = {}
        for e in events:
            if isinstance(e, ObservationBase):
                self.results.setdefault(e.tool_call_id, e)
            elif isinstance(e, ActionEvent):
                self.calls.setdefault(e.tool_call_id, e)
        self.requests: list[str] = []
        self.read: dict[str, None] = {}
        self.changed: dict[str, None] = {}
        self.commands: dict[tuple[str, str], int] = {}
        self.errors: dict[str, None] = {}
        self.pages: dict[str, None] = {}
        self.tasks: tuple[str, ...] = ()
        self.last_message: str | None = None
        self.last_thought: str | None = None
        self.last_command: str | None = None
        self.last_exit: str | None = None
        self.last_output: str | None = None
        self.finished = False
        self.active = False

    @staticmethod
    def _add(bucket: dict[str, None], item: str, *, newest_last: bool = False) -> None:
        if newest_last:
            bucket.pop(item, None)
        bucket.setdefault(item, None)

    def message(self, e: MessageEvent) -> None:
        # Only what the person typed. ``extended_content`` holds injected skills and context.
        text = _content_text(e.llm_message.content)
        if not text:
            return
        self.active = True
        if e.source == "user" and e.llm_message.role == "user":
            self.requests.append(clip(text, REQUEST_CHARS))
            self.finished = False  # a new request reopens the work
        elif e.source == "agent":
            self.last_message = clip(text, MESSAGE_CHARS)

    def action(self, e: ActionEvent) -> None:
        self.active = True
        thought = _content_text(e.thought)
        if thought:
            self.last_thought = clip(thought, THOUGHT_CHARS)
        if e.action is None:
            return  # the call never ran; its AgentErrorEvent is reported on its own
        args, tool = tool_arguments(e), _tool(e)
        result = self.results.get(e.tool_call_id)
        # A refused call, or one the tool could not run, touched nothing. A shell command that
        # ran touched its files even when it exited non-zero (pytest, a crashing script). But a
        # failed editor call reports that the edit or view did not happen.
        ran = result is None or isinstance(result, ObservationEvent)
        succeeded = ran and not (isinstance(result, ObservationEvent) and _failed(result))
        if tool in _TERMINAL_TOOLS:
            self._terminal(args, result, ran)
        elif tool in _EDITOR_TOOLS:
            path = clip(_arg(args, "path").strip(), PATH_CHARS)
            command = _arg(args, "command")
            if path and succeeded and command in _EDITOR_READS:
                self._add(self.read, path)
            elif path and succeeded and command in _EDITOR_WRITES:
                self._add(self.changed, path)
        elif _is_browser(tool):
            for url in _urls(args):
                self._add(self.pages, clip(url, PATH_CHARS))
        elif tool == "task_tracker":
            tasks = args.get("task_list")
            if isinstance(tasks, list) and tasks:
                self.tasks = tuple(_task_line(t) for t in tasks[:TASK_LINES])
        elif tool == "think":
            if _arg(args, "thought").strip():
                self.last_thought = clip(_block(_arg(args, "thought")), THOUGHT_CHARS)
        elif tool == "finish":
            self.finished = True
            if _arg(args, "message").strip():
                self.last_message = clip(_block(_arg(args, "message")), MESSAGE_CHARS)

    def _terminal(self, args: dict[str, Any], result: ObservationBase | None, ran: bool) -> None:
        raw = _arg(args, "command")
        if not raw.strip():
            return
        command = clip(_one_line(raw), COMMAND_CHARS)
        code = _exit_code(result)
        key = (command, code)
        self.commands[key] = self.commands.pop(key, 0) + 1  # re-inserting moves it to the end
        self.last_command, self.last_exit = command, code
        self.last_output = _last_lines(_output(result)) if isinstance(result, ObservationEvent) else None
        if ran and not args.get("is_input"):  # keystrokes sent to a running process name no files
            read, changed = shell_files(raw)
            for p in read:
                self._add(self.read, clip(p, PATH_CHARS))
            for p in changed:
                self._add(self.changed, clip(p, PATH_CHARS))

    def result(self, e: ObservationBase) -> None:
        if self.results.get(e.tool_call_id) is not e:
            return  # a duplicate answer; the view drops it too
        call = self.calls.get(e.tool_call_id)
        what = _describe(call, e.tool_name)
        line = ""
        if isinstance(e, ObservationEvent):
            url = e.browser_url
            if url:
                self._add(self.pages, clip(url, PATH_CHARS))
            if _failed(e):
                code = _exit_code(e)
                status = f"exited {code}" if code not in ("?", "0") else "failed"
                line = f"{what} {status}: {first_meaningful_line(_output(e)) or '(no output)'}"
        elif isinstance(e, AgentErrorEvent):
            line = f"{what}: {first_meaningful_line(e.error) or '(no message)'}"
        elif isinstance(e, UserRejectObservation):
            line = f"{what} was rejected by the {e.rejection_source}: {_one_line(e.rejection_reason)}"
        if line:
            self._add(self.errors, clip(_one_line(line), ERROR_CHARS), newest_last=True)

    def facts(self) -> Facts:
        return Facts(
            requests=tuple(self.requests),
            files_read=tuple(self.read),
            files_changed=tuple(self.changed),
            commands=tuple(CommandRun(c, code, n) for (c, code), n in self.commands.items()),
            errors=tuple(self.errors),
            pages=tuple(self.pages),
            tasks=self.tasks,
            last_agent_message=self.last_message,
            last_thought=self.last_thought,
            last_command=self.last_command,
            last_exit_code=self.last_exit,
            last_output=self.last_output,
            finished=self.finished,
            active=self.active,
        )


def _task_line(task: Any) -> str:
    if not isinstance(task, dict):
        return clip(_one_line(str(task)), 160)
    title = _one_line(str(task.get("title") or task.get("description") or "(untitled)"))
    status = _one_line(str(task.get("status") or "todo"))
    return clip(f"[{status}] {title}", 160)


def facts(events: Iterable[Event]) -> Facts:
    """Extract the summary's facts from events, in event order. Never raises on odd payloads."""
    events = list(events)
    c = _Collector(events)
    for e in events:
        if isinstance(e, MessageEvent):
            c.message(e)
        elif isinstance(e, ActionEvent):
            c.action(e)
        elif isinstance(e, ObservationBase):
            c.result(e)
    return c.facts()


# --- the digest: what gets rendered, from facts or parsed back from an earlier digest ------


@dataclass
class _Digest:
    earlier: str = ""
    lists: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in _LIST_KEYS if k != "commands"})
    commands: list[CommandRun] = field(default_factory=list)
    omitted: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_LIST_KEYS, 0))
    state: dict[str, str] = field(default_factory=dict)

    def items(self, key: str) -> list[Any]:
        return self.commands if key == "commands" else self.lists[key]


def _from_facts(f: Facts) -> _Digest:
    d = _Digest()
    d.lists["requests"] = list(f.requests)
    d.lists["changed"] = list(f.files_changed)
    d.lists["read"] = list(f.files_read)
    d.lists["errors"] = list(f.errors)
    d.lists["pages"] = list(f.pages)
    d.commands = list(f.commands)
    s = d.state
    if f.last_agent_message:
        s["Last agent message"] = f.last_agent_message
    if f.last_thought:
        s["Last thought"] = f.last_thought
    if f.last_command:
        s["Last command"] = f"`{f.last_command}` (exit {f.last_exit_code or '?'})"
        s["Last output"] = f.last_output if f.last_output else "(no output seen)"
    if f.tasks:
        s["Task list"] = "\n".join(f.tasks)
    if f.active or f.finished:
        s["Finished"] = "yes (the agent called finish)" if f.finished else "no"
    return d


def _parse(text: str) -> _Digest | None:
    """Read back a digest this module wrote; None when ``text`` is in another format."""
    lines = text.strip().splitlines()
    if not lines or lines[0].strip() != HEADER:
        return None
    d = _Digest()
    earlier: list[str] = []
    section = ""
    state_key = ""
    for line in lines[1:]:
        if line.rstrip() in _KEY_OF_TITLE:
            section = _KEY_OF_TITLE[line.rstrip()]
            continue
        if section == "earlier":
            earlier.append(line[2:] if line.startswith("  ") else line.strip())
        elif section == "state":
            m = _STATE_LINE.match(line)
            if m and not line.startswith(" "):
                state_key = m.group(1)
                d.state[state_key] = m.group(2) or ""
            elif line.startswith("  ") and state_key:
                prev = d.state[state_key]
                d.state[state_key] = f"{prev}\n{line[2:]}" if prev else line[2:]
        elif section in _LIST_KEYS:
            _parse_list_line(d, section, line)
    d.earlier = "\n".join(earlier).strip("\n")
    return d


def _parse_list_line(d: _Digest, key: str, line: str) -> None:
    items = d.items(key)
    m = _OMITTED.match(line.strip())
    if m and not line.startswith(" "):
        d.omitted[key] += int(m.group(1))
    elif line.startswith("- "):
        body = line[2:]
        if key == "commands":
            c = _COMMAND_ITEM.match(body)
            items.append(CommandRun(c.group(3), c.group(1), int(c.group(2) or 1)) if c else CommandRun(body, "?"))
        else:
            items.append(body)
    elif line.startswith("  ") and items and key != "commands":
        items[-1] = f"{items[-1]}\n{line[2:]}"


def _union(old: list[str], new: list[str]) -> list[str]:
    return list(dict.fromkeys(old + new))


def _merge(old: _Digest, new: _Digest) -> _Digest:
    d = _Digest(earlier=old.earlier, omitted=dict(old.omitted))
    d.lists["requests"] = old.lists["requests"] + new.lists["requests"]
    for key in ("changed", "read", "pages"):
        d.lists[key] = _union(old.lists[key], new.lists[key])
    errors = dict.fromkeys(old.lists["errors"])
    for e in new.lists["errors"]:
        errors.pop(e, None)  # seen again: move it to its newest position
        errors[e] = None
    d.lists["errors"] = list(errors)
    runs = {(r.command, r.exit_code): r.count for r in old.commands}
    for r in new.commands:
        runs[(r.command, r.exit_code)] = runs.pop((r.command, r.exit_code), 0) + r.count
    d.commands = [CommandRun(c, code, n) for (c, code), n in runs.items()]
    # The newest events say where things stand now. A new command replaces the old output
    # too, even when the new command has no output of its own.
    state = dict(old.state)
    if "Last command" in new.state:
        state.pop("Last output", None)
    state.update(new.state)
    d.state = {k: state[k] for k in _STATE_KEYS if k in state}
    return d


def _cap(d: _Digest) -> None:
    for key in _LIST_KEYS:
        _drop_oldest(d, key, len(d.items(key)) - CAPS[key])


def _drop_oldest(d: _Digest, key: str, n: int) -> None:
    if n > 0:
        items = d.items(key)
        del items[:n]
        d.omitted[key] += n


# --- rendering and fitting ---------------------------------------------------------------


def _indented(text: str) -> list[str]:
    return [f"  {ln}" if ln.strip() else "" for ln in text.splitlines()]


def _item_lines(key: str, item: Any) -> list[str]:
    if key == "commands":
        times = f", x{item.count}" if item.count > 1 else ""
        return [f"- [exit {item.exit_code}{times}] {item.command}"]
    first, *rest = item.splitlines() or [""]
    return [f"- {first}"] + _indented("\n".join(rest))


def _render(d: _Digest) -> str:
    blocks = [HEADER]
    if d.earlier.strip():
        blocks.append("\n".join([_TITLES["earlier"], *_indented(d.earlier)]))
    for key in _LIST_KEYS:
        items = d.items(key)
        if not items and not d.omitted[key]:
            continue
        lines = [_TITLES[key]]
        if d.omitted[key]:
            lines.append(f"({d.omitted[key]} earlier {_NOUNS[key]} omitted)")
        for item in items:
            lines.extend(_item_lines(key, item))
        blocks.append("\n".join(lines))
    if d.state:
        lines = [_TITLES["state"]]
        for k in _STATE_KEYS:
            if k not in d.state:
                continue
            value = d.state[k]
            if "\n" in value or k in ("Last output", "Task list"):
                lines.append(f"{k}:")
                lines.extend(_indented(value))
            else:
                lines.append(f"{k}: {value}")
        blocks.append("\n".join(lines))
    if len(blocks) == 1:
        blocks.append("Nothing to report: no events were given.")
    return "\n\n".join(blocks)


# The order in which lists give up their oldest items when the text is too long, and how many
# items each keeps in the first pass. The first pass spares the most useful items. The second
# pass (floor 0) empties lists in the same order. The current state is never trimmed.
_TRIM_PASSES: tuple[tuple[tuple[str, int], ...], ...] = (
    (("commands", 5), ("pages", 2), ("errors", 3), ("read", 5), ("earlier", 1000),
     ("changed", 5), ("requests", 3)),
    (("commands", 0), ("pages", 0), ("read", 0), ("errors", 0), ("earlier", 0),
     ("changed", 0), ("requests", 1), ("requests", 0)),
)


def _fit(d: _Digest, max_chars: int) -> str:
    text = _render(d)
    for trim_pass in _TRIM_PASSES:
        for key, floor in trim_pass:
            while len(text) > max_chars:
                if not _trim(d, key, floor, len(text) - max_chars):
                    break
                text = _render(d)
    if len(text) > max_chars:
        # Only the current state is left and it is still too long (a tiny max_chars). Keep the
        # header and the newest part, as the state is the last section.
        marker = f"\n[... {len(text)} chars clipped ...]\n"
        keep = max_chars - len(HEADER) - len(marker)
        text = HEADER + marker + text[len(text) - keep:] if keep > 0 else text[:max_chars]
    return text


def _trim(d: _Digest, key: str, floor: int, excess: int) -> bool:
    """Drop just enough oldest items of one list (or clip the earlier summary). False: nothing left to drop."""
    if key == "earlier":
        if len(d.earlier) <= floor:
            return False
        limit = max(floor, len(d.earlier) - excess - 64)  # some slack for the clip note
        d.earlier = clip(d.earlier, limit) if limit > 0 else ""
        return True
    items = d.items(key)
    n, freed = 0, 0
    while len(items) - n > floor and freed < excess:
        freed += sum(len(ln) + 1 for ln in _item_lines(key, items[n]))
        n += 1
    if n == 0:
        return False
    _drop_oldest(d, key, n)
    return True


@dataclass(frozen=True)
class OfflineSummarizer:
    """Summarizes forgotten events without a model. The same input always gives the same text.

    ``summarize(events, previous_summary)`` merges into ``previous_summary`` when this class
    wrote it. Otherwise it keeps that summary verbatim (clipped to 4,000 chars). The result
    is at most ``max_chars`` long: the oldest list items go first, and the current state
    stays.
    """

    name: ClassVar[str] = "offline"
    max_chars: int = 6000

    def __post_init__(self) -> None:
        if self.max_chars < 200:
            raise ValueError(f"OfflineSummarizer.max_chars ({self.max_chars}) must be at least 200")

    def summarize(self, events: Sequence[Event], previous_summary: str | None = None) -> str:
        events = list(events)
        if previous_summary is None:
            # Forgotten events may include the summary shown in an earlier view. It is the
            # previous summary in all but name.
            shown = [e.summary for e in events if isinstance(e, CondensationSummaryEvent)]
            previous_summary = shown[-1] if shown else None
        new = _from_facts(facts(events))
        old: _Digest | None = None
        if previous_summary and previous_summary.strip():
            old = _parse(previous_summary)
            if old is None:
                old = _Digest(earlier=clip(previous_summary.strip(), EARLIER_CHARS))
        merged = _merge(old, new) if old is not None else new
        _cap(merged)
        return _fit(merged, self.max_chars)
