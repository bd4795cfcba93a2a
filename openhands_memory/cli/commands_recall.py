"""Recall commands: search, show (conversation/recall.py).

``search`` finds events by words, a "quoted phrase" or a fragment of an identifier or path,
by default among those a condensation hid from the model (what is in view needs no search);
``show`` reads one event back in full, with its tool call or result and the ids around it to
scroll with. Both only read.
"""

from __future__ import annotations

import sys
import textwrap
import unicodedata
from datetime import datetime
from typing import TYPE_CHECKING, Sequence

import click

from .describe import KIND_LABELS, kind_label
from .opening import conversation as open_conversation
from .opening import open_reader
from .output import _unicode_ok, cut, echo_json, one_line, say, term_width
from .params import DATABASE, EVENT_ID, TEXT, count
from .vocabulary import old_spelling, output_format

if TYPE_CHECKING:
    from ..conversation.recall import Hit, Recalled

# Without a terminal (a pipe, a file, a test) the match is marked with these.
MARK_OPEN, MARK_CLOSE = "[[", "]]"
WHERE = {
    "forgotten": "among forgotten events",
    "visible": "among the events in view",
    "all": "on the whole branch",
}
SNIPPET_INDENT = 4


# --- shared ------------------------------------------------------------------------------------


def highlighting() -> bool:
    """Whether the match is shown in bold reverse (stdout is a terminal), not marked with
    MARK_OPEN/MARK_CLOSE."""
    isatty = getattr(sys.stdout, "isatty", None)
    return bool(isatty and isatty())


def when(timestamp: str | None) -> str:
    """An ISO timestamp to the minute: ``2026-01-01 12:00``."""
    return (timestamp or "").replace("T", " ")[:16]


def printable(text: str) -> str:
    """``text`` with control characters (an escape sequence in a tool's output, say) each
    made a "?", so that nothing printed can steer the terminal; the length is kept."""
    return "".join("?" if unicodedata.category(c) == "Cc" else c for c in text)


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


# --- search ------------------------------------------------------------------------------------


def _kinds(ctx: click.Context, param: click.Parameter, values: Sequence[str]) -> tuple[str, ...]:
    """--kind: an event kind, by its name (ObservationEvent) or its short name (observation)."""
    from ..searchable import SEARCHED_KINDS

    names = {k.lower(): k for k in SEARCHED_KINDS}
    names.update({KIND_LABELS[k].lower(): k for k in SEARCHED_KINDS if k in KIND_LABELS})
    out = []
    for value in values:
        kind = names.get(value.strip().lower())
        if kind is None:
            shown = ", ".join(KIND_LABELS.get(k, k) for k in SEARCHED_KINDS)
            raise click.BadParameter(f"{value!r} is not a searched kind: give one of {shown}", ctx, param)
        out.append(kind)
    return tuple(dict.fromkeys(out))


def _timestamp(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--before/--after: an ISO date or date and time, as stored timestamps are compared."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not an ISO date or time (like 2026-01-31 or 2026-01-31T14:05)", ctx, param
        ) from None
    # A date alone stays a date (it sorts before that day's times); a time is written as
    # stored: 2026-01-31T14:05:00.
    return value.strip() if len(value.strip()) == 10 else parsed.isoformat()


