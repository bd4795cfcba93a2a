"""What full-text search indexes of an event: its searchable text (issue 21, ``recall``).

The text of an event is every JSON string, at any depth of its payload, held under one of
``TEXT_KEYS``, in document order, joined by newlines: message and thought texts, tool-call
arguments (as the model wrote them), observation texts, errors, rejection reasons,
reasoning and thinking. Images, URLs of images and screenshots are under other keys, so
they are never indexed. Only ``SEARCHED_KINDS`` are indexed (the system prompt, always in
view, is not).

This is the one home of the rule: the SQLite triggers (SQL's ``json_tree`` walks the same
keys in the same order: ``storage/search.py``), PostgreSQL's ``ohm_search_text`` function
(revision 0008) and :func:`text_of` below, which snippets are cut from, are written from it.

U+0000 is kept in the event as it came (its JSON escapes it), but in what is searched, the
text and the query alike, it reads as a space (``NUL_AS``), on both backends: PostgreSQL's
``text`` and ``jsonb`` cannot hold it, and SQLite's JSON functions end a string there. So a
NUL separates words, as whitespace does, and the words after it are found. (A space, not
U+FFFD: ``jsonb`` spells a non-ASCII escape only in a UTF-8 database.)
"""

from __future__ import annotations

import json
from typing import Any

TEXT_KEYS: tuple[str, ...] = (
    "text", "arguments", "error", "rejection_reason", "reasoning_content", "thinking", "content", "query",
)
SEARCHED_KINDS: tuple[str, ...] = (
    "MessageEvent", "ActionEvent", "ObservationEvent", "AgentErrorEvent", "UserRejectObservation",
    "RecallObservation", "RecallAction",
)
_KEYS = frozenset(TEXT_KEYS)
#: What U+0000 reads as in a searched text and in a query (see the module's docstring).
NUL_AS = " "


def fold_nul(text: str) -> str:
    """``text`` as search reads it: each U+0000 as ``NUL_AS``."""
    return text.replace("\0", NUL_AS) if "\0" in text else text


def searched_text(payload: str | dict[str, Any]) -> str:
    """The text search reads of an event: ``text_of`` with U+0000 folded (``fold_nul``),
    the Python spelling of what the index holds."""
    return fold_nul(text_of(payload))


def text_of(payload: str | dict[str, Any]) -> str:
    """An event's searchable text (see the module's docstring)."""
    data = json.loads(payload) if isinstance(payload, str) else payload
    out: list[str] = []
    _walk(data, out)
    return "\n".join(out)


def _walk(value: Any, out: list[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str):
                if key in _KEYS:
                    out.append(item)
            else:
                _walk(item, out)
    elif isinstance(value, list):
        for item in value:
            if not isinstance(item, str):  # an array's strings have no key
                _walk(item, out)
