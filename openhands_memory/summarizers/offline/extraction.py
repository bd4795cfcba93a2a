"""The facts a list of events states (what the user asked, files, commands, errors, pages,
where things stand), extracted in one pass and never raising on odd payloads."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ...events import (
    ActionEvent,
    AgentErrorEvent,
    Event,
    MessageEvent,
    ObservationBase,
    ObservationEvent,
    UserRejectObservation,
)
from ...view.messages import observation_text
from .shell import shell_files
from .text import block, clip, content_text, first_meaningful_line, one_line
from .tools import (
    EDITOR_READS,
    EDITOR_TOOLS,
    EDITOR_WRITES,
    TERMINAL_TOOLS,
    arg,
    is_browser,
    tool_arguments,
    tool_of,
    urls,
)

# Length limits for single entries. Each one is clipped on its own, so one huge paste or
# output cannot crowd out the rest.
REQUEST_CHARS = 1000
COMMAND_CHARS = 240
ERROR_CHARS = 300
PATH_CHARS = 240
MESSAGE_CHARS = 800
THOUGHT_CHARS = 400
OUTPUT_LINES = 5
OUTPUT_LINE_CHARS = 200
TASK_LINES = 15


def last_lines(text: str) -> str:
    lines = block(text).splitlines()[-OUTPUT_LINES:]
    return "\n".join(clip(ln.rstrip(), OUTPUT_LINE_CHARS) for ln in lines)


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
    tool = tool_of(e)
    if tool in TERMINAL_TOOLS and arg(args, "command"):
        return f"`{clip(one_line(arg(args, 'command')), COMMAND_CHARS)}`"
    target = arg(args, "path") or (urls(args) or [""])[0]
    parts = [tool or tool_name, arg(args, "command") if tool in EDITOR_TOOLS else "", target]
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
        text = content_text(e.llm_message.content)
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
        thought = content_text(e.thought)
        if thought:
            self.last_thought = clip(thought, THOUGHT_CHARS)
        if e.action is None:
            return  # the call never ran; its AgentErrorEvent is reported on its own
        args, tool = tool_arguments(e), tool_of(e)
        result = self.results.get(e.tool_call_id)
        # A refused call, or one the tool could not run, touched nothing. A shell command that
        # ran touched its files even when it exited non-zero (pytest, a crashing script). But a
        # failed editor call reports that the edit or view did not happen.
        ran = result is None or isinstance(result, ObservationEvent)
        succeeded = ran and not (isinstance(result, ObservationEvent) and _failed(result))
        if tool in TERMINAL_TOOLS:
            self._terminal(args, result, ran)
        elif tool in EDITOR_TOOLS:
            path = clip(arg(args, "path").strip(), PATH_CHARS)
            command = arg(args, "command")
            if path and succeeded and command in EDITOR_READS:
                self._add(self.read, path)
            elif path and succeeded and command in EDITOR_WRITES:
                self._add(self.changed, path)
        elif is_browser(tool):
            for url in urls(args):
                self._add(self.pages, clip(url, PATH_CHARS))
        elif tool == "task_tracker":
            tasks = args.get("task_list")
            if isinstance(tasks, list) and tasks:
                self.tasks = tuple(_task_line(t) for t in tasks[:TASK_LINES])
        elif tool == "think":
            if arg(args, "thought").strip():
                self.last_thought = clip(block(arg(args, "thought")), THOUGHT_CHARS)
        elif tool == "finish":
            self.finished = True
            if arg(args, "message").strip():
                self.last_message = clip(block(arg(args, "message")), MESSAGE_CHARS)

    def _terminal(self, args: dict[str, Any], result: ObservationBase | None, ran: bool) -> None:
        raw = arg(args, "command")
        if not raw.strip():
            return
        command = clip(one_line(raw), COMMAND_CHARS)
        code = _exit_code(result)
        key = (command, code)
        self.commands[key] = self.commands.pop(key, 0) + 1  # re-inserting moves it to the end
        self.last_command, self.last_exit = command, code
        self.last_output = last_lines(_output(result)) if isinstance(result, ObservationEvent) else None
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
            line = f"{what} was rejected by the {e.rejection_source}: {one_line(e.rejection_reason)}"
        if line:
            self._add(self.errors, clip(one_line(line), ERROR_CHARS), newest_last=True)

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
        return clip(one_line(str(task)), 160)
    title = one_line(str(task.get("title") or task.get("description") or "(untitled)"))
    status = one_line(str(task.get("status") or "todo"))
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
