"""Writes ``demo_conversation.jsonl``: a coding agent's session, for ``openhands-memory demo``.

    python tools/make_demo.py          # rewrites openhands_memory/data/demo_conversation.jsonl
    python tools/make_demo.py --check  # exit 1 if the file is not what it writes

The story: a user asks the agent to fix a failing date-parsing test in ``datekit``, a small
Python library. The agent explores the repository with the terminal and the file editor,
installs it, runs pytest (tracebacks, a dead end with ``datetime.fromisoformat``, then a
pass), edits code, reads documentation once, fumbles an edit and a tool call, sometimes calls
tools in parallel and sometimes thinks before acting. The user follows up four times (a
related feature, the linter and changelog, a question about callers, a new function), then
asks for a commit.

Everything is simulated, deterministically: the repository is a dict of file texts that the
edits change, so file views, ``grep`` and ``git diff`` show what the story did; pytest's
results are scripted alongside the edits. Ids, tool-call ids and timestamps come from one
seeded random generator, so the output is the same byte for byte on every run. The events
are in the OpenHands SDK's JSON shape (``model_dump(exclude_none=True)`` of its classes).
"""

from __future__ import annotations

import difflib
import json
import random
import re
import string
import sys
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "openhands_memory" / "data" / "demo_conversation.jsonl"
ROOT = "/workspace/datekit"
START = datetime(2026, 11, 20, 14, 2, 11, 250000)

# --- the repository ----------------------------------------------------------------------------

FILES: dict[str, str] = {}

FILES["README.md"] = """\
# datekit

Small helpers for reading dates and times written by people and by machines.

    >>> from datekit import parse_date, parse_datetime
    >>> parse_date("10.03.2024")
    datetime.date(2024, 3, 10)
    >>> parse_datetime("2024-03-10 14:30")
    datetime.datetime(2024, 3, 10, 14, 30)

Accepted dates: `2024-03-10`, `10/03/2024`, `10.03.2024`, `20240310`.
Accepted date-times: ISO 8601 with `T` or a space, minutes or seconds, and an optional
`Z` or `+hh:mm` offset.

## Command line

    $ datekit parse "2024-03-10T14:30+01:00"
    2024-03-10T14:30:00+01:00

## Development

    pip install -e '.[test]'
    python -m pytest
"""

FILES["pyproject.toml"] = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "datekit"
version = "0.4.1"
description = "Parse and format dates and times"
requires-python = ">=3.9"
dependencies = []

[project.optional-dependencies]
test = ["pytest>=7"]

[project.scripts]
datekit = "datekit.cli:main"

[tool.ruff]
line-length = 88

[tool.ruff.lint]
select = ["E", "F"]

[tool.ruff.lint.per-file-ignores]
"tests/*" = ["E501"]
"""

FILES["CHANGELOG.md"] = """\
# Changelog

## 0.4.1 (2026-10-02)
- `format_date` gained the `long` style ("10 March 2024").

## 0.4.0 (2026-09-15)
- `humanize_delta` turns a number of seconds into "3 minutes ago".
- Dropped Python 3.8.
"""

FILES["datekit/__init__.py"] = """\
\"\"\"datekit: parse and format dates and times.\"\"\"

from .formatting import format_date, format_datetime, humanize_delta
from .parsing import DateParseError, parse_date, parse_datetime

__all__ = [
    "DateParseError",
    "format_date",
    "format_datetime",
    "humanize_delta",
    "parse_date",
    "parse_datetime",
]
__version__ = "0.4.1"
"""

FILES["datekit/parsing.py"] = """\
\"\"\"Parse dates and times written by people and by machines.\"\"\"

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone

DATE_FORMATS = ("%Y-%m-%d", "%d/%m/%Y", "%d.%m.%Y", "%Y%m%d")
DATETIME_FORMATS = ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M")
_OFFSET = re.compile(r"(?P<sign>[+-])(?P<hours>\\d{2}):?(?P<minutes>\\d{2})$")


class DateParseError(ValueError):
    \"\"\"The text is not a date (or date and time) in any accepted format.\"\"\"


def parse_date(text: str) -> date:
    \"\"\"The date in ``text``: ISO, day/month/year with / or ., or compact YYYYMMDD.\"\"\"
    text = text.strip()
    for fmt in DATE_FORMATS:
        try:
            return datetime.strptime(text, fmt).date()
        except ValueError:
            continue
    raise DateParseError(f"not a date: {text!r}")


def _split_offset(text: str) -> tuple[str, timezone | None]:
    \"\"\"Separate a trailing Z or +hh:mm offset from the rest of the text.\"\"\"
    if text.endswith("Z"):
        return text[:-1], timezone.utc
    match = _OFFSET.search(text)
    if match is None or "T" not in text[: match.start()]:
        return text, None
    sign = 1 if match["sign"] == "+" else -1
    delta = timedelta(hours=int(match["hours"]), minutes=int(match["minutes"]))
    return text[: match.start()], timezone(sign * delta)


def parse_datetime(text: str) -> datetime:
    \"\"\"The date and time in ``text`` (ISO 8601), aware if it has an offset.\"\"\"
    text = text.strip().replace(" ", "T", 1)
    body, tz = _split_offset(text)
    for fmt in DATETIME_FORMATS:
        try:
            value = datetime.strptime(body, fmt)
        except ValueError:
            continue
        return value.replace(tzinfo=tz) if tz is not None else value
    raise DateParseError(f"not a date and time: {text!r}")
"""

FILES["datekit/formatting.py"] = """\
\"\"\"Format dates, times and durations for people.\"\"\"

from __future__ import annotations

from datetime import date, datetime

MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)


def format_date(value: date, style: str = "iso") -> str:
    if style == "iso":
        return value.isoformat()
    if style == "eu":
        return value.strftime("%d.%m.%Y")
    if style == "long":
        return f"{value.day} {MONTHS[value.month - 1]} {value.year}"
    raise ValueError(f"unknown style {style!r}; use iso, eu or long")


def format_datetime(value: datetime) -> str:
    return value.isoformat(timespec="seconds")


def humanize_delta(seconds: float) -> str:
    \"\"\"``130`` -> ``"2 minutes ago"``; negative values are in the future.\"\"\"
    future = seconds < 0
    seconds = abs(int(seconds))
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = seconds // size
            text = f"{n} {unit}{'s' if n != 1 else ''}"
            break
    else:
        return "just now"
    return f"in {text}" if future else f"{text} ago"
"""

FILES["datekit/cli.py"] = """\
\"\"\"``datekit parse TEXT``: print the date or date-time in TEXT in ISO form.\"\"\"

from __future__ import annotations

import argparse
import sys

from .parsing import DateParseError, parse_date, parse_datetime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="datekit")
    sub = parser.add_subparsers(dest="command", required=True)
    parse = sub.add_parser("parse", help="print TEXT as an ISO date or date-time")
    parse.add_argument("text")
    args = parser.parse_args(argv)
    try:
        value = parse_datetime(args.text)
    except DateParseError:
        try:
            value = parse_date(args.text)
        except DateParseError as e:
            print(f"datekit: {e}", file=sys.stderr)
            return 2
    print(value.isoformat())
    return 0


if __name__ == "__main__":
    sys.exit(main())
"""

FILES[".github/workflows/ci.yml"] = """\
name: CI
on: [push, pull_request]
jobs:
  test:
    runs-on: ubuntu-latest
    strategy:
      matrix:
        python: ["3.9", "3.10", "3.11", "3.12"]
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: ${{ matrix.python }}
      - run: pip install -e '.[test]' ruff
      - run: ruff check .
      - run: python -m pytest -q
"""

FILES["tests/__init__.py"] = ""

FILES["tests/test_parsing.py"] = """\
from datetime import date, datetime, timedelta, timezone

import pytest

from datekit.parsing import DateParseError, parse_date, parse_datetime


@pytest.mark.parametrize(
    "text",
    ["2024-03-10", "10/03/2024", "10.03.2024", "20240310", "  2024-03-10  "],
)
def test_parse_date_formats(text):
    assert parse_date(text) == date(2024, 3, 10)


def test_parse_date_rejects_nonsense():
    with pytest.raises(DateParseError):
        parse_date("next tuesday")


def test_parse_date_rejects_impossible_day():
    with pytest.raises(DateParseError):
        parse_date("2023-02-29")


def test_parse_datetime_minutes():
    assert parse_datetime("2024-03-10T14:30") == datetime(2024, 3, 10, 14, 30)


def test_parse_datetime_space_separator():
    assert parse_datetime("2024-03-10 14:30:05") == datetime(2024, 3, 10, 14, 30, 5)


def test_parse_datetime_with_utc_offset():
    value = parse_datetime("2024-03-10T14:30:00+02:00")
    assert value.utcoffset() == timedelta(hours=2)


def test_parse_datetime_negative_offset_without_colon():
    value = parse_datetime("2024-03-10T14:30-0500")
    assert value.utcoffset() == timedelta(hours=-5)


def test_parse_datetime_zulu():
    assert parse_datetime("2024-03-10T12:30:00Z").tzinfo is timezone.utc


def test_parse_datetime_milliseconds_utc():
    # What JavaScript's Date.toISOString() sends us.
    value = parse_datetime("2024-03-10T12:30:00.250Z")
    assert value == datetime(2024, 3, 10, 12, 30, 0, 250000, tzinfo=timezone.utc)


def test_parse_datetime_requires_time():
    with pytest.raises(DateParseError):
        parse_datetime("2024-03-10")


def test_parse_datetime_rejects_week_dates():
    with pytest.raises(DateParseError):
        parse_datetime("2024-W10-7T12:00")
"""

FILES["tests/test_formatting.py"] = """\
from datetime import date, datetime

import pytest

from datekit.formatting import format_date, format_datetime, humanize_delta


def test_format_date_styles():
    d = date(2024, 3, 10)
    assert format_date(d) == "2024-03-10"
    assert format_date(d, "eu") == "10.03.2024"
    assert format_date(d, "long") == "10 March 2024"


def test_format_date_unknown_style():
    with pytest.raises(ValueError):
        format_date(date(2024, 3, 10), "us")


def test_format_datetime_drops_microseconds():
    assert format_datetime(datetime(2024, 3, 10, 14, 30, 5, 999)) == "2024-03-10T14:30:05"


@pytest.mark.parametrize(
    "seconds, text",
    [(0, "just now"), (59, "just now"), (60, "1 minute ago"), (7200, "2 hours ago"), (-90, "in 1 minute")],
)
def test_humanize_delta(seconds, text):
    assert humanize_delta(seconds) == text
"""

FILES["tests/test_cli.py"] = """\
from datekit.cli import main


def test_parse_datetime_text(capsys):
    assert main(["parse", "2024-03-10T14:30+01:00"]) == 0
    assert capsys.readouterr().out == "2024-03-10T14:30:00+01:00\\n"


def test_parse_date_only_text(capsys):
    assert main(["parse", "10.03.2024"]) == 0
    assert capsys.readouterr().out == "2024-03-10\\n"


def test_parse_garbage(capsys):
    assert main(["parse", "soon"]) == 2
    assert "not a date" in capsys.readouterr().err
