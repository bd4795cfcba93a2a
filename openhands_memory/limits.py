"""The bounds the library holds its callers' values to: event ids, counts, and the ids of new
conversations. The public methods (``EventStore``, ``Conversation``, ``inspection.history``)
check their arguments here, and so do the command line's argument types (``cli/params.py``),
so that each bound is written once and a value is taken or refused alike from Python and
from a shell.

* An event id is a whole number from 0 to ``MAX_ID``: every id lies below ``ranges.END``,
  the storage's "no upper bound", and a larger number could not be bound to an SQL parameter
  (both databases take 64-bit integers) or would overflow next to one. A number outside
  names no event: ``EventNotFound``, what any id a conversation does not hold raises.
* A bound of an id range (``Conversation.events``, ``inspection.history``) is clamped to
  ``0..END``: no id lies outside, so the range holds exactly the events it was asked for.
* A count (a limit, a window, a budget, a page) is a whole number from its least value to
  ``MAX_COUNT``: a larger one is refused (``CountOutOfRange``), never clamped, so that a call
  never does other than what was asked; no answer holds that many rows.
* A new conversation's id is 1 to ``MAX_CONVERSATION_ID`` characters of one-line text (see
  ``conversation_id_problem``). Ids an existing database holds are read whatever they are:
  SQLite files made before the rule may hold longer ones.
"""

from __future__ import annotations

import operator
import unicodedata
from typing import Any

from .errors import BadConversationId, CountOutOfRange, EventNotFound
from .ranges import END

MAX_ID = END - 1
MAX_COUNT = 1_000_000_000
#: The most characters of a new conversation's id. Every id the library and the SDK make
#: fits: a UUID (36), a file or folder name an import takes (at most 255 bytes, so at most
#: 255 characters), a replay's (``replay/scratch.py`` shortens it to fit). The bound is the
#: index's: PostgreSQL's B-tree holds an entry of at most 2,704 bytes, and a conversation's id
#: sits in its indexes beside another text (an event's external id); 256 characters are at
#: most 1,024 bytes of UTF-8 whatever they are, where 12,000 CJK characters (36 KB, which do
#: not compress) were refused by the index at the first write, as a server failure to retry.
MAX_CONVERSATION_ID = 256
#: Characters no id holds, by Unicode category: control characters (NUL among them, which
#: PostgreSQL cannot store in text at all, and a newline or an escape, which break the
#: one-line messages and listings that show ids), lone surrogates (not text: neither database
#: stores them), and the line and paragraph separators.
_REFUSED = {"Cc": "a control character", "Cs": "a lone surrogate, which is not text",
            "Zl": "a line separator", "Zp": "a paragraph separator"}


def _whole(value: Any) -> int:
    """``value`` as an int (an int, or what can stand for one); TypeError for anything else."""
    if isinstance(value, bool):
        raise TypeError(f"expected a whole number, not {value!r}")
    return operator.index(value)


def event_id(value: Any, conversation_id: str) -> int:
    """``value``, an event id of conversation ``conversation_id``; ``EventNotFound`` when it
    lies outside ``0..MAX_ID``, where no conversation has an event."""
    number = _whole(value)
    if not 0 <= number <= MAX_ID:
        raise EventNotFound(conversation_id, number)
    return number


def bound(value: Any) -> int:
    """A bound of an id range, clamped to ``0..END`` (the range then holds the same ids)."""
    return min(max(_whole(value), 0), END)


def count(value: Any, name: str, low: int = 0, *, error: type[Exception] = CountOutOfRange) -> int:
    """``value``, a count named ``name``: a whole number from ``low`` to ``MAX_COUNT``, else
    ``error`` (``CountOutOfRange``, or the caller's own kind of ``ValueError``) saying so."""
    number = _whole(value)
    if number < low:
        raise error(f"{name} must be at least {low:,}, not {number}")
    if number > MAX_COUNT:
        raise error(f"{name} must be at most {MAX_COUNT:,}, not {number}")
    return number


def conversation_id_problem(cid: Any) -> str | None:
    """Why ``cid`` cannot be a new conversation's id (None: it can)."""
    if not isinstance(cid, str):
        return f"an id is text, not {type(cid).__name__}"
    if not cid:
        return "it is empty"
    if len(cid) > MAX_CONVERSATION_ID:
        return f"it is {len(cid):,} characters long, and an id has at most {MAX_CONVERSATION_ID}"
    for i, c in enumerate(cid):
        what = _REFUSED.get(unicodedata.category(c))
        if what is not None:
            return f"it holds {what} (U+{ord(c):04X} at character {i + 1})"
    return None


def conversation_id(cid: Any) -> str:
    """``cid``, if it can be a new conversation's id; else ``BadConversationId`` saying why."""
    problem = conversation_id_problem(cid)
    if problem is not None:
        raise BadConversationId(cid if isinstance(cid, str) else repr(cid), problem)
    return cid
