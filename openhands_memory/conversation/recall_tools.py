"""Recall as two tools a model can call: ``recall_search`` and ``recall_read``.

``RECALL_TOOL_SPECS`` are their OpenAI function-calling specs (for litellm or any agent that
sends ``tools=[...]``); ``call_recall_tool(conv, name, arguments)`` runs one on a
Conversation and returns the text to hand back to the model as the tool's result (errors
too, as text: a bad call never raises). ``run_recall_tool`` is the same with an
``is_error`` flag; the OpenHands SDK tools (``integrations/openhands_sdk/recall_tools.py``)
call it, so both give the model the same text.

A model can send anything: every argument is checked (an id past what storage holds, a
number that is not finite, text that is not UTF-8, a query too long to search) and a bad one
is an "Error:" text saying what to send instead; arguments a tool does not take are named
as ignored at the end of the reply. What the library refuses (an unknown event, a search
index switched off) is an "Error:" text too, and so is a fault of the database (a lost
connection, a damaged file): named as the tool failing, never passed off as no results.
Anything else is a bug, and raises.

The results are capped (``SEARCH_MAX_CHARS``, ``READ_MAX_CHARS``) and each event is tagged
``[event N]``, N being its id in the conversation, which the model can cite and read. A
search leaves out the recall tools' own calls and results: they only echo other events (and
the call being run, already stored by an agent that writes before it acts, would find itself).
``RECALL_PROMPT`` is a paragraph a system prompt can include to say when to use them.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from .. import limits
from ..errors import EventNotFound, OpenHandsMemoryError
from ..storage import IntegrityViolation
from .recall import SCOPES, SNIPPET, Hit, Recalled, SearchError, terms_of

if TYPE_CHECKING:
    from .conversation import Conversation

SEARCH = "recall_search"
READ = "recall_read"
SEARCH_MAX_CHARS = 4000  # the whole search result
READ_MAX_CHARS = 6000  # the event's text in a read
DEFAULT_LIMIT = 5
MAX_LIMIT = 20
DEFAULT_WINDOW = 2
MAX_WINDOW = 10
ECHOES = 8  # hits asked beyond the limit, for the recall tools' own events left out
MAX_ASK = 500
MAX_ID = limits.MAX_ID  # no event's id is larger (and a larger one cannot be bound to SQL)
MAX_QUERY_CHARS = 1000
MAX_QUERY_WORDS = 64  # words and "quoted phrases"; a search is one clause of SQL per word
MAX_TOOL_CHARS = 200
SHOWN_CHARS = 60  # of a bad argument's value, in an error
ARGUMENTS = {SEARCH: ("query", "scope", "limit", "tool"), READ: ("event_id", "window")}

RECALL_PROMPT = (
    "Your context is condensed as the conversation grows: older events are replaced by a "
    "summary, but nothing is lost. When you need an exact detail that is no longer in view (an "
    "error message, a file path, a command and its output, a value you saw earlier), call "
    "recall_search with distinctive words or a fragment of it before guessing or redoing the "
    "work. Each hit is tagged [event N]: cite those ids when you rely on them. Call recall_read "
    "with an event id to read that event in full, with the ids of its tool call or result and "
    "of its neighbours; read those ids to scroll back or forward. Search looks only at what was "
    'condensed away unless you pass scope "all" (everything) or "visible" (what you see now).'
)

SEARCH_DESCRIPTION = (
    "Search this conversation's earlier events, by default those condensed out of your context. "
    "Give distinctive words, a \"quoted phrase\", or a fragment of an identifier, path or error "
    "message. Returns one line per event, tagged [event N] (cite or read it with recall_read), "
    "with its kind, tool, time, whether it is hidden, and a snippet around the match."
)
READ_DESCRIPTION = (
    "Read one event of this conversation in full (cut to 6,000 characters) by its id, the N of "
    "an [event N] tag: its text, the id of its tool call or result, and the ids of its "
    "neighbours, to scroll with further reads."
)

RECALL_TOOL_SPECS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": SEARCH,
            "description": SEARCH_DESCRIPTION,
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "Words, a \"quoted phrase\", or a fragment (3+ characters) "
                                       "of an identifier, path or error message.",
                    },
                    "scope": {
                        "type": "string",
                        "enum": list(SCOPES),
                        "default": "forgotten",
                        "description": "forgotten: events condensed out of your context (default); "
                                       "visible: events you see now; all: both.",
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_LIMIT,
                        "default": DEFAULT_LIMIT,
                        "description": "How many events at most.",
                    },
                    "tool": {
                        "type": ["string", "null"],
                        "default": None,
                        "description": "Only calls to and results of this tool (e.g. terminal).",
                    },
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": READ,
            "description": READ_DESCRIPTION,
            "parameters": {
                "type": "object",
                "properties": {
                    "event_id": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "The event's id: the N of an [event N] tag.",
                    },
                    "window": {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": MAX_WINDOW,
                        "default": DEFAULT_WINDOW,
                        "description": "How many neighbour ids to list on each side.",
                    },
                },
                "required": ["event_id"],
                "additionalProperties": False,
            },
        },
    },
]
RECALL_TOOL_NAMES = (SEARCH, READ)


@dataclass(frozen=True)
class RecallToolResult:
    """What a recall tool gives back: the text for the model, and whether it is an error."""

    text: str
    is_error: bool = False


class _BadArguments(ValueError):
    pass


def call_recall_tool(conv: "Conversation", name: str, arguments: str | Mapping[str, Any] | None) -> str:
    """Run recall tool ``name`` on ``conv`` with the model's ``arguments`` (its JSON string or
    the parsed object) and return the text to send back as the tool's result. Errors (an
    unknown tool, bad arguments, an unknown event) come back as text starting "Error:"."""
    return run_recall_tool(conv, name, arguments).text


def run_recall_tool(conv: "Conversation", name: str, arguments: str | Mapping[str, Any] | None) -> RecallToolResult:
    """``call_recall_tool``, saying whether the result is an error."""
    ignored: list[str] = []
    try:
        args = _parse(arguments)
        ignored = [key for key in args if key not in ARGUMENTS.get(name, args)]
        result = _run(conv, name, args)
    except (_BadArguments, SearchError) as e:  # the call, not the database: the model can fix it
        result = RecallToolResult(f"Error: {e}", is_error=True)
    except OpenHandsMemoryError as e:  # the library's own (an index switched off, a lost server)
        result = RecallToolResult(f"Error: {name} failed: {e}", is_error=True)
    except _driver_errors() as e:  # a fault of the database the library has no name for
        text = " ".join(str(e).split()) or "no message"
        result = RecallToolResult(f"Error: {name} failed: the database: {type(e).__name__}: {text}", is_error=True)
    if ignored:
        takes = ", ".join(ARGUMENTS[name])
        result = RecallToolResult(
            f"{result.text}\n(Ignored {', '.join(_shown(k) for k in ignored)}: {name} takes only {takes}; "
            "it always serves this conversation.)", result.is_error)
    return result


def _run(conv: "Conversation", name: str, args: Mapping[str, Any]) -> RecallToolResult:
    if name == SEARCH:
        query = _string(args, "query", MAX_QUERY_CHARS, required=True)
        assert query is not None
        words = len(terms_of(query))
        if words > MAX_QUERY_WORDS:
            raise _BadArguments(f"the query has {words:,} words; give at most {MAX_QUERY_WORDS}, the most "
                                "distinctive ones (a \"quoted phrase\" counts as one)")
        scope = _string(args, "scope", 20) or "forgotten"
        if scope not in SCOPES:
            raise _BadArguments(f"scope must be one of {', '.join(SCOPES)}, not {_shown(scope)}")
        limit = _integer(args, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
        tool = _string(args, "tool", MAX_TOOL_CHARS)
        return RecallToolResult(format_hits(search(conv, query, limit, scope, tool), query, scope, tool))
    if name == READ:
        if "event_id" not in args or args["event_id"] is None:
            raise _BadArguments("event_id is required: the N of an [event N] tag")
        seq = _integer(args, "event_id", 0, 0, None)
        window = _integer(args, "window", DEFAULT_WINDOW, 0, MAX_WINDOW)
        try:
            if seq > MAX_ID:
                raise EventNotFound(conv.id, seq)
            recalled = conv.read(seq, window=window, max_chars=READ_MAX_CHARS)
        except EventNotFound:
            raise _BadArguments(f"there is no event {_number(seq)} in this conversation; ids come from the "
                                "[event N] tags of recall_search") from None
        return RecallToolResult(format_recalled(recalled))
    raise _BadArguments(f"unknown tool {repr(name)[:SHOWN_CHARS]}; the recall tools are "
                        f"{' and '.join(RECALL_TOOL_NAMES)}")


def _driver_errors() -> tuple[type[BaseException], ...]:
    """The database drivers' errors (a damaged file, a server's refusal), which the library
    lets through on reads; PostgreSQL's only once its driver is loaded."""
    errors: tuple[type[BaseException], ...] = (sqlite3.Error, IntegrityViolation)
    psycopg = sys.modules.get("psycopg")
    return errors + (psycopg.Error,) if psycopg is not None else errors