"""

# The pytest node ids, in collection order, per file. The story adds tests as it edits.
TESTS: dict[str, list[str]] = {
    "tests/test_cli.py": ["test_parse_datetime_text", "test_parse_date_only_text", "test_parse_garbage"],
    "tests/test_formatting.py": [
        "test_format_date_styles", "test_format_date_unknown_style", "test_format_datetime_drops_microseconds",
        *[f"test_humanize_delta[{p}]" for p in ("0-just now", "59-just now", "60-1 minute ago",
                                                "7200-2 hours ago", "-90-in 1 minute")],
    ],
    "tests/test_parsing.py": [
        *[f"test_parse_date_formats[{p}]" for p in ("2024-03-10", "10/03/2024", "10.03.2024", "20240310",
                                                    "  2024-03-10  ")],
        "test_parse_date_rejects_nonsense", "test_parse_date_rejects_impossible_day", "test_parse_datetime_minutes",
        "test_parse_datetime_space_separator", "test_parse_datetime_with_utc_offset",
        "test_parse_datetime_negative_offset_without_colon", "test_parse_datetime_zulu",
        "test_parse_datetime_milliseconds_utc", "test_parse_datetime_requires_time",
        "test_parse_datetime_rejects_week_dates",
    ],
}

SYSTEM_PROMPT = """\
You are a software engineering agent working in a sandboxed Linux machine. You act through \
tools: a terminal, a file editor, a web browser and a task list. The user's repository is \
checked out under /workspace.

