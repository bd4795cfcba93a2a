"""Validated settings: dataclasses whose values pydantic checks, with errors that name the key.

The LLM configuration (``LLMConfig``), every condenser and the offline summarizer are
``@settings`` dataclasses, the one way their settings are checked, whether they come from
Python or from a TOML file:

* a setting's annotation says what it accepts: ``Annotated[int, Field(ge=1)]``, a
  ``Literal`` of names; values are strict (``true`` is not 1, ``10.5`` is not an integer,
  an integer is a number), and an unknown keyword is an error, not silently dropped;
* a rule between settings is a ``model_validator(mode="after")`` that raises
  :class:`SettingError` naming the setting to change.

A bad value is one :class:`InvalidSetting` (a ``ConfigError``) naming the setting and what is
wrong with it: ``amortized.max_size (0) must be at least 1``. A reader of a file re-places it
where the setting sits there: ``condenser.condensers[1].max_size (0) must be at least 1``.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import ConfigDict, ValidationError
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic_core import ErrorDetails

from .errors import ConfigError

__all__ = ["InvalidSetting", "SettingError", "settings"]

T = TypeVar("T", bound=type)

# ``arbitrary_types_allowed``: a pipeline holds condensers, which are checked by isinstance.
STRICT = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, arbitrary_types_allowed=True)

_MAX_SHOWN = 60  # characters of a bad value quoted in a message


class SettingError(ValueError):
    """A rule between settings is broken: ``key`` is the setting to change, ``detail`` says
    why (``(5) must be less than max_events (5)``)."""

    def __init__(self, key: str, detail: str) -> None:
        super().__init__(f"{key} {detail}")
        self.key = key
        self.detail = detail


class InvalidSetting(ConfigError):
    """``owner.key detail``: a setting of ``owner`` (a condenser type, ``LLMConfig``, or
    where a file holds it) has a value it cannot take."""

    def __init__(self, owner: str, key: str, detail: str) -> None:
        super().__init__(f"{owner}.{key} {detail}")
        self.owner = owner
        self.key = key
        self.detail = detail

    def at(self, owner: str, key: str | None = None) -> InvalidSetting:
        """The same error, named as it sits elsewhere (a TOML table, a user's spelling)."""
        return InvalidSetting(owner, key or self.key, self.detail)


def settings(
    owner: str | None = None, *, subject: str | None = None, **options: Any
) -> Callable[[T], T]:
    """Make ``cls`` a validated dataclass (``options`` as for ``dataclasses.dataclass``).

    ``owner`` names it in messages (default: its condenser ``type``); ``subject`` in "is not
    a setting of ..." (default: ``type 'NAME'``).
    """

    def wrap(cls: T) -> T:
        made: Any = pydantic_dataclass(cls, config=STRICT, **options)
        init = made.__init__

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            try:
                init(self, *args, **kwargs)
            except ValidationError as e:
                kind = type(self)  # a subclass that is not decorated itself names itself
                name = owner or kind.type
                raise invalid_setting(name, subject or f"type {name!r}", e, kind) from None

        made.__init__ = __init__
        return made  # type: ignore[no-any-return]

    return wrap


def invalid_setting(owner: str, subject: str, error: ValidationError, cls: type) -> InvalidSetting:
    """The first problem pydantic found, as one line."""
    first = error.errors()[0]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, SettingError):
        return InvalidSetting(owner, cause.key, cause.detail)
    key = _key(first["loc"], cls)
    if first["type"] == "unexpected_keyword_argument":
        return InvalidSetting(owner, key, _unknown(subject, key, _names(cls)))
    if first["type"] in ("missing_argument", "missing"):
        return InvalidSetting(owner, key, "is required")
    return InvalidSetting(owner, key, f"({_shown(first['input'])}) {_problem(first)}")


def _key(loc: Sequence[int | str], cls: type) -> str:
    """``("condensers", 0)`` -> ``condensers[0]``; a positional argument by its name."""
    if loc and isinstance(loc[0], int):
        fields = _names(cls)
        loc = [fields[loc[0]] if loc[0] < len(fields) else f"argument {loc[0] + 1}", *loc[1:]]
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out


def _names(cls: type) -> list[str]:
    """The settings, in the constructor's order."""
    return [f.name for f in dataclasses.fields(cls) if f.init]  # type: ignore[arg-type]


def _unknown(subject: str, key: str, names: list[str]) -> str:
    close = difflib.get_close_matches(key, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f" (settings: {', '.join(sorted(names)) or 'none'})"
    return f"is not a setting of {subject}{hint}"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


# What each kind of pydantic error means, in the words our messages use.
_EXPECTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "string_type": "a string",
    "bool_type": "true or false",
    "list_type": "a list",
}
_BOUNDS = {
    "greater_than_equal": ("ge", "at least"),
    "greater_than": ("gt", "more than"),
    "less_than_equal": ("le", "at most"),
    "less_than": ("lt", "less than"),
}


def _problem(error: ErrorDetails) -> str:
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind in _EXPECTED:
        return f"must be {_EXPECTED[kind]}"
    if kind in _BOUNDS:
        bound, words = _BOUNDS[kind]
        limit = ctx[bound]
        return f"must be {words} {limit:g}" if isinstance(limit, float) else f"must be {words} {limit}"
    if kind == "literal_error":
        return f"must be {ctx['expected']}"
    if kind == "is_instance_of":
        return f"must be an instance of {ctx['class']}"
    if kind in ("dataclass_exact_type", "dataclass_type"):
        return f"must be an instance of {ctx.get('class_name', 'its class')}"
    if kind == "value_error":  # a field's own validator: its message says what is wrong
        return str(ctx["error"])
    return error["msg"][:1].lower() + error["msg"][1:]