def search(conv: "Conversation", query: str, limit: int, scope: str, tool: str | None = None) -> list[Hit]:
    """``conv.search``, leaving out the recall tools' own calls and results (they only echo
    other events, and the search being run would find itself) unless ``tool`` names one."""
    tools = [tool] if tool else None
    if tool in RECALL_TOOL_NAMES:
        return conv.search(query, limit=limit, scope=scope, tools=tools)  # type: ignore[arg-type]
    ask = limit + ECHOES
    while True:
        hits = conv.search(query, limit=ask, scope=scope, tools=tools)  # type: ignore[arg-type]
        kept = [h for h in hits if h.tool not in RECALL_TOOL_NAMES]
        if len(kept) >= limit or len(hits) < ask or ask >= MAX_ASK:
            return kept[:limit]
        ask *= 4


# --- formatting ---------------------------------------------------------------------


def _tag(seq: int, kind: str, tool: str | None, timestamp: str) -> str:
    parts = [f"[event {seq}]", kind]
    if tool:
        parts.append(tool)
    if timestamp:
        parts.append(timestamp[:16])
    return " ".join(parts)


def hit_line(hit: Hit, scope: str) -> str:
    """One hit as one line: ``[event N] kind tool time · hidden by #C · …snippet…``."""
    if hit.hidden_by is not None:
        where = f"hidden by #{hit.hidden_by}"
    else:
        where = "hidden" if scope == "forgotten" else "in view"
    snippet = hit.snippet.strip()
    if len(hit.snippet) >= SNIPPET:
        snippet = f"…{snippet}…"
    return f"{_tag(hit.seq, hit.kind, hit.tool, hit.timestamp)} · {where} · {snippet}"