def fit_snippet(snippet: str, match: tuple[int, int] | None, room: int, marks: int) -> tuple[str, tuple[int, int] | None]:
    """``snippet`` cut to ``room`` columns (``marks`` of them taken by the match's marks),
    around the match, each cut side ending in an ellipsis; with the match's place in it."""
    text = printable(snippet)
    n = len(text)
    if match is not None and not 0 <= match[0] < match[1] <= n:
        match = None
    if n + (marks if match else 0) <= room:
        return text, match
    ellipsis = "…" if _unicode_ok() else "~"
    if match is None:
        return text[: max(0, room - 1)] + ellipsis, None
    inner = max(1, room - marks - 2)  # at most an ellipsis each side
    a, b = match
    b = min(b, a + inner)  # a match longer than the room is cut too
    start = max(0, min(a - (inner - (b - a)) // 2, n - inner))
    end = min(n, start + inner)
    if start == 0:  # only the right side is cut: its column goes to the text
        end = min(n, end + 1)
    elif end == n:
        start = max(0, start - 1)
    left = ellipsis if start > 0 else ""
    right = ellipsis if end < n else ""
    shown = left + text[start:end] + right
    offset = len(left) - start
    return shown, (a + offset, min(b, end) + offset)


def marked(text: str, match: tuple[int, int] | None, styled: bool) -> str:
    if match is None:
        return text
    a, b = match
    piece = click.style(text[a:b], bold=True, reverse=True) if styled else MARK_OPEN + text[a:b] + MARK_CLOSE
    return text[:a] + piece + text[b:]


def echo_hits(hits: Sequence["Hit"], width: int) -> None:
    """Two lines a hit: its id, kind, tool, time and the condensation that hid it; then the
    snippet, indented, the match highlighted (marked, without a terminal)."""
    styled = highlighting()
    id_w = max(len(str(h.seq)) for h in hits)
    kinds = [cut(kind_label(h.kind), 14) for h in hits]
    kind_w = max(len(k) for k in kinds)
    hidden = ["" if h.hidden_by is None else f"hidden by #{h.hidden_by}" for h in hits]
    tail_w = max(len(when(h.timestamp)) for h in hits) + max((2 + len(x) for x in hidden if x), default=0)
    tool_room = max(4, width - (id_w + 2 + kind_w + 2 + 2 + tail_w))
    tools = [cut(one_line(printable(h.tool or "")), tool_room) for h in hits]
    tool_w = max(len(t) for t in tools)
    indent = max(SNIPPET_INDENT, id_w + 2)
    marks = 0 if styled else len(MARK_OPEN) + len(MARK_CLOSE)
    for h, kind, tool, hid in zip(hits, kinds, tools, hidden):
        cells = [str(h.seq).rjust(id_w), kind.ljust(kind_w)]
        cells += [tool.ljust(tool_w)] if tool_w else []
        cells += [when(h.timestamp)] + ([hid] if hid else [])
        line = cut("  ".join(cells).rstrip(), width)
        click.echo(click.style(line, bold=True) if styled else line)
        text, match = fit_snippet(h.snippet, h.match, width - indent, marks)
        click.echo(" " * indent + marked(text, match, styled))


@click.command()
@click.argument("db", type=DATABASE)
@click.argument("conversation", metavar="CONV", type=TEXT)
@click.argument("query", metavar="QUERY", type=TEXT)
@click.option("--scope", type=click.Choice(list(WHERE)), default="forgotten", show_default=True,
              help="Where to search: the events condensations hid, those in view, or all of HEAD's branch.")
@old_spelling("--all", into="scope", new="--scope all", is_flag=True, value="all")
@old_spelling("--visible", into="scope", new="--scope visible", is_flag=True, value="visible")
@click.option("--kind", "kinds", multiple=True, metavar="KIND", type=TEXT, callback=_kinds,
              help="Only events of this kind (message, action, observation, error, ...); repeatable.")
@click.option("--tool", "tools", multiple=True, metavar="NAME", type=TEXT,
              help="Only the calls and results of this tool (terminal, ...); repeatable.")
@click.option("--before", metavar="ISO", type=TEXT, callback=_timestamp, help="Only events before this time.")
@click.option("--after", metavar="ISO", type=TEXT, callback=_timestamp, help="Only events after this time.")
@click.option("-n", "--limit", type=count(1), default=10, metavar="N", show_default=True,
              help="At most this many hits, the best first.")
@output_format()
def search(db: str, conversation: str, query: str, scope: str, kinds: tuple[str, ...],
           tools: tuple[str, ...], before: str | None, after: str | None, limit: int, fmt: str) -> None:
    """Find events of CONV by words, a "phrase" or a fragment of a name or path.

    By default only among the events condensations hid from the model (what it sees needs
    no search); --scope all searches HEAD's whole branch, --scope visible only what is in
    view. Each hit gives the event's id, kind, tool, time and the condensation that hid it,
    then a snippet with the match highlighted (marked [[like this]] when not on a
    terminal). Read a hit in full with `show`.

    \b
    Example:
      openhands-memory search agent.db fix-bug "KeyError"
      openhands-memory search agent.db fix-bug config_loader --scope all
      openhands-memory search agent.db fix-bug "no such file" --tool terminal
      openhands-memory search agent.db fix-bug pytest --kind action -n 20
    """
    store = open_reader(db)
    conv = open_conversation(store, conversation)
    hits = conv.search(query, limit=limit, scope=scope,  # type: ignore[arg-type]
                       kinds=kinds or None, tools=tools or None, before=before, after=after)
    if fmt == "json":
        echo_json({"conversation": conv.id, "query": query, "scope": scope, "hits": [h.to_dict() for h in hits]})
        return
    asked = f'"{one_line(printable(query))}"'
    if not hits:
        hint = " (--scope all searches the events in view too)" if scope == "forgotten" else ""
        say(f"no hits for {asked} {WHERE[scope]} of {conv.id}{hint}")
        return
    more = f" (the best {limit}; --limit for more)" if len(hits) == limit else ""
    say(f"{conv.id} · {plural(len(hits), 'hit')} for {asked} {WHERE[scope]}{more}")
    echo_hits(hits, term_width())


# --- show --------------------------------------------------------------------------------------


def wrapped(text: str, width: int) -> list[str]:
    """``text``'s lines, each wrapped to ``width`` columns (blank lines kept)."""
    out: list[str] = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = printable(line.expandtabs(4)).rstrip()
        out += textwrap.wrap(line, width, break_on_hyphens=False) or [""]
    return out


def ids(values: Sequence[int]) -> str:
    return ", ".join(str(v) for v in values) if values else "none"


def footer(r: "Recalled", max_chars: int) -> list[str]:
    """The facts under the text: the tool call or result, in view or forgotten, the time, the
    ids to scroll with, and whether the text was cut."""
    parts = []
    if r.kind == "ActionEvent":
        parts.append(f"tool result: #{r.pair}" if r.pair is not None else "no tool result")
    elif r.pair is not None:
        parts.append(f"tool call: #{r.pair}")
    parts.append("in view" if r.shown else "forgotten")
    if r.timestamp:
        parts.append(when(r.timestamp))
    parts.append(f"before: {ids(r.before)}")
    parts.append(f"after: {ids(r.after)}")
    if r.truncated:
        parts.append(f"cut to {max_chars:,} characters (--max-chars for more)")
    return parts


def joined(parts: Sequence[str], width: int, sep: str = " · ", indent: str = "  ") -> list[str]:
    """``parts`` joined by ``sep`` on as few lines as ``width`` allows, broken between parts,
    further lines indented (a part too long for a line of its own is wrapped)."""
    lines: list[str] = []
    line = ""
    for part in parts:
        if line and len(line) + len(sep) + len(part) <= width:
            line += sep + part
            continue
        if line:
            lines.append(line)
        lead = indent if lines else ""
        pieces = textwrap.wrap(part, width, initial_indent=lead, subsequent_indent=indent,
                               break_on_hyphens=False) or [lead]
        lines += pieces[:-1]
        line = pieces[-1]
    return lines + [line]


@click.command()
@click.argument("db", type=DATABASE)
@click.argument("conversation", metavar="CONV", type=TEXT)
@click.argument("seq", type=EVENT_ID, metavar="SEQ")
@click.option("-w", "--window", type=count(0), default=2, metavar="N", show_default=True,
              help="How many neighbour ids to list each side, to scroll with.")
@click.option("--max-chars", type=count(1), default=4000, metavar="N", show_default=True,
              help="Cut the text to this many characters (its head and tail kept).")
@output_format()
def show(db: str, conversation: str, seq: int, window: int, max_chars: int, fmt: str) -> None:
    """Event SEQ of CONV in full: as a summarizer reads it, forgotten or not.

    Under the text, a line gives its tool call or result (#N), whether the model sees it
    now or a condensation forgot it, and the ids before and after it on HEAD's branch, to
    scroll with. --json gives the text uncut by the terminal and the same facts.

    \b
    Example:
      openhands-memory show agent.db fix-bug 13
      openhands-memory show agent.db fix-bug 13 --window 5 --json
    """
    store = open_reader(db)
    conv = open_conversation(store, conversation)
    recalled = conv.read(seq, window=window, max_chars=max_chars)
    if fmt == "json":
        echo_json(recalled.to_dict())
        return
    width = term_width()
    for line in wrapped(recalled.text, width):
        click.echo(line)
    click.echo("")
    for line in joined(footer(recalled, max_chars), width):
        click.echo(line)


# --- search-index ------------------------------------------------------------------------------


@click.command("search-index")
@click.argument("db", type=DATABASE)
@click.argument("state", required=False, type=click.Choice(["on", "off"]))
@output_format()
def search_index(db: str, state: str | None, fmt: str) -> None:
    """Say whether DB keeps the full-text index that search reads, or switch it on or off.

    Off, every append skips the work of indexing (appends run at about twice the
    rate) and search refuses, saying how to turn it on. On, every stored event is indexed
    in one transaction, with a progress bar: the database is then as if it had always
    kept the index.

    \b
    Example:
      openhands-memory search-index agent.db
      openhands-memory search-index agent.db off
      openhands-memory search-index agent.db on
    """
    from .opening import open_store
    from .output import progress_bar

    if state is None:
        on = open_reader(db).search_index
        changed = False
    else:
        on = state == "on"
        update, finish = progress_bar("indexing events for search") if on else (None, None)
        try:
            changed = open_store(db).set_search_index(on, update)
        finally:
            if finish is not None:
                finish()
    if fmt == "json":
        echo_json({"search_index": "on" if on else "off", "changed": changed})
        return
    if state is None:
        say(f"The search index is {'on' if on else 'off'}.")
    else:
        say(f"The search index is {'now' if changed else 'already'} {state}.")
