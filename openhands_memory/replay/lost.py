"""A proxy for what a strategy lost: forgotten events whose distinctive strings the agent
used again while nothing in its view still held them.

An event's distinctive strings are the paths, identifiers (``snake_case``, ``camelCase``,
``dotted.names``, ``AttributeError``) and error lines in its text. A forgotten event counts
as lost when a later recorded response (an action's arguments or thought, a message to the
user) uses one of its strings while no event the strategy still shows before that response
holds it, and the summary that replaced it does not say it either. Whether the agent would
have found the string another way cannot be known; the count tells strategies apart on the
same history, which is what a replay is for.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ..events import ActionEvent, Event, MessageEvent
from ..searchable import text_of

_TOKEN = re.compile(r"\w[\w./-]{4,}\w")
# An exception with its message, or a test runner's failure line.
_ERROR_LINE = re.compile(r"^[^\n]*?\b\w+(?:Error|Exception)\b:[^\n]*|^\s*(?:FAILED|ERROR)\b[^\n]*", re.MULTILINE)
MAX_LINE = 160
#: Uses of a string looked at after an event is forgotten (the first ones tell).
USES_CHECKED = 3
#: A string more events than this hold is common (a project's main path), not distinctive.
MAX_HOLDERS = 50


def _distinctive(token: str) -> bool:
    """A path, or an identifier no dictionary word spells: an underscore or inner capitals."""
    return "_" in token or "/" in token or not (token.islower() or token.isupper() or token[1:].islower())


def strings_in(text: str) -> set[str]:
    """The distinctive strings of a text."""
    found = {t for t in set(_TOKEN.findall(text)) if _distinctive(t)}
    found.update(line.strip()[:MAX_LINE] for line in _ERROR_LINE.findall(text))
    return found


def _is_response(e: Event) -> bool:
    return isinstance(e, ActionEvent) or (isinstance(e, MessageEvent) and e.source == "agent")


@dataclass
class Reuse:
    """Where each distinctive string of a history is held, and where responses used it."""

    strings: list[frozenset[str]]
    holders: dict[str, list[int]] = field(default_factory=dict)  # string -> positions, ascending
    uses: dict[str, list[int]] = field(default_factory=dict)

    @classmethod
    def of(cls, events: Sequence[Event]) -> "Reuse":
        strings: list[frozenset[str]] = []
        holders: dict[str, list[int]] = {}
        uses: dict[str, list[int]] = {}
        for i, e in enumerate(events):
            found = frozenset(strings_in(text_of(e.model_dump_json(exclude_none=True)))) if e.llm_visible else frozenset()
            strings.append(found)
            for s in found:
                holders.setdefault(s, []).append(i)
                if _is_response(e):
                    uses.setdefault(s, []).append(i)
        common = {s for s, held in holders.items() if len(held) > MAX_HOLDERS}
        strings = [f - common if f & common else f for f in strings]
        return cls(strings, holders, uses)

    def lost(self, position: int, forgotten: Mapping[int, int], summary: str | None) -> str | None:
        """A string of the event at ``position`` (forgotten at ``forgotten[position]``) that a
        later response used while no event shown before it held it and ``summary`` did not
        say it; None when there is none. ``forgotten``: each forgotten event's position ->
        the position of the call that forgot it."""
        gone_at = forgotten[position]
        for s in sorted(self.strings[position]):
            if summary is not None and s in summary:
                continue
            later = self.uses.get(s, [])
            first = bisect.bisect_right(later, gone_at)
            for use in later[first : first + USES_CHECKED]:
                held = self.holders[s]
                # Newest holders first: the likeliest to be shown still.
                before = reversed(held[: bisect.bisect_left(held, use)])
                if not any(forgotten.get(q, use + 1) > use for q in before):
                    return s
        return None
