"""The kinds of value a command's arguments and options take, checked as click parses them.

Every argument is one of: text (``TEXT``, ``DATABASE``, ``path()``), an event id
(``EVENT_ID``), a count (``count(low)``), a number (``number(...)``), or a choice or a flag
(tests/test_hostile_arguments.py holds every command to it). Each refuses what it cannot
take with click's ``BadParameter`` naming the argument, which the group turns into one
``Error:`` line and exit status 1 (``cli/__init__.py``), before the command opens anything.

* Text is UTF-8 without NUL. On POSIX, Python hands a command line's bytes that are not UTF-8
  to the program as lone surrogates (U+DC80..U+DCFF); they can be neither stored (SQLite,
  PostgreSQL and JSON take UTF-8) nor printed, so they are refused here, and so are paths
  holding them (SQLite opens a path given as UTF-8 text). NUL cannot come from a real
  command line at all, only from a caller in the same process.
* An event id is a whole number from 0 to ``MAX_ID``, the storage's bound for ids (what lies
  beyond it could not be bound to an SQL parameter, or would overflow next to it).
* A count (``--limit``, ``--window``, ``--max-rows``, ...) is a whole number from its least
  value to ``MAX_COUNT``: a larger one is refused, never clamped, so that a command never
  does other than what was asked; no answer holds that many rows.
* A number (seconds, dollars) is finite: ``nan`` passes every comparison against a limit as
  if there were none.
"""

from __future__ import annotations

import math
import os
from typing import Any

import click

from ..limits import MAX_COUNT, MAX_ID  # the library's bounds (limits.py): written once

SHOWN_CHARS = 60  # of a refused value, in the message


def shown(value: Any) -> str:
    """``value`` as a message shows it: quoted, escaped, cut to SHOWN_CHARS."""
    text = repr(value) if isinstance(value, str) else repr(str(value))
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 2] + "…" + text[-1]


def text_problem(value: str) -> str | None:
    """Why ``value`` is not text a command can take (None: it is)."""
    if "\x00" in value:
        return "holds a NUL character"
    for i, c in enumerate(value):
        if "\ud800" <= c <= "\udfff":
            if "\udc80" <= c <= "\udcff":  # a command line's byte that was not UTF-8
                return f"is not UTF-8 text (byte 0x{ord(c) - 0xDC00:02x} at character {i})"
            return f"holds a lone surrogate (U+{ord(c):04X} at character {i}), which is not text"
    return None


class Text(click.ParamType):
    """UTF-8 text without NUL."""

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str):
            problem = text_problem(value)
            if problem is not None:
                self.fail(f"{shown(value)} {problem}", param, ctx)
        return value


class Database(Text):
    """A database: a server URL, or a file's path with ``~`` and ``~user`` expanded, here and
    once (a ``~user`` that names no user is refused: pathlib would raise deep inside)."""

    name = "database"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        value = super().convert(value, param, ctx)
        if isinstance(value, str) and value.startswith("~"):
            expanded = os.path.expanduser(value)
            if expanded.startswith("~"):
                user = value[1:].split("/", 1)[0]
                self.fail(f"{shown(value)} starts with ~{shown(user)[1:-1]}, but there is no such user "
                          "whose home folder it could name", param, ctx)
            value = expanded
        return value


class TextPath(click.Path):
    """``click.Path`` whose name is UTF-8 text without NUL (see the module's docstring)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        TEXT.convert(value, param, ctx)
        return super().convert(value, param, ctx)


def _figure(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def _whole(value: Any, kind: Any, what: str, param: click.Parameter | None, ctx: click.Context | None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        kind.fail(f"{shown(value)} is not {what}", param, ctx)
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:  # not digits, or more than Python reads as a number
            kind.fail(f"{shown(value)} is not {what}", param, ctx)
    return value


class EventId(click.ParamType):
    """An event id: a whole number from 0 to MAX_ID."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        what = f"an event id (a whole number from 0 to {MAX_ID})"
        number = _whole(value, self, what, param, ctx)
        if not 0 <= number <= MAX_ID:
            self.fail(f"{shown(value)} is not {what}", param, ctx)
        return number


class Count(click.ParamType):
    """A count: a whole number from ``low`` to MAX_COUNT."""

    name = "integer"

    def __init__(self, low: int):
        self.low = low

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        what = f"a whole number from {self.low} to {MAX_COUNT:,}"
        number = _whole(value, self, what, param, ctx)
        if not self.low <= number <= MAX_COUNT:
            self.fail(f"{shown(value)} is not {what}", param, ctx)
        return number


class Number(click.ParamType):
    """A finite number above ``low`` (or from it, unless ``open``), and at most ``high``."""

    name = "float"

    def __init__(self, low: float, *, open: bool = False, high: float | None = None):
        self.low, self.open, self.high = low, open, high

    def describe(self) -> str:
        lower = f"above {_figure(self.low)}" if self.open else f"from {_figure(self.low)}"
        return f"a finite number {lower}" + (f" to {_figure(self.high)}" if self.high is not None else "")

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        number: float | None = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                number = None
        if (number is None or not math.isfinite(number) or number < self.low or (self.open and number == self.low)
                or (self.high is not None and number > self.high)):
            self.fail(f"{shown(value)} is not {self.describe()}", param, ctx)
        return number


TEXT = Text()
DATABASE = Database()
EVENT_ID = EventId()


def count(low: int) -> Count:
    return Count(low)


def number(low: float, *, open: bool = False, high: float | None = None) -> Number:
    return Number(low, open=open, high=high)


def path(**kwargs: Any) -> TextPath:
    """``click.Path(**kwargs)`` taking only UTF-8 text."""
    return TextPath(**kwargs)


def event_in(value: int | None, last: int, conversation_id: str, hint: str) -> None:
    """Refuse ``value`` (given as ``hint``) unless it is an event of a conversation whose last
    id is ``last``."""
    if value is not None and not 0 <= value <= last:
        raise click.BadParameter(
            f"{conversation_id} has events 0..{last}" if last >= 0 else f"{conversation_id} has no events",
            param_hint=hint,
        )
