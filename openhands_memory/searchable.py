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