How to work:
- Understand before you change anything: read the relevant code and tests, and reproduce a \
problem before fixing it.
- Keep changes small and in the style of the surrounding code. Do not rename public \
functions or change their behaviour beyond what the task needs.
- After every change, run the tests that cover it; before you finish, run the whole suite.
- Prefer one command that answers a question over several that each answer part of it, and \
view only the part of a long file you need.
- When something fails twice in the same way, stop and think about why before trying again.
- Do not commit, push or change git settings unless the user asks.
- When you are done, say briefly what you changed and how you checked it."""

# The agent's tools as the OpenHands SDK (1.58) writes them in a SystemPromptEvent: a
# ToolDefinition names its class (``kind``), its action and observation types and its
# ``title`` (the tool name the model calls); the parameters' schema comes from the action
# type, so it is not written. The browser is the SDK's BrowserNavigateTool, titled
# "browser" here (through its annotations, as the SDK allows) as the demo's calls name it.
TOOLS = [
    {"description": "Run a shell command in a persistent bash session and return its output and exit code. "
                    "Commands run in the repository's folder unless they change directory.",
     "action_type": "TerminalAction", "observation_type": "TerminalObservation", "kind": "TerminalTool",
     "title": "terminal"},
    {"description": "Look at and change files. `view` prints a file with line numbers (or a folder's contents); "
                    "`create` writes a new file; `str_replace` swaps one exact, unique piece of text for another; "
                    "`insert` adds text after a line.",
     "action_type": "FileEditorAction", "observation_type": "FileEditorObservation", "kind": "FileEditorTool",
     "title": "file_editor"},
    {"description": "Open a web page and return its text.",
     "action_type": "BrowserNavigateAction", "observation_type": "BrowserObservation",
     "annotations": {"title": "browser"}, "kind": "BrowserNavigateTool", "title": "browser"},
    {"description": "Keep the list of steps of the current job and their status (todo, in_progress, done).",
     "action_type": "TaskTrackerAction", "observation_type": "TaskTrackerObservation", "kind": "TaskTrackerTool",
     "title": "task_tracker"},
]


# --- the simulated machine ---------------------------------------------------------------------


@dataclass
class Call:
    """One tool call: its arguments, its payload kinds, and the output it got."""

    tool: str
    args: dict[str, Any]
    action: dict[str, Any] | None
    observation: dict[str, Any] | None  # None: the call was broken and gets an error event
    error: str | None = None


@dataclass
class Machine:
    rng: random.Random
    files: dict[str, str] = field(default_factory=lambda: dict(FILES))
    original: dict[str, str] = field(default_factory=lambda: dict(FILES))
    tests: dict[str, list[str]] = field(default_factory=lambda: {k: list(v) for k, v in TESTS.items()})
    failing: dict[str, tuple[str, str]] = field(default_factory=dict)  # node id -> (traceback, summary)
    installed: bool = False
    ruff: bool = False
    branch: str = "main"
    commits: list[str] = field(default_factory=lambda: [
        "9c41e07 Release 0.4.1",
        "51d2a8b format_date: long style",
        "e07b3f2 cli: fall back to parse_date for date-only input",
        "b6a1d94 parse_datetime: accept offsets without a colon",
        "2f8c0aa Release 0.4.0",
        "7d19e4c humanize_delta",
        "c3e5b21 Drop Python 3.8",
        "0a7f6d3 Add CI workflow",
    ])

    # --- files ---------------------------------------------------------------------------------

    def path(self, rel: str) -> str:
        return f"{ROOT}/{rel}"

    def rel(self, path: str) -> str:
        return path.removeprefix(ROOT + "/").removeprefix(ROOT)

    def numbered(self, rel: str, view_range: list[int] | None = None) -> str:
        lines = self.files[rel].split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        start, end = (view_range[0], view_range[1]) if view_range else (1, len(lines))
        if end == -1:
            end = len(lines)
        return "\n".join(f"{n:6}\t{lines[n - 1]}" for n in range(start, min(end, len(lines)) + 1))

    def listing(self) -> str:
        out = [f"Here are the files and directories up to 2 levels deep in {ROOT}, excluding hidden items:", ROOT]
        visible = [r for r in self.files if not r.startswith(".")]
        folders = sorted({r.split("/")[0] for r in visible if "/" in r})
        for name in sorted({r.split("/")[0] for r in visible if "/" not in r} | set(folders)):
            out.append(f"{ROOT}/{name}" + ("/" if name in folders else ""))
            if name in folders:
                for r in sorted(self.files):
                    if r.startswith(name + "/") and r.count("/") == 1:
                        out.append(f"{ROOT}/{r}")
        return "\n".join(out)

    def replace(self, rel: str, old: str, new: str) -> tuple[bool, str]:
        text = self.files[rel]
        count = text.count(old)
        if count != 1:
            if count == 0:
                return False, (f"No replacement was performed, old_str `{old}` did not appear verbatim in "
                               f"{self.path(rel)}.")
            return False, f"No replacement was performed: old_str appears {count} times in {self.path(rel)}."
        self.files[rel] = text.replace(old, new)
        line = text[: text.index(old)].count("\n") + 1
        last = line + new.count("\n")
        snippet = self.numbered(rel, [max(1, line - 4), last + 4])
        return True, (f"The file {self.path(rel)} has been edited. Here's the result of running `cat -n` on a "
                      f"snippet of {self.path(rel)}:\n{snippet}\nReview the changes and make sure they are as "
                      "expected. Edit the file again if necessary.")

    # --- commands ------------------------------------------------------------------------------

    def grep(self, pattern: str, include_py: bool) -> str:
        regex = re.compile(pattern.replace("\\|", "|"))
        hits = []
        for rel in sorted(self.files):
            if include_py and not rel.endswith(".py"):
                continue
            for n, line in enumerate(self.files[rel].split("\n"), 1):
                if regex.search(line):
                    hits.append(f"./{rel}:{n}:{line}")
        return "\n".join(hits)

    def test_count(self) -> int:
        return sum(len(v) for v in self.tests.values())

    def wc(self) -> str:
        rows = [(self.files[r].count("\n"), f"./{r}") for r in sorted(self.files) if r.endswith(".py")]
        lines = [f"{n:4} {r}" for n, r in rows]
        lines.append(f"{sum(n for n, _ in rows):4} total")
        return "\n".join(lines)

    def diff(self, stat: bool = False, only: str | None = None) -> str:
        out, stats = [], []
        for rel in sorted(set(self.files) | set(self.original)):
            if only is not None and rel != only:
                continue
            a, b = self.original.get(rel, ""), self.files.get(rel, "")
            if a == b:
                continue
            lines = list(difflib.unified_diff(a.splitlines(True), b.splitlines(True), f"a/{rel}", f"b/{rel}", n=3))
            plus = sum(1 for x in lines if x.startswith("+") and not x.startswith("+++"))
            minus = sum(1 for x in lines if x.startswith("-") and not x.startswith("---"))
            stats.append((rel, plus, minus))
            out.append(f"diff --git a/{rel} b/{rel}\n" + "".join(x if x.endswith("\n") else x + "\n" for x in lines))
        if stat:
            width = max(len(r) for r, _, _ in stats)
            rows = [f" {r.ljust(width)} | {p + m:3} {'+' * p}{'-' * m}" for r, p, m in stats]
            total_p, total_m = sum(p for _, p, _ in stats), sum(m for _, _, m in stats)
            rows.append(f" {len(stats)} files changed, {total_p} insertions(+), {total_m} deletions(-)")
            return "\n".join(rows)
        return "".join(out).rstrip("\n")

    def status(self) -> str:
        changed = [r for r in sorted(self.files) if self.original.get(r) != self.files[r]]
        new = [r for r in changed if r not in self.original]
        lines = [f"On branch {self.branch}"]
        modified = [r for r in changed if r not in new]
        if modified:
            lines += ["Changes not staged for commit:", '  (use "git add <file>..." to update what will be committed)']
            lines += [f"\tmodified:   {r}" for r in modified]
        if new:
            lines += ["", "Untracked files:", '  (use "git add <file>..." to include in what will be committed)']
            lines += [f"\t{r}" for r in new]
        if not changed:
            lines.append("nothing to commit, working tree clean")
        return "\n".join(lines)

    def pytest(self, target: str = "", verbose: bool = False, keyword: str | None = None) -> tuple[str, int]:
        if not self.installed:
            text = ("==================================== ERRORS ====================================\n"
                    "___________________ ERROR collecting tests/test_cli.py ___________________\n"
                    "ImportError while importing test module '/workspace/datekit/tests/test_cli.py'.\n"
                    "Hint: make sure your test modules/packages have valid Python names.\n"
                    "Traceback:\n"
                    "/usr/lib/python3.11/importlib/__init__.py:126: in import_module\n"
                    "    return _bootstrap._gcd_import(name[level:], package, level)\n"
                    "tests/test_cli.py:1: in <module>\n"
                    "    from datekit.cli import main\n"
                    "E   ModuleNotFoundError: No module named 'datekit'\n"
                    "=========================== short test summary info ============================\n"
                    "ERROR tests/test_cli.py\n"
                    "ERROR tests/test_formatting.py\n"
                    "ERROR tests/test_parsing.py\n"
                    "!!!!!!!!!!!!!!!!!!! Interrupted: 3 errors during collection !!!!!!!!!!!!!!!!!!!!\n"
                    f"3 errors in {self.rng.uniform(0.08, 0.2):.2f}s")
            return text, 2
        file_part, _, node = target.partition("::")
        selected = [(f, t) for f in sorted(self.tests) for t in self.tests[f]
                    if (not file_part or f == file_part) and (not node or t == node or t.startswith(node + "["))
                    and (keyword is None or keyword in t)]
        deselected = 0
        if keyword is not None:
            deselected = sum(len(v) for f, v in self.tests.items() if not file_part or f == file_part) - len(selected)
        failed = [(f, t) for f, t in selected if f"{f}::{t}" in self.failing]
        lines: list[str] = []
        if verbose:
            total = len(selected)
            for i, (f, t) in enumerate(selected, 1):
                outcome = "FAILED" if (f, t) in failed else "PASSED"
                lines.append(f"{f}::{t} {outcome}".ljust(70) + f" [{100 * i // total:3}%]")
        else:
            marks = "".join("F" if (f, t) in failed else "." for f, t in selected)
            for i in range(0, len(marks), 70):
                chunk = marks[i : i + 70]
                done = min(i + 70, len(marks))
                lines.append(chunk.ljust(75) + f"[{100 * done // len(marks):3}%]")
        if failed:
            lines.append("=" * 31 + " FAILURES " + "=" * 31)
            for f, t in failed:
                lines.append(f" {t} ".center(80, "_"))
                lines.append(self.failing[f"{f}::{t}"][0])
            lines.append("=" * 28 + " short test summary info " + "=" * 27)
            for f, t in failed:
                lines.append(f"FAILED {f}::{t} - {self.failing[f'{f}::{t}'][1]}")
        passed = len(selected) - len(failed)
        parts = ([f"{len(failed)} failed"] if failed else []) + ([f"{passed} passed"] if passed else [])
        if deselected:
            parts.append(f"{deselected} deselected")
        lines.append(f"{', '.join(parts)} in {self.rng.uniform(0.05, 0.4):.2f}s")
        return "\n".join(lines), 1 if failed else 0


# --- event building ----------------------------------------------------------------------------


class Story:
    def __init__(self, seed: int = 20261120):
        self.rng = random.Random(seed)
        self.clock = START
        self.m = Machine(self.rng)
        self.events: list[dict[str, Any]] = []

    # ids and times

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def tick(self, low: float, high: float) -> str:
        self.clock += timedelta(seconds=self.rng.uniform(low, high))
        return self.clock.isoformat()

    def call_id(self) -> str:
        return "toolu_01" + "".join(self.rng.choices(string.ascii_letters + string.digits, k=22))

    def response_id(self) -> str:
        return "chatcmpl-" + "".join(self.rng.choices("0123456789abcdef", k=24))

    def signature(self) -> str:
        return "".join(self.rng.choices(string.ascii_letters + string.digits + "+/", k=self.rng.randint(180, 320))) + "=="

    # events

    def emit(self, event: dict[str, Any]) -> dict[str, Any]:
        self.events.append(event)
        return event

    def system(self) -> None:
        self.emit({"id": self.uid(), "timestamp": self.clock.isoformat(), "source": "agent",
                   "system_prompt": {"cache_prompt": False, "type": "text", "text": SYSTEM_PROMPT},
                   "tools": TOOLS, "kind": "SystemPromptEvent"})

    def user(self, text: str) -> None:
        self.emit({"id": self.uid(), "timestamp": self.tick(20, 180), "source": "user",
                   "llm_message": {"role": "user", "content": [{"cache_prompt": False, "type": "text", "text": text}],
                                   "thinking_blocks": []},
                   "activated_skills": [], "extended_content": [], "kind": "MessageEvent"})

    def say(self, text: str) -> None:
        """The agent's reply without tool calls (the end of its turn)."""
        self.emit({"id": self.uid(), "timestamp": self.tick(3, 15), "source": "agent",
                   "llm_message": {"role": "assistant", "content": [{"cache_prompt": False, "type": "text", "text": text}],
                                   "thinking_blocks": []},
                   "llm_response_id": self.response_id(), "activated_skills": [], "extended_content": [],
                   "kind": "MessageEvent"})

    def turn(self, thought: str, *calls: Call, think: str | None = None) -> None:
        """One model response: its tool calls (first one with the thought), then the results."""
        response = self.response_id()
        answers = []
        for k, call in enumerate(calls):
            cid = self.call_id()
            arguments = json.dumps(call.args)
            if call.observation is None:  # the model cut its JSON short
                arguments = arguments[: len(arguments) * 2 // 3]
            action: dict[str, Any] = {
                "id": self.uid(), "timestamp": self.tick(2, 9) if k == 0 else self.tick(0.001, 0.02),
                "source": "agent",
                "thought": [{"cache_prompt": False, "type": "text", "text": thought}] if k == 0 and thought else [],
                "thinking_blocks": ([{"type": "thinking", "thinking": think, "signature": self.signature()}]
                                    if k == 0 and think else []),
            }
            if call.action is not None:
                action["action"] = call.action
            action.update({
                "tool_name": call.tool, "tool_call_id": cid,
                "tool_call": {"id": cid, "name": call.tool, "arguments": arguments, "origin": "completion"},
                "llm_response_id": response, "security_risk": "LOW", "kind": "ActionEvent",
            })
            self.emit(action)
            if call.observation is None:  # answered at once, before the next call of the batch
                self.emit({"id": self.uid(), "timestamp": self.tick(0.001, 0.01), "source": "agent",
                           "tool_name": call.tool, "tool_call_id": cid, "error": call.error,
                           "classification": {"kind": "unknown", "retryable": False, "user_action": "none"},
                           "kind": "AgentErrorEvent"})
            else:
                answers.append((action, call, cid))
        for action, call, cid in answers:
            self.emit({"id": self.uid(), "timestamp": self.tick(0.2, 6), "source": "environment",
                       "tool_name": call.tool, "tool_call_id": cid, "observation": call.observation,
                       "action_id": action["id"], "kind": "ObservationEvent"})

    def span(self, rel: str, needle: str, before: int = 3, after: int = 10) -> list[int]:
        """A view range around the first line holding ``needle``."""
        lines = self.m.files[rel].split("\n")
        at = next(i for i, line in enumerate(lines, 1) if needle in line)
        return [max(1, at - before), min(len(lines) - 1, at + after)]

    def line_of(self, rel: str, needle: str) -> int:
        return next(i for i, line in enumerate(self.m.files[rel].split("\n"), 1) if needle in line)

    # tool calls

    def sh(self, command: str, out: str | None = None, code: int = 0) -> Call:
        if out is None:
            out, code = self.run(command)
        obs = {
            "content": [{"cache_prompt": False, "type": "text", "text": out}],
            "is_error": False, "command": command, "exit_code": code, "timeout": False,
            "metadata": {"exit_code": code, "pid": -1, "username": "openhands", "hostname": "sandbox",
                         "working_dir": ROOT, "py_interpreter_path": "/usr/local/bin/python", "prefix": "",
                         "suffix": f"\n[The command completed with exit code {code}.]"},
            "kind": "TerminalObservation",
        }
        return Call("terminal", {"command": command}, {"command": command, "is_input": False, "reset": False,
                                                       "kind": "TerminalAction"}, obs)

    def run(self, command: str) -> tuple[str, int]:
        m = self.m
        cmd = command.removeprefix(f"cd {ROOT} && ")
        if cmd.startswith("python -m pytest"):
            verbose = " -v" in cmd or " -vv" in cmd
            kw = re.search(r"-k (\S+)", cmd)
            target = next((a for a in cmd.split()[3:] if a.startswith("tests/")), "")
            return m.pytest(target, verbose, kw.group(1).strip("'\"") if kw else None)
        if cmd.startswith("grep -rn"):
            pattern = re.search(r'"([^"]+)"', cmd).group(1)  # type: ignore[union-attr]
            out = m.grep(pattern, "--include=*.py" in cmd)
            return out, 0 if out else 1
        if cmd.startswith("cat "):
            return m.files[cmd[4:].strip()].rstrip("\n"), 0
        if cmd == "ls -a":
            tops = sorted({r.split("/")[0] for r in m.files} | {".git", ".ruff_cache"} if m.ruff else
                          {r.split("/")[0] for r in m.files} | {".git"})
            return "  ".join([".", ".."] + tops), 0
        if cmd == "git diff":
            return m.diff(), 0
        if cmd.startswith("git diff ") and not cmd.startswith("git diff --"):
            return m.diff(only=cmd.split()[-1]), 0
        if cmd.startswith("find . -name '*.py'"):
            return m.wc(), 0
        if cmd == "git diff --stat":
            return m.diff(stat=True), 0
        if cmd == "git status":
            return m.status(), 0
        if cmd.startswith("git log --oneline"):
            n = int(cmd.rsplit("-", 1)[1])
            return "\n".join(m.commits[:n]), 0
        raise KeyError(f"no scripted output for {command!r}")

    def view(self, rel: str, view_range: list[int] | None = None) -> Call:
        path = self.m.path(rel) if rel else ROOT
        if not rel:
            out = self.m.listing()
        else:
            out = f"Here's the result of running `cat -n` on {path}:\n{self.m.numbered(rel, view_range)}"
        args: dict[str, Any] = {"command": "view", "path": path}
        if view_range:
            args["view_range"] = view_range
        obs = {"content": [{"cache_prompt": False, "type": "text", "text": out}], "is_error": False,
               "command": "view", "path": path, "kind": "FileEditorObservation"}
        return Call("file_editor", args, {**args, "kind": "FileEditorAction"}, obs)

    def edit(self, rel: str, old: str, new: str) -> Call:
        path = self.m.path(rel)
        before = self.m.files[rel]
        ok, out = self.m.replace(rel, old, new)
        args = {"command": "str_replace", "path": path, "old_str": old, "new_str": new}
        obs: dict[str, Any] = {"content": [{"cache_prompt": False, "type": "text", "text": out}], "is_error": not ok,
                               "command": "str_replace", "path": path}
        if ok:
            obs.update({"prev_exist": True, "old_content": before, "new_content": self.m.files[rel]})
        obs["kind"] = "FileEditorObservation"
        return Call("file_editor", args, {**args, "kind": "FileEditorAction"}, obs)

    def create(self, rel: str, text: str) -> Call:
        path = self.m.path(rel)
        self.m.files[rel] = text
        args = {"command": "create", "path": path, "file_text": text}
        obs = {"content": [{"cache_prompt": False, "type": "text", "text": f"File created successfully at: {path}"}],
               "is_error": False, "command": "create", "path": path, "prev_exist": False, "new_content": text,
               "kind": "FileEditorObservation"}
        return Call("file_editor", args, {**args, "kind": "FileEditorAction"}, obs)

    def browse(self, url: str, text: str) -> Call:
        # The SDK's BrowserObservation has no url or title (it forbids other fields): the
        # page text says them.
        obs = {"content": [{"cache_prompt": False, "type": "text", "text": text}], "is_error": False,
               "kind": "BrowserObservation"}
        return Call("browser", {"url": url}, {"url": url, "new_tab": False, "kind": "BrowserNavigateAction"}, obs)

    def plan(self, tasks: list[tuple[str, str]]) -> Call:
        task_list = [{"title": t, "notes": "", "status": s} for t, s in tasks]
        lines = [f"{i}. [{s}] {t}" for i, (t, s) in enumerate(tasks, 1)]
        out = f"Task list has been updated with {len(tasks)} items.\n" + "\n".join(lines)
        obs = {"content": [{"cache_prompt": False, "type": "text", "text": out}], "is_error": False,
               "command": "plan", "task_list": task_list, "kind": "TaskTrackerObservation"}
        args = {"command": "plan", "task_list": task_list}
        return Call("task_tracker", args, {**args, "kind": "TaskTrackerAction"}, obs)

    def broken(self, tool: str, args: dict[str, Any]) -> Call:
        text = json.dumps(args)
        cut = text[: len(text) * 2 // 3]
        return Call(tool, args, None, None,
                    error=f"Error validating arguments for tool '{tool}': the arguments are not valid JSON "
                          f"(Unterminated string starting at: line 1 column {len(cut) - 40}): {cut}")


# --- the story ---------------------------------------------------------------------------------

TB_MILLIS = '''\
    def test_parse_datetime_milliseconds_utc():
        # What JavaScript's Date.toISOString() sends us.
>       value = parse_datetime("2024-03-10T12:30:00.250Z")

tests/test_parsing.py:50: 
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ 

text = '2024-03-10T12:30:00.250'

    def parse_datetime(text: str) -> datetime:
        """The date and time in ``text`` (ISO 8601), aware if it has an offset."""
        text = text.strip().replace(" ", "T", 1)
        body, tz = _split_offset(text)
        for fmt in DATETIME_FORMATS:
            try:
                value = datetime.strptime(body, fmt)
            except ValueError:
                continue
            return value.replace(tzinfo=tz) if tz is not None else value
>       raise DateParseError(f"not a date and time: {text!r}")
E       datekit.parsing.DateParseError: not a date and time: '2024-03-10T12:30:00.250Z'

datekit/parsing.py:49: DateParseError'''
SUM_MILLIS = "datekit.parsing.DateParseError: not a date and time: '2024-03-10T12:30:00.250Z'"

TB_REQUIRES_TIME = '''\
    def test_parse_datetime_requires_time():
>       with pytest.raises(DateParseError):
E       Failed: DID NOT RAISE <class 'datekit.parsing.DateParseError'>

tests/test_parsing.py:56: Failed'''
TB_WEEK = '''\
    def test_parse_datetime_rejects_week_dates():
>       with pytest.raises(DateParseError):
E       Failed: DID NOT RAISE <class 'datekit.parsing.DateParseError'>

tests/test_parsing.py:61: Failed'''
SUM_NO_RAISE = "Failed: DID NOT RAISE <class 'datekit.parsing.DateParseError'>"

TB_LOCAL_DATE = '''\
    def test_parse_date_from_timestamp_keeps_written_date():
        # 23:30 in New York is already the 11th in UTC; the caller wrote the 10th.
>       assert parse_date("2024-03-10T23:30:00-05:00") == date(2024, 3, 10)
E       AssertionError: assert datetime.date(2024, 3, 11) == datetime.date(2024, 3, 10)
E        +  where datetime.date(2024, 3, 11) = parse_date('2024-03-10T23:30:00-05:00')
E        +  and   datetime.date(2024, 3, 10) = date(2024, 3, 10)

tests/test_parsing.py:74: AssertionError'''
SUM_LOCAL_DATE = "AssertionError: assert datetime.date(2024, 3, 11) == datetime.date(2024, 3, 10)"

TB_NOON = '''\
text = '12:15 am', expected = datetime.time(0, 15)

    @pytest.mark.parametrize(
        "text, expected",
        [
            ("14:30", time(14, 30)),
            ("09:05:30", time(9, 5, 30)),
            ("2:30 pm", time(14, 30)),
            ("2:30PM", time(14, 30)),
            ("12:15 am", time(0, 15)),
            ("12:15 pm", time(12, 15)),
        ],
    )
    def test_parse_time(text, expected):
>       assert parse_time(text) == expected
E       AssertionError: assert datetime.time(12, 15) == datetime.time(0, 15)
E        +  where datetime.time(12, 15) = parse_time('12:15 am')

tests/test_parsing.py:96: AssertionError'''
TB_NOON_PM = TB_NOON.replace("'12:15 am', expected = datetime.time(0, 15)", "'12:15 pm', expected = datetime.time(12, 15)") \
    .replace("assert datetime.time(12, 15) == datetime.time(0, 15)", "assert datetime.time(0, 15) == datetime.time(12, 15)") \
    .replace("where datetime.time(12, 15) = parse_time('12:15 am')", "where datetime.time(0, 15) = parse_time('12:15 pm')")

PAGE = """\
datetime — Basic date and time types (Python 3.11 documentation)

classmethod datetime.fromisoformat(date_string)

Builds a datetime from a string in (most) ISO 8601 forms.

Since Python 3.11 the method understands nearly every ISO 8601 variant, including:
- a trailing "Z" meaning UTC, and offsets written "+hh:mm", "+hhmm" or "+hh";
- any number of digits of fractional seconds (extra precision beyond microseconds is cut off);
- week dates such as "2011-W01-2" and the basic form without separators ("20111104");
- a date alone, which gives midnight.

Up to Python 3.10 it accepted only the strings that date.isoformat() and datetime.isoformat()
produce: no "Z", and exactly 3 or 6 fractional digits.

Ordinal dates ("2024-070") are not supported in any version.

Examples (3.11):
  >>> datetime.fromisoformat("2011-11-04")
  datetime.datetime(2011, 11, 4, 0, 0)
  >>> datetime.fromisoformat("2011-11-04T00:05:23Z")
  datetime.datetime(2011, 11, 4, 0, 5, 23, tzinfo=datetime.timezone.utc)
  >>> datetime.fromisoformat("2011-W01-2T00:05:23.283")
  datetime.datetime(2011, 1, 4, 0, 5, 23, 283000)

See also: datetime.strptime() with the %f directive, which accepts 1 to 6 fractional digits
and works in every supported version.
"""

PIP_INSTALL = """\
Obtaining file:///workspace/datekit
  Installing build dependencies ... done
  Checking if build backend supports build_editable ... done
  Getting requirements to build editable ... done
  Preparing editable metadata (pyproject.toml) ... done
Collecting pytest>=7 (from datekit==0.4.1)
  Using cached pytest-8.3.3-py3-none-any.whl (342 kB)
Collecting iniconfig (from pytest>=7->datekit==0.4.1)
  Using cached iniconfig-2.0.0-py3-none-any.whl (5.9 kB)
Collecting packaging (from pytest>=7->datekit==0.4.1)
  Using cached packaging-24.1-py3-none-any.whl (53 kB)
Collecting pluggy<2,>=1.5 (from pytest>=7->datekit==0.4.1)
  Using cached pluggy-1.5.0-py3-none-any.whl (20 kB)
Building wheels for collected packages: datekit
  Building editable for datekit (pyproject.toml) ... done
  Created wheel for datekit: filename=datekit-0.4.1-0.editable-py3-none-any.whl size=2841
Successfully built datekit
Installing collected packages: pluggy, packaging, iniconfig, pytest, datekit
Successfully installed datekit-0.4.1 iniconfig-2.0.0 packaging-24.1 pluggy-1.5.0 pytest-8.3.3"""

def tell(s: Story) -> None:  # noqa: C901 - a story is long
    m = s.m
    t = s.turn
    P = "datekit/parsing.py"
    TP = "tests/test_parsing.py"

    s.system()
    s.user(
        "Our CI went red after the frontend started sending timestamps from JavaScript. "
        "`tests/test_parsing.py::test_parse_datetime_milliseconds_utc` fails: parse_datetime "
        "chokes on strings like `2024-03-10T12:30:00.250Z`. The repo is in /workspace/datekit. "
        "Please find out why and fix it. We still support Python 3.9, and please keep the public "
        "API as it is."
    )

    # --- explore -----------------------------------------------------------------------------
    t("Let me look at the repository layout first.", s.view(""))
    t("A small package. I'll read the README and the project settings together.",
      s.view("README.md"), s.view("pyproject.toml"))
    t("", s.sh(f"cd {ROOT} && ls -a"))
    t("", s.sh(f"cd {ROOT} && find . -name '*.py' -not -path './.git/*' | sort | xargs wc -l"))
    t("There is a CI workflow; it tells me which Python versions matter.", s.sh(f"cd {ROOT} && cat .github/workflows/ci.yml"))
    t("CI tests 3.9 to 3.12 and runs ruff first. Recent history:", s.sh(f"cd {ROOT} && git log --oneline -8"))
    t("", s.sh("python --version && pip list 2>/dev/null | grep -i -E 'pytest|datekit|ruff'",
               "Python 3.11.7\npytest                  8.3.3"))
    t("I'll keep a short plan.", s.plan([
        ("Reproduce the failing test", "in_progress"),
        ("Find why fractional seconds are rejected", "todo"),
        ("Fix parse_datetime without changing its API (Python 3.9+)", "todo"),
        ("Run the whole suite", "todo"),
    ]))
    t("Now let me run the test suite to see the failure.", s.sh(f"cd {ROOT} && python -m pytest -q"))
    t("The package is not installed in this environment, so collection fails. I'll install it in "
      "editable mode with its test extra.",
      s.sh(f"cd {ROOT} && pip install -e '.[test]'", PIP_INSTALL))
    m.installed = True
    m.failing[f"{TP}::test_parse_datetime_milliseconds_utc"] = (TB_MILLIS, SUM_MILLIS)
    t("", s.sh(f"cd {ROOT} && python -c 'import datekit; print(datekit.__file__, datekit.__version__)'",
               "/workspace/datekit/datekit/__init__.py 0.4.1"))
    t("", s.sh(f"cd {ROOT} && python -m pytest -q"),
      think="Installed. Running the suite again should show the real failure: one test about milliseconds. "
            "The error will tell me whether it is the offset handling or the time format.")
    t("One failure, the one the user named. Let me run the parsing tests verbosely to see what passes "
      "around it.", s.sh(f"cd {ROOT} && python -m pytest -v {TP}"))
    t("Now the parser and its tests side by side.", s.view(P), s.view(TP))
    t("`DATETIME_FORMATS` only has seconds and minutes; nothing handles a fractional part. Let me check how "
      "`_split_offset` treats the input, to be sure the Z is stripped correctly.",
      s.sh(f"cd {ROOT} && python -c \"from datekit.parsing import _split_offset; "
           "print(_split_offset('2024-03-10T12:30:00.250Z'))\"",
           "('2024-03-10T12:30:00.250', datetime.timezone.utc)"))
    t("The offset is split off fine; the remaining body has `.250`, which no format accepts.",
      s.sh(f"cd {ROOT} && python -c \"from datetime import datetime; "
           "print(datetime.strptime('2024-03-10T12:30:00.250', '%Y-%m-%dT%H:%M:%S'))\"",
           "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n"
           "  File \"/usr/lib/python3.11/_strptime.py\", line 568, in _strptime_datetime\n"
           "    tt, fraction, gmtoff_fraction = _strptime(data_string, format)\n"
           "                                    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
           "  File \"/usr/lib/python3.11/_strptime.py\", line 352, in _strptime\n"
           "    raise ValueError(\"unconverted data remains: %s\" %\n"
           "ValueError: unconverted data remains: .250", 1))
    t("Who else calls these functions? The CLI may depend on how parse_datetime fails.",
      s.sh(f"cd {ROOT} && grep -rn \"parse_datetime\\|parse_date\" --include=*.py ."))
    t("Where else are strptime formats or DateParseError used?",
      s.sh(f"cd {ROOT} && grep -rn \"strptime\" --include=*.py ."),
      s.sh(f"cd {ROOT} && grep -rn \"DateParseError\" --include=*.py ."))
    t("", s.view("datekit/cli.py"))
    t("The CLI relies on parse_datetime raising DateParseError for a date without a time, then falls back "
      "to parse_date. Whatever I change must keep that. Let me see the remaining modules and tests too.",
      s.view("datekit/__init__.py"), s.view("tests/test_cli.py"), s.view("datekit/formatting.py"))
    t("", s.view("tests/test_formatting.py"))
    t("When were offsets last touched?", s.sh(f"cd {ROOT} && git log --oneline -3 -- {P}",
               "9c41e07 Release 0.4.1\nb6a1d94 parse_datetime: accept offsets without a colon\n"
               "2f8c0aa Release 0.4.0"))
    t("", s.sh(f"cd {ROOT} && git show --stat b6a1d94",
               "commit b6a1d94e51c07d2f3a8e9b0c4d6f1a2b3c4d5e6f\nAuthor: Mira Okafor <mira@example.org>\n"
               "Date:   Mon Sep 29 10:14:52 2026 +0200\n\n    parse_datetime: accept offsets without a colon\n\n"
               "    Some of our partners write -0500 instead of -05:00.\n\n"
               " datekit/parsing.py    | 4 ++--\n tests/test_parsing.py | 5 +++++\n"
               " 2 files changed, 7 insertions(+), 2 deletions(-)"))
    t("", s.plan([
        ("Reproduce the failing test", "done"),
        ("Find why fractional seconds are rejected", "done"),
        ("Fix parse_datetime without changing its API (Python 3.9+)", "in_progress"),
        ("Run the whole suite", "todo"),
    ]))
    t("The standard library may already parse these strings. Let me check what `datetime.fromisoformat` "
      "accepts in current Python.",
      s.browse("https://docs.python.org/3/library/datetime.html#datetime.datetime.fromisoformat", PAGE),
      think="fromisoformat could replace the strptime loop entirely, but the user still supports 3.9, where "
            "it rejects 'Z' and odd fraction lengths. Let me read what changed in 3.11 before deciding.")
    t("Let me see how fromisoformat behaves here on the inputs from the tests.",
      s.sh(f"cd {ROOT} && python - <<'EOF'\nfrom datetime import datetime\n"
           "for s in ['2024-03-10T12:30:00.250Z', '2024-03-10T14:30-0500', '2024-03-10', '2024-W10-7T12:00']:\n"
           "    print(s, '->', repr(datetime.fromisoformat(s)))\nEOF",
           "2024-03-10T12:30:00.250Z -> datetime.datetime(2024, 3, 10, 12, 30, 0, 250000, tzinfo=datetime.timezone.utc)\n"
           "2024-03-10T14:30-0500 -> datetime.datetime(2024, 3, 10, 14, 30, tzinfo=datetime.timezone(datetime.timedelta(days=-1, seconds=68400)))\n"
           "2024-03-10 -> datetime.datetime(2024, 3, 10, 0, 0)\n"
           "2024-W10-7T12:00 -> datetime.datetime(2024, 3, 10, 12, 0)"))
    t("Is there a Python 3.9 here to compare with?", s.sh("ls /usr/bin/python3* /usr/local/bin/python3* 2>/dev/null; python3.9 --version",
               "/usr/bin/python3\n/usr/bin/python3.11\n/usr/local/bin/python3\n/usr/local/bin/python3.11\n"
               "bash: python3.9: command not found", 127))
    t("Only 3.11. On 3.11 fromisoformat handles all of these; I'll try using it first and keep the strptime "
      "loop as the fallback, then see what the tests say.",
      s.edit(P,
             "    text = text.strip().replace(\" \", \"T\", 1)\n    body, tz = _split_offset(text)\n"
             "    for fmt in DATETIME_FORMATS:\n        try:\n            value = datetime.strptime(body, fmt)\n"
             "        except ValueError:\n            continue\n        return value.replace(tzinfo=tz) if tz else value",
             "    text = text.strip().replace(\" \", \"T\", 1)\n    try:\n        return datetime.fromisoformat(text)\n"
             "    except ValueError:\n        pass\n    body, tz = _split_offset(text)\n"
             "    for fmt in DATETIME_FORMATS:\n        try:\n            value = datetime.strptime(body, fmt)\n"
             "        except ValueError:\n            continue\n        return value.replace(tzinfo=tz) if tz else value"))
    t("The replacement failed: the last line differs from what I typed. Let me view the exact text.",
      s.view(P, s.span(P, "def parse_datetime", 0, 11)))
    t("",
      s.edit(P,
             "    text = text.strip().replace(\" \", \"T\", 1)\n    body, tz = _split_offset(text)\n",
             "    text = text.strip().replace(\" \", \"T\", 1)\n    try:\n        return datetime.fromisoformat(text)\n"
             "    except ValueError:\n        pass\n    body, tz = _split_offset(text)\n"))
    del m.failing[f"{TP}::test_parse_datetime_milliseconds_utc"]
    m.failing[f"{TP}::test_parse_datetime_requires_time"] = (TB_REQUIRES_TIME, SUM_NO_RAISE)
    m.failing[f"{TP}::test_parse_datetime_rejects_week_dates"] = (TB_WEEK, SUM_NO_RAISE)
    t("", s.sh(f"cd {ROOT} && python -m pytest -q {TP}"))
    t("", s.sh(f"cd {ROOT} && python -m pytest -q tests/test_cli.py"))
    t("The milliseconds test passes now, but fromisoformat accepts too much on 3.11: a bare date and week "
      "dates, which the tests reject on purpose (and the CLI's fallback depends on the date-only case). On 3.9 "
      "it would also reject the Z again. fromisoformat is the wrong tool here; I'll undo it and teach the "
      "strptime loop about fractional seconds instead.",
      s.broken("file_editor", {"command": "str_replace", "path": m.path(P),
                               "old_str": "    try:\n        return datetime.fromisoformat(text)\n    except ValueError:\n        pass\n",
                               "new_str": ""}),
      think="Two new failures, both DID NOT RAISE: requires_time and rejects_week_dates. fromisoformat in 3.11 "
            "returns midnight for '2024-03-10' and understands ISO week dates. Both are behaviour changes the "
            "tests forbid, and cli.main uses the DateParseError on date-only input to fall back to parse_date. "
            "And on 3.9 the Z suffix would fail anyway. So: revert, and add %f formats: strptime's %f takes 1 to "
            "6 digits in every version.")
    t("My last call was cut off. Retrying the revert.",
      s.edit(P, "    try:\n        return datetime.fromisoformat(text)\n    except ValueError:\n        pass\n", ""))
    del m.failing[f"{TP}::test_parse_datetime_requires_time"]
    del m.failing[f"{TP}::test_parse_datetime_rejects_week_dates"]
    m.failing[f"{TP}::test_parse_datetime_milliseconds_utc"] = (TB_MILLIS, SUM_MILLIS)
    t("Back to the original; the suite should show only the original failure again.",
      s.sh(f"cd {ROOT} && python -m pytest -q"))
    t("Does strptime's %f accept three digits on this Python? (It has since 2.6, but let me be sure.)",
      s.sh(f"cd {ROOT} && python -c \"from datetime import datetime; "
           "print(repr(datetime.strptime('2024-03-10T12:30:00.250', '%Y-%m-%dT%H:%M:%S.%f')))\"",
           "datetime.datetime(2024, 3, 10, 12, 30, 0, 250000)"))
    t("Now the fractional formats. They go first, since they are the longest.",
      s.edit(P,
             'DATETIME_FORMATS = ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M")',
             '# %f takes 1 to 6 digits: milliseconds (JavaScript) and microseconds (Python).\n'
             'DATETIME_FORMATS = ("%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M")'))
    del m.failing[f"{TP}::test_parse_datetime_milliseconds_utc"]
    t("", s.sh(f"cd {ROOT} && python -m pytest -q {TP}::test_parse_datetime_milliseconds_utc"))
    t("", s.sh(f"cd {ROOT} && python -m pytest -q {TP}"))
    t("All parsing tests pass. I'll check a few edge cases by hand: microseconds with an offset, one digit, "
      "and seven digits (which should be rejected).",
      s.sh(f"cd {ROOT} && python - <<'EOF'\nfrom datekit import parse_datetime\n"
           "for s in ['2024-03-10T12:30:00.123456+01:00', '2024-03-10 12:30:00.5', '2024-03-10T12:30:00.1234567Z']:\n"
           "    try:\n        print(s, '->', repr(parse_datetime(s)))\n"
           "    except Exception as e:\n        print(s, '->', type(e).__name__, e)\nEOF",
           "2024-03-10T12:30:00.123456+01:00 -> datetime.datetime(2024, 3, 10, 12, 30, 0, 123456, tzinfo=datetime.timezone(datetime.timedelta(seconds=3600)))\n"
           "2024-03-10 12:30:00.5 -> datetime.datetime(2024, 3, 10, 12, 30, 0, 500000)\n"
           "2024-03-10T12:30:00.1234567Z -> DateParseError not a date and time: '2024-03-10T12:30:00.1234567Z'"))
    t("What about a fraction with a compact offset, and a fraction without seconds (which is not ISO)?",
      s.sh(f"cd {ROOT} && python - <<'EOF'\nfrom datekit import parse_datetime\n"
           "for s in ['2024-03-10T12:30:00.25-0500', '2024-03-10T12:30.5']:\n"
           "    try:\n        print(s, '->', repr(parse_datetime(s)))\n"
           "    except Exception as e:\n        print(s, '->', type(e).__name__, e)\nEOF",
           "2024-03-10T12:30:00.25-0500 -> datetime.datetime(2024, 3, 10, 12, 30, 0, 250000, tzinfo=datetime.timezone(datetime.timedelta(days=-1, seconds=68400)))\n"
           "2024-03-10T12:30.5 -> DateParseError not a date and time: '2024-03-10T12:30.5'"))
    t("Good. I'll add tests for those cases next to the existing one.",
      s.edit(TP,
             "    assert value == datetime(2024, 3, 10, 12, 30, 0, 250000, tzinfo=timezone.utc)\n",
             "    assert value == datetime(2024, 3, 10, 12, 30, 0, 250000, tzinfo=timezone.utc)\n\n\n"
             "def test_parse_datetime_microseconds_with_offset():\n"
             "    value = parse_datetime(\"2024-03-10T12:30:00.123456+01:00\")\n"
             "    assert value.microsecond == 123456\n"
             "    assert value.utcoffset() == timedelta(hours=1)\n\n\n"
             "def test_parse_datetime_rejects_seven_fraction_digits():\n"
             "    with pytest.raises(DateParseError):\n"
             "        parse_datetime(\"2024-03-10T12:30:00.1234567Z\")\n"))
    m.tests[TP][-2:-2] = ["test_parse_datetime_microseconds_with_offset",
                          "test_parse_datetime_rejects_seven_fraction_digits"]
    t("", s.sh(f"cd {ROOT} && python -m pytest -q -k fraction {TP}"))
    t("Let me re-read the function as it stands now.", s.view(P, s.span(P, "DATETIME_FORMATS", 1, 3)),
      s.view(P, s.span(P, "def parse_datetime", 0, 11)))
    t("Now the whole suite, verbosely, to be sure nothing else moved.", s.sh(f"cd {ROOT} && python -m pytest -v"))
    t("Let me update the README's list of accepted forms.",
      s.edit("README.md", "minutes or seconds, and an optional",
             "minutes, seconds or fractions of a second, and an optional"))
    t("The README has doctest-style examples; let me make sure they still hold.",
      s.sh(f"cd {ROOT} && python -m doctest -v README.md | tail -4",
           "1 items passed all tests:\n   3 tests in README.md\n3 tests in 1 items.\n3 passed and 0 failed.\nTest passed."))
    t("", s.sh(f"cd {ROOT} && git diff"))
    t("", s.plan([
        ("Reproduce the failing test", "done"),
        ("Find why fractional seconds are rejected", "done"),
        ("Fix parse_datetime without changing its API (Python 3.9+)", "done"),
        ("Run the whole suite", "done"),
    ]))
    s.say(
        "Fixed. `parse_datetime` only knew the formats `…T%H:%M:%S` and `…T%H:%M`, so the fractional part of "
        "`2024-03-10T12:30:00.250Z` was left over and the parse failed.\n\n"
        "Changes:\n"
        "- `datekit/parsing.py`: added `%Y-%m-%dT%H:%M:%S.%f` to `DATETIME_FORMATS` (1 to 6 fractional digits; "
        "works on Python 3.9+).\n"
        "- `tests/test_parsing.py`: two new tests (microseconds with an offset; 7 digits are rejected).\n"
        "- `README.md`: mentions fractions of a second.\n\n"
        "I tried `datetime.fromisoformat` first, but on 3.11 it also accepts a bare date and ISO week dates "
        "(two tests forbid those, and the CLI relies on the date-only case raising), and on 3.9 it rejects `Z`. "
        "So I kept the strptime approach. "
        f"The whole suite passes ({m.test_count()} tests). Only Python 3.11 is installed "
        "here, so CI will be the first to run it on 3.9."
    )

    # --- follow-up 1: parse_date accepts timestamps --------------------------------------------
    s.user("Thanks! Could you also make `parse_date` accept full timestamps like that one and return just "
           "the date part? A colleague keeps passing them in and gets an error.")
    t("Let me look at parse_date again.", s.view(P, s.span(P, "def parse_date", 1, 10)))
    t("", s.sh(f"cd {ROOT} && python -c \"from datekit import parse_date; print(parse_date('2024-03-10T12:30:00.250Z'))\"",
               "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n"
               f"  File \"/workspace/datekit/datekit/parsing.py\", line {s.line_of(P, 'not a date: ')}, in parse_date\n"
               "    raise DateParseError(f\"not a date: {text!r}\")\n"
               "datekit.parsing.DateParseError: not a date: '2024-03-10T12:30:00.250Z'", 1),
      think="parse_date should fall back to parse_datetime when the text looks like a timestamp. Which date "
            "should an aware timestamp give: as written, or in UTC? Converting to UTC seems the most "
            "consistent choice; I'll go with that and write tests for both shapes.")
    t("I'll make parse_date fall back to parse_datetime for timestamps, normalising to UTC.",
      s.edit(P,
             "            continue\n    raise DateParseError(f\"not a date: {text!r}\")",
             "            continue\n    if \"T\" in text or \" \" in text:\n        try:\n"
             "            value = parse_datetime(text)\n        except DateParseError:\n            pass\n"
             "        else:\n            if value.tzinfo is not None:\n"
             "                value = value.astimezone(timezone.utc)\n            return value.date()\n"
             "    raise DateParseError(f\"not a date: {text!r}\")"))
    t("And tests for it.",
      s.edit(TP,
             "def test_parse_date_rejects_nonsense():",
             "def test_parse_date_from_timestamp():\n"
             "    assert parse_date(\"2024-03-10T12:30:00.250Z\") == date(2024, 3, 10)\n"
             "    assert parse_date(\"2024-03-10 08:00\") == date(2024, 3, 10)\n\n\n"
             "def test_parse_date_from_timestamp_keeps_written_date():\n"
             "    # 23:30 in New York is already the 11th in UTC; the caller wrote the 10th.\n"
             "    assert parse_date(\"2024-03-10T23:30:00-05:00\") == date(2024, 3, 10)\n\n\n"
             "def test_parse_date_rejects_nonsense():"))
    m.tests[TP][5:5] = ["test_parse_date_from_timestamp", "test_parse_date_from_timestamp_keeps_written_date"]
    m.failing[f"{TP}::test_parse_date_from_timestamp_keeps_written_date"] = (TB_LOCAL_DATE, SUM_LOCAL_DATE)
    t("", s.sh(f"cd {ROOT} && python -m pytest -q {TP}"))
    t("The test I wrote from the user's point of view disagrees with my UTC conversion: someone who writes "
      "`2024-03-10T23:30-05:00` means the 10th. The date as written is the right answer, so I'll drop the "
      "conversion.",
      s.view(P, s.span(P, "def parse_date", 1, 18)),
      think="Which is right? A caller who writes a local time with its offset thinks of that calendar day. "
            "parse_date returns a naive date, so converting to UTC would silently move evening times in the "
            "Americas to the next day. The test encodes the user's expectation; the code was wrong.")
    t("",
      s.edit(P,
             "        else:\n            if value.tzinfo is not None:\n"
             "                value = value.astimezone(timezone.utc)\n            return value.date()\n",
             "        else:\n            return value.date()  # the date as written, whatever the offset\n"))
    del m.failing[f"{TP}::test_parse_date_from_timestamp_keeps_written_date"]
    t("", s.sh(f"cd {ROOT} && python -m pytest -q {TP}"))
    t("Let me view the new tests once more to be sure they say what I mean.",
      s.view(TP, s.span(TP, "def test_parse_date_from_timestamp", 0, 9)))
    t("Are a date-only string and garbage still handled as before?",
      s.sh(f"cd {ROOT} && python - <<'EOF'\nfrom datekit import parse_date\n"
           "for s in ['2024-03-10', '2024-03-10T25:00', 'tomorrow at noon']:\n"
           "    try:\n        print(repr(s), '->', parse_date(s))\n"
           "    except Exception as e:\n        print(repr(s), '->', type(e).__name__, e)\nEOF",
           "'2024-03-10' -> 2024-03-10\n"
           "'2024-03-10T25:00' -> DateParseError not a date: '2024-03-10T25:00'\n"
           "'tomorrow at noon' -> DateParseError not a date: 'tomorrow at noon'"))
    t("The CLI tries parse_datetime first, so its behaviour is unchanged, but let me run its tests and try "
      "it by hand.",
      s.sh(f"cd {ROOT} && python -m pytest -q tests/test_cli.py"),
      s.sh(f"cd {ROOT} && datekit parse 2024-03-10T12:30:00.250Z && datekit parse 10.03.2024",
           "2024-03-10T12:30:00.250000+00:00\n2024-03-10"))
    t("Where in the README are the accepted forms listed?", s.view("README.md", [1, 16]))
    t("I'll document the new behaviour in the docstring and the README.",
      s.edit(P,
             '    """The date in ``text``: ISO, day/month/year with / or ., or compact YYYYMMDD."""',
             '    """The date in ``text``: ISO, day/month/year with / or ., or compact YYYYMMDD.\n\n'
             '    A full timestamp (anything parse_datetime reads) gives its date as written.\n    """'),
      s.edit("README.md", "Accepted dates: `2024-03-10`, `10/03/2024`, `10.03.2024`, `20240310`.",
             "Accepted dates: `2024-03-10`, `10/03/2024`, `10.03.2024`, `20240310`, and any\n"
             "date-time below (its date as written)."))
    t("", s.sh(f"cd {ROOT} && python -m pytest -q"))
    s.say(
        "Done: `parse_date` now accepts anything `parse_datetime` reads and returns its date **as written** "
        "(`2024-03-10T23:30:00-05:00` gives the 10th, not the 11th in UTC; I first converted to UTC and "
        "changed my mind when the test I wrote from a user's point of view failed). Docstring and README "
        f"updated, two new tests, {m.test_count()} tests pass."
    )

    # --- follow-up 2: linter and changelog -----------------------------------------------------
    s.user("Please also run the linter (we use ruff) and add an entry to CHANGELOG.md.")
    t("", s.sh(f"cd {ROOT} && ruff check .", "bash: ruff: command not found", 127))
    t("Is it perhaps available as a module or through pipx?",
      s.sh("python -m ruff --version; pipx --version", "/usr/local/bin/python: No module named ruff\n"
           "bash: pipx: command not found", 127))
    t("ruff is not installed here; I'll install it.",
      s.sh("pip install ruff", "Collecting ruff\n  Downloading ruff-0.7.4-py3-none-manylinux_2_17_x86_64."
                               "manylinux2014_x86_64.whl (11.0 MB)\nInstalling collected packages: ruff\n"
                               "Successfully installed ruff-0.7.4"))
    m.ruff = True
    t("", s.sh("ruff --version", "ruff 0.7.4"))
    long_line = s.line_of(P, 'DATETIME_FORMATS = ("%Y')
    t("", s.sh(f"cd {ROOT} && ruff check .",
               f"{P}:{long_line}:89: E501 Line too long (96 > 88)\n"
               "   |\n"
               f"{long_line - 1:2} | # %f takes 1 to 6 digits: milliseconds (JavaScript) and microseconds (Python).\n"
               f"{long_line:2} | DATETIME_FORMATS = (\"%Y-%m-%dT%H:%M:%S.%f\", \"%Y-%m-%dT%H:%M:%S\", \"%Y-%m-%dT%H:%M\")\n"
               "   |                                                                                         ^^^^^^^^ E501\n"
               "   |\n\n"
               "Found 1 error.", 1))
    t("One finding, and it is my line. I'll wrap the tuple.",
      s.edit(P,
             'DATETIME_FORMATS = ("%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M")',
             'DATETIME_FORMATS = (\n    "%Y-%m-%dT%H:%M:%S.%f",\n    "%Y-%m-%dT%H:%M:%S",\n    "%Y-%m-%dT%H:%M",\n)'))
    t("", s.sh(f"cd {ROOT} && ruff check .", "All checks passed!"))
    t("CI does not run the formatter, but let me see whether the files I touched are formatted.",
      s.sh(f"cd {ROOT} && ruff format --check .",
           "Would reformat: tests/test_formatting.py\n1 file would be reformatted, 8 files already formatted", 1))
    t("Only tests/test_formatting.py, which I have not touched (its parametrize list is one long line). "
      "Reformatting it is outside this task; I'll mention it. Let me double-check I did not change it.",
      s.sh(f"cd {ROOT} && git diff --stat"))
    t("Right. Now the changelog.", s.view("CHANGELOG.md"))
    t("",
      s.edit("CHANGELOG.md", "# Changelog\n\n",
             "# Changelog\n\n## Unreleased\n"
             "- `parse_datetime` accepts fractions of a second (`2024-03-10T12:30:00.250Z`, as sent by\n"
             "  JavaScript's `toISOString()`); 1 to 6 digits.\n"
             "- `parse_date` accepts full timestamps and returns their date as written.\n\n"))
    t("", s.sh(f"cd {ROOT} && python -m pytest -q"))
    s.say(
        "ruff (0.7.4, installed; it was missing here) found one problem, a long line I had introduced in "
        "`parsing.py`; fixed, `ruff check .` is clean. `ruff format --check` would reformat "
        "`tests/test_formatting.py`, which predates my changes and which CI does not check, so I left it. "
        f"CHANGELOG.md has an Unreleased section with both changes. {m.test_count()} tests pass."
    )

    # --- follow-up 3: who relies on the old behaviour? -----------------------------------------
    s.user("One question: does anything else in the repo rely on the old behaviour of parse_datetime? The CLI maybe?")
    t("Let me find every caller.", s.sh(f"cd {ROOT} && grep -rn \"parse_datetime\" --include=*.py ."),
      s.sh(f"cd {ROOT} && git log -S parse_datetime --oneline",
           "e07b3f2 cli: fall back to parse_date for date-only input\nb6a1d94 parse_datetime: accept offsets "
           "without a colon\n5a0c9e1 parse_datetime with offsets\n1b2d3f4 Initial commit"))
    t("e07b3f2 is the commit that made the CLI depend on the date-only error. Let me read it.",
      s.sh(f"cd {ROOT} && git show e07b3f2 --format='%h %s%n%n%b' -- datekit/cli.py | head -30",
           "e07b3f2 cli: fall back to parse_date for date-only input\n\n"
           "parse_datetime raises for '2024-03-10', so `datekit parse 2024-03-10` used to\n"
           "fail. Try parse_date when parse_datetime gives up.\n\n"
           "diff --git a/datekit/cli.py b/datekit/cli.py\n--- a/datekit/cli.py\n+++ b/datekit/cli.py\n"
           "@@ -16,7 +16,11 @@ def main(argv: list[str] | None = None) -> int:\n"
           "     args = parser.parse_args(argv)\n"
           "-    value = parse_datetime(args.text)\n"
           "+    try:\n+        value = parse_datetime(args.text)\n+    except DateParseError:\n"
           "+        try:\n+            value = parse_date(args.text)\n"
           "+        except DateParseError as e:\n+            print(f\"datekit: {e}\", file=sys.stderr)\n"
           "+            return 2\n     print(value.isoformat())\n     return 0"))
    t("Only the CLI and the tests. The CLI relies on parse_datetime raising for a date alone; let me confirm "
      "that still holds and try the new forms through it.",
      s.sh(f"cd {ROOT} && datekit parse 2024-03-10; echo \"exit $?\"", "2024-03-10\nexit 0"),
      s.sh(f"cd {ROOT} && datekit parse '2024-03-10 12:30:00.5'; echo \"exit $?\"", "2024-03-10T12:30:00.500000\nexit 0"),
      s.sh(f"cd {ROOT} && datekit parse 'soon'; echo \"exit $?\"", "datekit: not a date: 'soon'\nexit 2"))
    t("Is the package used from anywhere else on this machine, say a sibling project?",
      s.sh("grep -rln \"from datekit\\|import datekit\" /workspace --include=*.py | grep -v '^/workspace/datekit/'",
           "", 1))
    t("All three behave as before or better, and nothing outside the repo imports it. I'll pin the CLI "
      "behaviour for fractional input with a test.",
      s.edit("tests/test_cli.py", "def test_parse_garbage(capsys):",
             "def test_parse_fractional_timestamp(capsys):\n"
             "    assert main([\"parse\", \"2024-03-10T12:30:00.250Z\"]) == 0\n"
             "    assert capsys.readouterr().out == \"2024-03-10T12:30:00.250000+00:00\\n\"\n\n\n"
             "def test_parse_garbage(capsys):"))
    m.tests["tests/test_cli.py"][2:2] = ["test_parse_fractional_timestamp"]
    t("", s.sh(f"cd {ROOT} && python -m pytest -q tests/test_cli.py"))
    s.say(
        "Only `datekit/cli.py` calls `parse_datetime` outside the tests, and nothing else under /workspace "
        "imports datekit. The CLI depends on one property: a date without a time must raise `DateParseError`, "
        "so that it falls back to `parse_date`. That still holds (I rejected `fromisoformat` partly for this "
        "reason). I checked the CLI by hand with a date, a fractional timestamp and garbage, and added a CLI "
        f"test for the fractional case ({m.test_count()} tests pass)."
    )

    # --- follow-up 4: parse_time ---------------------------------------------------------------
    s.user("Nice. While you're at it: could you add a `parse_time` for strings like `14:30`, `09:05:30` and "
           "`2:30 pm`, export it from the package, and test it?")
    t("", s.plan([
        ("Write parse_time (24h and 12h clock)", "in_progress"),
        ("Export it from datekit/__init__.py", "todo"),
        ("Tests, including 12 am / 12 pm", "todo"),
        ("README and changelog", "todo"),
        ("ruff, mypy, full suite", "todo"),
    ]), think="12-hour clocks have the classic trap: 12:xx am is hour 0 and 12:xx pm is hour 12. I'll write "
              "the tests for those explicitly.")
    t("I'll add parse_time after parse_date, in the same style: formats tried in order, plus a pattern for "
      "the 12-hour clock.",
      s.edit(P,
             "def _split_offset(",
             "TIME_FORMATS = (\"%H:%M:%S\", \"%H:%M\")\n_TWELVE_HOUR = re.compile(\n"
             "    r\"^(?P<hour>\\d{1,2}):(?P<minute>\\d{2})(?::(?P<second>\\d{2}))?\"\n"
             "    r\"\\s*(?P<half>[ap])\\.?m\\.?$\",\n"
             "    re.IGNORECASE,\n)\n\n\n"
             "def parse_time(text: str) -> time:\n"
             "    \"\"\"The time of day in ``text``: ``14:30``, ``09:05:30`` or ``2:30 pm``.\"\"\"\n"
             "    text = text.strip()\n    match = _TWELVE_HOUR.match(text)\n    if match:\n"
             "        hour = int(match[\"hour\"])\n        if not 1 <= hour <= 12:\n"
             "            raise DateParseError(f\"not a time: {text!r}\")\n"
             "        if match[\"half\"].lower() == \"p\":\n            hour += 12\n"
             "        return time(hour % 24, int(match[\"minute\"]), int(match[\"second\"] or 0))\n"
             "    for fmt in TIME_FORMATS:\n        try:\n            return datetime.strptime(text, fmt).time()\n"
             "        except ValueError:\n            continue\n    raise DateParseError(f\"not a time: {text!r}\")\n\n\n"
             "def _split_offset("))
    t("", s.edit(P, "from datetime import date, datetime, timedelta, timezone",
                 "from datetime import date, datetime, time, timedelta, timezone"))
    t("Now the export.",
      s.edit("datekit/__init__.py",
             "from .parsing import DateParseError, parse_date, parse_datetime",
             "from .parsing import DateParseError, parse_date, parse_datetime, parse_time"),
      s.edit("datekit/__init__.py", '    "parse_datetime",\n]', '    "parse_datetime",\n    "parse_time",\n]'))
    t("And the tests, with both ends of the 12-hour clock.",
      s.edit(TP,
             "from datetime import date, datetime, timedelta, timezone",
             "from datetime import date, datetime, time, timedelta, timezone"),
      s.edit(TP,
             "from datekit.parsing import DateParseError, parse_date, parse_datetime",
             "from datekit.parsing import DateParseError, parse_date, parse_datetime, parse_time"))
    t("",
      s.edit(TP,
             "def test_parse_datetime_minutes():",
             "@pytest.mark.parametrize(\n    \"text, expected\",\n    [\n"
             "        (\"14:30\", time(14, 30)),\n        (\"09:05:30\", time(9, 5, 30)),\n"
             "        (\"2:30 pm\", time(14, 30)),\n        (\"2:30PM\", time(14, 30)),\n"
             "        (\"12:15 am\", time(0, 15)),\n        (\"12:15 pm\", time(12, 15)),\n    ],\n)\n"
             "def test_parse_time(text, expected):\n    assert parse_time(text) == expected\n\n\n"
             "@pytest.mark.parametrize(\"text\", [\"25:00\", \"13:00 pm\", \"noon\", \"14h30\"])\n"
             "def test_parse_time_rejects(text):\n    with pytest.raises(DateParseError):\n"
             "        parse_time(text)\n\n\n"
             "def test_parse_datetime_minutes():"))
    new_tests = [f"test_parse_time[{p}]" for p in ("14:30-expected0", "09:05:30-expected1", "2:30 pm-expected2",
                                                    "2:30PM-expected3", "12:15 am-expected4", "12:15 pm-expected5")]
    new_tests += [f"test_parse_time_rejects[{p}]" for p in ("25:00", "13:00 pm", "noon", "14h30")]
    at = m.tests[TP].index("test_parse_datetime_minutes")
    m.tests[TP][at:at] = new_tests
    m.failing[f"{TP}::test_parse_time[12:15 am-expected4]"] = (
        TB_NOON, "AssertionError: assert datetime.time(12, 15) == datetime.time(0, 15)")
    m.failing[f"{TP}::test_parse_time[12:15 pm-expected5]"] = (
        TB_NOON_PM, "AssertionError: assert datetime.time(0, 15) == datetime.time(12, 15)")
    t("", s.sh(f"cd {ROOT} && python -m pytest -q {TP} -k parse_time"))
    t("Exactly the trap I expected, and I still fell into it: 12 am must become 0 and 12 pm must stay 12.",
      s.view(P, s.span(P, "def parse_time", 0, 16)),
      think="Current code: hour += 12 for pm, then hour % 24. For 12 pm: 24 % 24 = 0 (wrong). For 12 am: "
            "stays 12 (wrong). Correct: hour = hour % 12, then + 12 if pm. 12 am -> 0, 12 pm -> 12, 2 pm -> 14.")
    t("`hour % 12` first, then add 12 for pm.",
      s.edit(P,
             "        if match[\"half\"].lower() == \"p\":\n            hour += 12\n"
             "        return time(hour % 24, int(match[\"minute\"]), int(match[\"second\"] or 0))",
             "        hour %= 12  # 12 am is midnight, 12 pm is noon\n"
             "        if match[\"half\"].lower() == \"p\":\n            hour += 12\n"
             "        return time(hour, int(match[\"minute\"]), int(match[\"second\"] or 0))"))
    m.failing.clear()
    t("", s.sh(f"cd {ROOT} && python -m pytest -q {TP} -k parse_time"))
    t("", s.sh(f"cd {ROOT} && python -m pytest -v {TP}"))
    t("Let me also try a few inputs by hand, including seconds with am/pm and stray spaces.",
      s.sh(f"cd {ROOT} && python - <<'EOF'\nfrom datekit import parse_time\n"
           "for s in ['  7:05:09 am ', '11:59 P.M.', '0:30 am', '23:59:59', '7:5 pm']:\n"
           "    try:\n        print(repr(s), '->', parse_time(s))\n"
           "    except Exception as e:\n        print(repr(s), '->', type(e).__name__, e)\nEOF",
           "'  7:05:09 am ' -> 07:05:09\n'11:59 P.M.' -> 23:59:00\n"
           "'0:30 am' -> DateParseError not a time: '0:30 am'\n'23:59:59' -> 23:59:59\n"
           "'7:5 pm' -> DateParseError not a time: '7:5 pm'"))
    t("`0:30 am` and `7:5 pm` are rejected, which is right for a 12-hour clock. Let me read the whole "
      "function once more as it stands.", s.view(P, s.span(P, "TIME_FORMATS", 0, 22)))
    t("The project has no type checker in CI, but the code is annotated; a quick mypy run costs little.",
      s.sh(f"cd {ROOT} && python -m mypy datekit", "/usr/local/bin/python: No module named mypy", 1))
    t("", s.sh("pip install mypy", "Collecting mypy\n  Downloading mypy-1.13.0-cp311-cp311-manylinux_2_17_x86_64."
                                   "manylinux2014_x86_64.manylinux_2_28_x86_64.whl (12.6 MB)\n"
                                   "Collecting mypy-extensions>=1.0.0 (from mypy)\n"
                                   "  Downloading mypy_extensions-1.0.0-py3-none-any.whl (4.7 kB)\n"
                                   "Installing collected packages: mypy-extensions, mypy\n"
                                   "Successfully installed mypy-1.13.0 mypy-extensions-1.0.0"))
    cli_line = s.line_of("datekit/cli.py", "value = parse_date(args.text)")
    t("", s.sh(f"cd {ROOT} && python -m mypy datekit",
               f"datekit/cli.py:{cli_line}: error: Incompatible types in assignment (expression has type \"date\", "
               "variable has type \"datetime\")  [assignment]\nFound 1 error in 1 file (checked 4 source files)", 1),
      think="The new code type-checks; the one error is in cli.py, which I have not changed: value is first a "
            "datetime, then a date. It is harmless at runtime (both have isoformat), and an annotation fixes it "
            "without changing behaviour. It is a one-line change in a file I am already testing; I'll do it and "
            "say so.")
    t("The only error predates my work: in cli.py `value` holds a datetime or a date. An annotation says so "
      "without changing behaviour.",
      s.edit("datekit/cli.py", "    args = parser.parse_args(argv)\n    try:",
             "    args = parser.parse_args(argv)\n    value: date | datetime\n    try:"),
      s.edit("datekit/cli.py", "import argparse\nimport sys\n",
             "import argparse\nimport sys\nfrom datetime import date, datetime\n"))
    t("", s.sh(f"cd {ROOT} && python -m mypy datekit", "Success: no issues found in 4 source files"))
    t("`date | datetime` in an annotation is fine on 3.9 only because of `from __future__ import annotations`; "
      "cli.py has it. Let me confirm.", s.sh(f"cd {ROOT} && grep -rn \"from __future__\" --include=*.py datekit"))
    t("Now the docs.",
      s.edit("README.md", "    >>> parse_datetime(\"2024-03-10 14:30\")\n    datetime.datetime(2024, 3, 10, 14, 30)\n",
             "    >>> parse_datetime(\"2024-03-10 14:30\")\n    datetime.datetime(2024, 3, 10, 14, 30)\n"
             "    >>> parse_time(\"2:30 pm\")\n    datetime.time(14, 30)\n"),
      s.edit("README.md", "    >>> from datekit import parse_date, parse_datetime",
             "    >>> from datekit import parse_date, parse_datetime, parse_time"),
      s.edit("CHANGELOG.md", "  JavaScript's `toISOString()`); 1 to 6 digits.\n",
             "  JavaScript's `toISOString()`); 1 to 6 digits.\n"
             "- New `parse_time` for `14:30`, `09:05:30` and `2:30 pm`.\n"))
    t("", s.sh(f"cd {ROOT} && python -m doctest -v README.md | tail -4",
               "1 items passed all tests:\n   4 tests in README.md\n4 tests in 1 items.\n4 passed and 0 failed.\nTest passed."))
    t("", s.sh(f"cd {ROOT} && ruff check . && python -m pytest -q",
               "All checks passed!\n" + m.pytest()[0]))
    t("", s.plan([
        ("Write parse_time (24h and 12h clock)", "done"),
        ("Export it from datekit/__init__.py", "done"),
        ("Tests, including 12 am / 12 pm", "done"),
        ("README and changelog", "done"),
        ("ruff, mypy, full suite", "done"),
    ]))
    s.say(
        "Added `parse_time(text) -> datetime.time` in `datekit/parsing.py`, exported from `datekit`. It reads "
        "`14:30`, `09:05:30` and 12-hour times (`2:30 pm`, `2:30PM`, `11:59 P.M.`), and rejects `25:00`, "
        "`13:00 pm`, `0:30 am` and words. My first version got 12 am / 12 pm backwards; the tests caught it. "
        "README (its examples run as doctests) and changelog updated. mypy found one old issue in `cli.py` "
        "(`value` is a datetime or a date); I added the annotation, no behaviour change. ruff is clean and all "
        f"{m.test_count()} tests pass."
    )

    # --- follow-up 5: datekit parse --utc --------------------------------------------------------
    s.user("Last feature: `datekit parse --utc TEXT` should print date-times converted to UTC, written with a "
           "`Z`. A date-time without an offset can't be converted, so that should be an error; plain dates "
           "print as they are.")
    t("", s.view("datekit/cli.py"), s.view("tests/test_cli.py"))
    t("", s.plan([
        ("--utc flag on `parse`", "in_progress"),
        ("naive date-time with --utc: error, exit 2", "todo"),
        ("tests, README, changelog", "todo"),
    ]))
    t("The flag first.",
      s.edit("datekit/cli.py", "    parse.add_argument(\"text\")\n",
             "    parse.add_argument(\"text\")\n"
             "    parse.add_argument(\"--utc\", action=\"store_true\", help=\"convert a date-time to UTC \"\n"
             "                       \"(TEXT must have an offset)\")\n"))
    t("Then the conversion, just before printing. Dates pass through untouched.",
      s.edit("datekit/cli.py", "    print(value.isoformat())\n",
             "    if args.utc and isinstance(value, datetime):\n        if value.tzinfo is None:\n"
             "            print(f\"datekit: {args.text!r} has no UTC offset\", file=sys.stderr)\n"
             "            return 2\n        value = value.astimezone(timezone.utc)\n"
             "    print(value.isoformat())\n"),
      s.edit("datekit/cli.py", "from datetime import date, datetime\n", "from datetime import date, datetime, timezone\n"))
    t("Tests for the three cases.",
      s.edit("tests/test_cli.py", "def test_parse_garbage(capsys):",
             "def test_parse_utc(capsys):\n"
             "    assert main([\"parse\", \"--utc\", \"2024-03-10T14:30+01:00\"]) == 0\n"
             "    assert capsys.readouterr().out == \"2024-03-10T13:30:00Z\\n\"\n\n\n"
             "def test_parse_utc_needs_offset(capsys):\n"
             "    assert main([\"parse\", \"--utc\", \"2024-03-10 14:30\"]) == 2\n"
             "    assert \"no UTC offset\" in capsys.readouterr().err\n\n\n"
             "def test_parse_utc_leaves_dates_alone(capsys):\n"
             "    assert main([\"parse\", \"--utc\", \"10.03.2024\"]) == 0\n"
             "    assert capsys.readouterr().out == \"2024-03-10\\n\"\n\n\n"
             "def test_parse_garbage(capsys):"))
    m.tests["tests/test_cli.py"][3:3] = ["test_parse_utc", "test_parse_utc_needs_offset",
                                         "test_parse_utc_leaves_dates_alone"]
    m.failing["tests/test_cli.py::test_parse_utc"] = (
        "capsys = <_pytest.capture.CaptureFixture object at 0x7f3a9c2b1d50>\n\n"
        "    def test_parse_utc(capsys):\n"
        "        assert main([\"parse\", \"--utc\", \"2024-03-10T14:30+01:00\"]) == 0\n"
        ">       assert capsys.readouterr().out == \"2024-03-10T13:30:00Z\\n\"\n"
        "E       AssertionError: assert '2024-03-10T13:30:00+00:00\\n' == '2024-03-10T13:30:00Z\\n'\n"
        "E         \n"
        "E         - 2024-03-10T13:30:00Z\n"
        "E         ?                    ^\n"
        "E         + 2024-03-10T13:30:00+00:00\n"
        "E         ?                    ^^^^^^\n\n"
        "tests/test_cli.py:24: AssertionError",
        "AssertionError: assert '2024-03-10T13:30:00+00:00\\n' == '2024-03-10T13:30:00Z\\n'")
    t("", s.sh(f"cd {ROOT} && python -m pytest -q tests/test_cli.py"))
    t("isoformat writes UTC as +00:00; the user asked for a Z. I'll write it explicitly for --utc.",
      s.view("datekit/cli.py", s.span("datekit/cli.py", "if args.utc", 1, 8)))
    t("",
      s.edit("datekit/cli.py",
             "        value = value.astimezone(timezone.utc)\n    print(value.isoformat())\n",
             "        text = value.astimezone(timezone.utc).isoformat().replace(\"+00:00\", \"Z\")\n"
             "    else:\n        text = value.isoformat()\n    print(text)\n"))
    del m.failing["tests/test_cli.py::test_parse_utc"]
    t("", s.sh(f"cd {ROOT} && python -m pytest -q tests/test_cli.py"))
    t("Let me look at the whole change to cli.py.", s.sh(f"cd {ROOT} && git diff datekit/cli.py"))
    t("And by hand, including a negative offset and fractional seconds.",
      s.sh(f"cd {ROOT} && datekit parse --utc 2024-03-10T23:30:00.250-05:00", "2024-03-11T04:30:00.250000Z"),
      s.sh(f"cd {ROOT} && datekit parse --utc '2024-03-10 14:30'; echo \"exit $?\"",
           "datekit: '2024-03-10 14:30' has no UTC offset\nexit 2"),
      s.sh(f"cd {ROOT} && datekit parse -h",
           "usage: datekit parse [-h] [--utc] text\n\npositional arguments:\n  text\n\noptions:\n"
           "  -h, --help  show this help message and exit\n"
           "  --utc       convert a date-time to UTC (TEXT must have an offset)"))
    t("What does a fractional UTC value look like through --utc, and is midnight rollover right?",
      s.sh(f"cd {ROOT} && datekit parse --utc 2024-12-31T23:30:00+00:30", "2024-12-31T23:00:00Z"),
      s.sh(f"cd {ROOT} && datekit parse --utc 2024-12-31T23:30:00-01:00", "2025-01-01T00:30:00Z"))
    t("Docs and changelog.",
      s.edit("README.md", "    $ datekit parse \"2024-03-10T14:30+01:00\"\n    2024-03-10T14:30:00+01:00\n",
             "    $ datekit parse \"2024-03-10T14:30+01:00\"\n    2024-03-10T14:30:00+01:00\n"
             "    $ datekit parse --utc \"2024-03-10T14:30+01:00\"\n    2024-03-10T13:30:00Z\n"),
      s.edit("CHANGELOG.md", "- New `parse_time` for `14:30`, `09:05:30` and `2:30 pm`.\n",
             "- New `parse_time` for `14:30`, `09:05:30` and `2:30 pm`.\n"
             "- `datekit parse --utc` prints date-times in UTC (`...Z`).\n"))
    t("Linters and types on everything, then the whole suite.",
      s.sh(f"cd {ROOT} && ruff check .", "All checks passed!"),
      s.sh(f"cd {ROOT} && python -m mypy datekit", "Success: no issues found in 4 source files"))
    t("", s.sh(f"cd {ROOT} && python -m pytest -v"))
    t("", s.plan([
        ("--utc flag on `parse`", "done"),
        ("naive date-time with --utc: error, exit 2", "done"),
        ("tests, README, changelog", "done"),
    ]))
    s.say(
        "`datekit parse --utc TEXT` now prints date-times in UTC with a `Z` "
        "(`2024-03-10T14:30+01:00` gives `2024-03-10T13:30:00Z`); a date-time without an offset is an error "
        "(exit 2, \"has no UTC offset\"), and a plain date prints unchanged. My first version "
        "printed `+00:00`; the test caught it. Three CLI tests, README and changelog updated; ruff and mypy are "
        f"clean and all {m.test_count()} tests pass."
    )

    # --- follow-up 6: commit ---------------------------------------------------------------------
    s.user("Great work. Please commit all of this on a new branch `fix/iso-fractions`.")
    t("", s.sh(f"cd {ROOT} && git status"), s.sh(f"cd {ROOT} && git diff --stat"))
    t("Nothing unexpected: only files I meant to change. mypy and ruff left caches; are they ignored?",
      s.sh(f"cd {ROOT} && cat .gitignore", "__pycache__/\n*.egg-info/\n.pytest_cache/\n.ruff_cache/\n.mypy_cache/"))
    m.branch = "fix/iso-fractions"
    t("", s.sh(f"cd {ROOT} && git checkout -b fix/iso-fractions", "Switched to a new branch 'fix/iso-fractions'"))
    t("I'll commit with a message that explains the why, including the rejected fromisoformat approach.",
      s.sh(f"cd {ROOT} && git add -A && git commit -q -F - <<'EOF'\n"
           "Parse fractional seconds; parse_date takes timestamps; add parse_time\n\n"
           "parse_datetime rejected timestamps with a fractional part, such as the\n"
           "2024-03-10T12:30:00.250Z that JavaScript's toISOString() produces. Add a\n"
           "%f format (1 to 6 digits). datetime.fromisoformat was not used: on 3.11 it\n"
           "also accepts bare dates and week dates, which we reject on purpose (the CLI\n"
           "relies on it), and on 3.9 it does not know 'Z'.\n\n"
           "parse_date now accepts any timestamp and returns its date as written.\n"
           "New parse_time for 24-hour and 12-hour times. Annotate cli.main's value\n"
           "(mypy).\nEOF",
           ""))
    m.commits.insert(0, "4e7a2c9 Parse fractional seconds; parse_date takes timestamps; add parse_time")
    stat = m.diff(stat=True)
    m.original = dict(m.files)
    t("", s.sh(f"cd {ROOT} && git log --oneline -3"), s.sh(f"cd {ROOT} && git status"),
      s.sh(f"cd {ROOT} && git show --stat --format='%h %s' HEAD",
           "4e7a2c9 Parse fractional seconds; parse_date takes timestamps; add parse_time\n\n" + stat))
    s.say(
        "Committed on the new branch `fix/iso-fractions` as 4e7a2c9, \"Parse fractional seconds; parse_date "
        "takes timestamps; add parse_time\". The message also says why `fromisoformat` was not used. The working "
        "tree is clean. I have not pushed."
    )


def events(seed: int = 20261120) -> list[dict[str, Any]]:
    story = Story(seed)
    tell(story)
    return story.events


def render(evs: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n" for e in evs)


def main(argv: list[str]) -> int:
    text = render(events())
    if "--check" in argv:
        same = OUT.exists() and OUT.read_text(encoding="utf-8") == text
        print(f"{OUT.name}: {'up to date' if same else 'differs from what make_demo.py writes'}")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT} ({text.count(chr(10))} events, {len(text.encode()):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
