"""The options every command shares, and the old spellings of renamed ones.

One name means one thing in every command (docs/guide.md's vocabulary table;
tests/test_cli_vocabulary.py walks every command to hold them to it): ``--format`` is what
the command prints (``text``, ``json``, and for some ``csv`` or ``messages``) and ``--json``
is short for ``--format json``; ``-c/--config`` is a config file, ``--as`` a new
conversation's id, ``-n/--limit`` a number of results, ``--at`` an event in the history.

An option renamed keeps its old spelling for one release: hidden from ``--help``, it does
what the new one does and says so once on stderr (``openhands-memory: --xyz is deprecated;
use --abc``), never on stdout, so that ``--json`` output stays parseable.

Only click is imported here: every command's ``--help`` loads this module.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping

import click

PROG = "openhands-memory"
_SAID = "openhands_memory.deprecated"  # ctx.meta key: the old spellings already named


def deprecated(old: str, new: str) -> None:
    """Say on stderr, once per command run, that ``old`` is the old spelling of ``new``."""
    ctx = click.get_current_context(silent=True)
    said: set[str] = ctx.find_root().meta.setdefault(_SAID, set()) if ctx is not None else set()
    if old in said:
        return
    said.add(old)
    click.echo(f"{PROG}: {old} is deprecated; use {new}", err=True)


class FormatChoice(click.Choice):
    """``--format``'s choice, which also takes old values (not listed in ``--help``): each is
    read as what it now is, with a deprecation line. ``old`` maps an old value to (the value
    the command receives, the spelling to use instead)."""

    def __init__(self, choices: tuple[str, ...], old: Mapping[str, tuple[str, str]]):
        super().__init__(choices)
        self.old = dict(old)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value in self.old:
            becomes, instead = self.old[value]
            deprecated(f"--format {value}", instead)
            return becomes
        return super().convert(value, param, ctx)


#: The human-readable output was "table" for some commands and "text" for others.
OLD_FORMATS = {"table": ("text", "--format text")}


def output_format(*extra: str, moved: Mapping[str, str] | None = None) -> Callable[[Callable], Callable]:
    """``--format`` (text, json and ``extra``; default text) and ``--json`` (short for
    ``--format json``). The command receives ``fmt``.

    ``moved``: values ``--format`` took before it meant the output format, each mapped to the
    parameter of the option that takes them now (export's file format): such a value is
    passed to that parameter, and the output format stays text (json with ``--json``).
    """
    moved = dict(moved or {})
    old = {**OLD_FORMATS, **{value: (value, f"--{into.replace('_', '-')} {value}") for value, into in moved.items()}}

    def decorate(f: Callable) -> Callable:
        @click.option("--json", "as_json", is_flag=True, help="Print JSON (same as --format json).")
        @click.option("--format", "fmt", type=FormatChoice(("text", "json", *extra), old), default="text",
                      show_default=True, help="What to print.")
        @functools.wraps(f)
        def wrapper(*args: Any, as_json: bool, fmt: str, **kwargs: Any) -> Any:
            if fmt in moved:
                into = moved[fmt]
                _one_of(kwargs, into, f"--{into.replace('_', '-')}", "--format", fmt)
                kwargs[into], fmt = fmt, "text"
            return f(*args, fmt="json" if as_json else fmt, **kwargs)

        return wrapper

    return decorate


def _given(name: str) -> bool:
    """Whether the parameter ``name`` was given (on the command line or in the environment),
    not left at its default."""
    ctx = click.get_current_context()
    source = ctx.get_parameter_source(name)
    return source is not None and source not in (click.core.ParameterSource.DEFAULT,
                                                 click.core.ParameterSource.DEFAULT_MAP)


def _one_of(kwargs: Mapping[str, Any], into: str, new: str, old: str, value: Any) -> None:
    """Refuse an old spelling given beside the new one with another value."""
    if _given(into) and kwargs[into] != value:
        raise click.UsageError(f"give {new} or {old}, not both ({old} is its old spelling)")


def old_spelling(flag: str, *, into: str, new: str, value: Any = None, **option: Any) -> Callable[[Callable], Callable]:
    """``flag``, the old spelling of the option whose parameter is ``into``: hidden from
    ``--help``, it sets ``into`` (to its own value, or to ``value`` for a flag) and says once
    that ``new`` is the spelling now. ``option``: click's settings (type, metavar, is_flag).

    Given beside the new spelling, or beside another old one, with another value, it is a
    usage error: which one was meant cannot be told.
    """
    key = "old_" + flag.lstrip("-").replace("-", "_")

    def decorate(f: Callable) -> Callable:
        @click.option(flag, key, hidden=True, **option)
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = kwargs.pop(key)
            if given is None or given is False:
                return f(*args, **kwargs)
            meant = value if option.get("is_flag") else given
            spelled = flag if option.get("is_flag") else f"{flag} {given}"
            deprecated(flag, new)
            ctx = click.get_current_context()
            olds = ctx.meta.setdefault("openhands_memory.old_values", {})
            if into in olds and olds[into][1] != meant:
                raise click.UsageError(f"give {olds[into][0]} or {spelled}, not both")
            olds[into] = (spelled, meant)
            _one_of(kwargs, into, new.split()[0], flag, meant)
            kwargs[into] = meant
            return f(*args, **kwargs)

        return wrapper

    return decorate