def format_hits(hits: list[Hit], query: str, scope: str, tool: str | None = None,
                max_chars: int = SEARCH_MAX_CHARS) -> str:
    """The text of a search: one line per hit, best first, cut to ``max_chars``."""
    where = {"forgotten": "among the events condensed out of your context",
             "visible": "among the events in your context", "all": "in the whole conversation"}[scope]
    only = f" (tool {tool})" if tool else ""
    if not hits:
        text = f"No event matches {query!r} {where}{only}."
        if scope != "all":
            text += ' Try scope "all" to search every event, or other words or a shorter fragment.'
        else:
            text += " Try other words or a shorter fragment."
        return text
    head = f"{len(hits)} {'event matches' if len(hits) == 1 else 'events match'} {query!r} {where}{only}, best first:"
    foot = "Read one in full with recall_read(event_id=N), N from its [event N] tag."
    lines = [head]
    used = len(head) + len(foot) + 2
    for k, hit in enumerate(hits):
        line = hit_line(hit, scope)
        left = len(hits) - k
        cut_note = f"[{left} more hit{'s' if left != 1 else ''} left out to keep this under {max_chars} characters]"
        if used + len(line) + 1 + len(cut_note) + 1 > max_chars:
            lines.append(cut_note)
            break
        lines.append(line)
        used += len(line) + 1
    lines.append(foot)
    return "\n".join(lines)[:max_chars]


def format_recalled(r: Recalled) -> str:
    """The text of a read: where the event is, its pair and neighbours, then its text."""
    lines = [f"{_tag(r.seq, r.kind, r.tool, r.timestamp)} · "
             f"{'in your context' if r.shown else 'hidden from your context by a condensation'}"]
    if r.pair is not None:
        lines.append(f"its {'result' if r.kind == 'ActionEvent' else 'tool call'}: event {r.pair}")
    lines.append(f"before it: {_ids(r.before)} · after it: {_ids(r.after)}")
    lines.append("---")
    lines.append(r.text)
    if r.truncated:
        lines.append(f"[the event is longer: cut to {READ_MAX_CHARS} characters, keeping its head and tail]")
    return "\n".join(lines)


def _ids(ids: list[int]) -> str:
    return ", ".join(f"event {i}" for i in ids) if ids else "none"


# --- arguments ----------------------------------------------------------------------


def _parse(arguments: str | Mapping[str, Any] | None) -> Mapping[str, Any]:
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError as e:
            raise _BadArguments(f"the arguments are not JSON ({e})") from None
        except RecursionError:
            raise _BadArguments("the arguments are not JSON this can read (nested too deep)") from None
    if not isinstance(arguments, Mapping):
        raise _BadArguments(f"the arguments must be a JSON object, not {type(arguments).__name__}")
    return arguments


def _shown(value: Any) -> str:
    """``value`` as JSON spells it, cut to SHOWN_CHARS; a lone surrogate as its escape, so
    that the reply is text a model's API can carry."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _number(n: int) -> str:
    text = str(n)
    return text if len(text) <= 24 else f"{text[:12]}… ({len(text):,} digits)"


def _string(args: Mapping[str, Any], key: str, most: int, *, required: bool = False) -> str | None:
    value = args.get(key)
    if value is None:
        if required:
            raise _BadArguments(f"{key} is required")
        return None
    if not isinstance(value, str):
        raise _BadArguments(f"{key} must be a string, not {_shown(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:  # a lone surrogate: JSON can spell one, no text holds one
        raise _BadArguments(f"{key} holds a lone surrogate (U+{ord(value[e.start]):04X} at character {e.start}), "
                            "which is not text") from None
    if len(value) > most:
        raise _BadArguments(f"{key} is {len(value):,} characters long; give at most {most:,}")
    return value


def _integer(args: Mapping[str, Any], key: str, default: int, low: int, high: int | None) -> int:
    """A whole number (a float without a fraction, or digits in a string, are taken too), at
    least ``low``; a larger one than ``high`` is taken as ``high`` (the specs' maximum)."""
    value = args.get(key)
    if value is None:
        return default
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():  # never NaN nor infinite
        number = int(value)
    elif isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:  # not digits, or more digits than Python reads
            number = None
    if number is None:
        raise _BadArguments(f"{key} must be an integer, not {_shown(value)}")
    if number < low:
        raise _BadArguments(f"{key} must be at least {low}, not {_number(number)}")
    return number if high is None else min(number, high)
