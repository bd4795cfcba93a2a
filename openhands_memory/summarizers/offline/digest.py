"""The digest: what a summary holds, as lists and a current state. Made from facts or read
back from an earlier summary (``layout.parse``), and merged, newer over older."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .extraction import CommandRun, Facts

LIST_KEYS = ("requests", "changed", "read", "commands", "errors", "pages")

# State keys, in the order they are shown.
STATE_KEYS = ("Last agent message", "Last thought", "Last command", "Last output", "Task list", "Finished")


@dataclass
class Digest:
    earlier: str = ""
    lists: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in LIST_KEYS if k != "commands"})
    commands: list[CommandRun] = field(default_factory=list)
    omitted: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LIST_KEYS, 0))
    state: dict[str, str] = field(default_factory=dict)

    def items(self, key: str) -> list[Any]:
        return self.commands if key == "commands" else self.lists[key]


def from_facts(f: Facts) -> Digest:
    d = Digest()
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


def _union(old: list[str], new: list[str]) -> list[str]:
    return list(dict.fromkeys(old + new))


def merge(old: Digest, new: Digest) -> Digest:
    d = Digest(earlier=old.earlier, omitted=dict(old.omitted))
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
    d.state = {k: state[k] for k in STATE_KEYS if k in state}
    return d
