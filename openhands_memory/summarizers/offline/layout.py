"""The digest as text, and the text read back.

Layout rules, which keep the parser simple and make it safe from odd event text:
* section headings start with ``## `` in column 0;
* a list item starts with ``- ``, and its further lines are indented by two spaces;
* every line of a kept earlier summary is indented by two spaces;
* a note ``(N earlier <things> omitted)`` counts the items that were dropped to fit the caps.
"""

from __future__ import annotations

import re
from typing import Any

from .digest import LIST_KEYS, STATE_KEYS, Digest
from .extraction import CommandRun

HEADER = "[Offline digest of earlier events, format 1]"

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
_NOUNS = {
    "requests": "requests",
    "changed": "changed files",
    "read": "read files",
    "commands": "commands",
    "errors": "errors",
    "pages": "pages",
}
_OMITTED = re.compile(r"^\((\d+) earlier [a-z ]+ omitted\)$")
_COMMAND_ITEM = re.compile(r"^\[exit ([^\],]+)(?:, x(\d+))?\] (.*)$", re.DOTALL)
_STATE_LINE = re.compile(r"^([A-Z][A-Za-z ]*):(?: (.*))?$")


def parse(text: str) -> Digest | None:
    """Read back a digest this module wrote; None when ``text`` is in another format."""
    lines = text.strip().splitlines()
    if not lines or lines[0].strip() != HEADER:
        return None
    d = Digest()
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
        elif section in LIST_KEYS:
            _parse_list_line(d, section, line)
    d.earlier = "\n".join(earlier).strip("\n")
    return d


def _parse_list_line(d: Digest, key: str, line: str) -> None:
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


def _indented(text: str) -> list[str]:
    return [f"  {ln}" if ln.strip() else "" for ln in text.splitlines()]


def item_lines(key: str, item: Any) -> list[str]:
    if key == "commands":
        times = f", x{item.count}" if item.count > 1 else ""
        return [f"- [exit {item.exit_code}{times}] {item.command}"]
    first, *rest = item.splitlines() or [""]
    return [f"- {first}"] + _indented("\n".join(rest))


def render(d: Digest) -> str:
    blocks = [HEADER]
    if d.earlier.strip():
        blocks.append("\n".join([_TITLES["earlier"], *_indented(d.earlier)]))
    for key in LIST_KEYS:
        items = d.items(key)
        if not items and not d.omitted[key]:
            continue
        lines = [_TITLES[key]]
        if d.omitted[key]:
            lines.append(f"({d.omitted[key]} earlier {_NOUNS[key]} omitted)")
        for item in items:
            lines.extend(item_lines(key, item))
        blocks.append("\n".join(lines))
    if d.state:
        lines = [_TITLES["state"]]
        for k in STATE_KEYS:
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
