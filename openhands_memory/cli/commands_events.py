"""Event commands: append, view, history."""

from __future__ import annotations

import itertools
import json
import sys
import textwrap
from typing import TYPE_CHECKING, Any, Iterator

import click


if TYPE_CHECKING:
    from ..conversation import EventStore
from .describe import kind_label, one, pin_text, source_label
from .opening import conversation as open_conversation
from .opening import judge, open_reader, shown, writing_store
from .. import ranges
from .output import Column, Table, echo_csv, echo_json, id_runs, note, one_line, term_width
from .params import DATABASE, EVENT_ID, TEXT, event_in
from .vocabulary import old_spelling, output_format

# --- append ----------------------------------------------------------------------------------


@click.command()
@click.argument("db", type=DATABASE)
@click.argument("conversation", metavar="CONV", type=TEXT)
@click.argument("file", required=False, type=TEXT)
@click.option("--create", is_flag=True, help="Create DB and the conversation if they do not exist yet.")
@output_format()
def append(db: str, conversation: str, file: str | None, create: bool, fmt: str) -> None:
    """Append the events in FILE (or stdin) to conversation CONV, all in one transaction.

    FILE holds one event object, a JSON list of them, or JSON Lines, in the SDK's shape
    ({"kind": "MessageEvent", ...}). Each event gets the next id: 0, 1, 2, ...
    A bad event is named (file and line) and nothing is written; with --create, a new
    file or conversation is made only if every event is appended.

    \b
    Example:
      openhands-memory append agent.db fix-bug events.jsonl --create
      openhands-memory export old.db b1 | openhands-memory append new.db b1
    """
    from ..errors import ConversationNotFound
    from ..io.common import append_events, read_bounded, read_stream
    from ..io.jsonl import parse_bytes

    if file is None and sys.stdin.isatty():
        raise click.UsageError("give a FILE, or pipe the events on stdin")
    judge(db, must_exist=not create)  # judge the database before reading anything
    if file in (None, "-"):
        where = "<stdin>"
        data = read_stream(sys.stdin.buffer, where)
    else:
        where = file
        data = read_bounded(file)
    events = parse_bytes(data, where)
    with writing_store(db, create=create) as store:
        try:
            cid = store.find_conversation(conversation)
        except ConversationNotFound:
            if not create:
                raise click.ClickException(
                    f"no conversation with id {conversation!r} in {shown(db)} (use --create to start it)"
                ) from None
            cid = conversation
        result = append_events(store, cid, events, create=create)
    ids, created = result.ids, result.created
    if fmt == "json":
        echo_json({"conversation": cid, "created": created, "ids": ids})
    elif not ids:
        click.echo(f"{'created ' + cid + '; ' if created else ''}no events in {where}: nothing appended")
    else:
        if created:
            click.echo(f"created conversation {cid}")
        click.echo(f"appended {len(ids)} event{'s' if len(ids) != 1 else ''} to {cid}: "
                   f"id{'s' if len(ids) != 1 else ''} {id_runs(ids)}")


# --- view ------------------------------------------------------------------------------------


def view_json(view: Any) -> dict[str, Any]:
    return {
        "conversation": view.conversation_id,
        "upto": view.upto,
        "path": None if view.path is None else [[a, b] for a, b in view.path],
        "last_condensation": view.last_condensation,
        "unhandled_condensation_request": view.unhandled_condensation_request,
        "dropped": [{"property": d.property, "ids": list(d.seqs), "uids": list(d.ids)} for d in view.dropped],
        "events": [event_json(view, e) for e in view.events],
        "pins": [{"id": p.seq, "mode": p.mode, "label": p.label, "group": p.group, "rule": p.rule,
                  "pinned_at": p.at} for p in view.pins],
        "reinjected": view.reinjected,
    }


def event_json(view: Any, e: Any) -> dict[str, Any]:
    """One event of a view's JSON: a pinned one says how (``pinned``); a re-injected pin
    (kind PinnedContextEvent) names the event it shows again (``pinned_seq``)."""
    out: dict[str, Any] = {"id": e.seq, "event": e.to_json_dict()}
    seq = e.pinned_seq if e.kind == "PinnedContextEvent" else e.seq
    pin = view.pins.get(seq) if seq is not None else None
    if pin is not None:
        out["pinned"] = pin.mode
    if e.kind == "PinnedContextEvent":
        out["pinned_seq"] = e.pinned_seq
    return out


def path_text(path: Any, most: int = 4) -> str:
    """A path's id intervals, ``0..2, 5..6``; past ``most`` of them, the last ones and a count."""
    runs = [f"{s}..{e}" if e > s else f"{s}" for s, e in path]
    if len(runs) > most:
        runs = runs[:1] + [f"({len(runs) - most + 1} more)"] + runs[-(most - 2):]
    return ", ".join(runs)


# The id cell of a re-injected pin, as "S" is a summary's. Letters, not an emoji: an emoji
# takes two columns and would shift its row out of the table's alignment.
PIN_MARK = "P"


def pin_cell(v: Any, seq: int) -> str:
    """The "pin" cell: how event ``seq`` is pinned (keep or reinject), or nothing."""
    pin = v.pins.get(seq)
    return pin.mode if pin is not None else ""


def reinjected_preview(e: Any) -> str:
    """A re-injected pin's preview: the event it shows again, without the framing line."""
    head, _, body = e.text.partition("\n")
    return one_line(body or head)


def echo_view(conversation_id: str, v: Any, historical: bool = False, empty_head: bool = False) -> None:
    """The view as a table: a header line, one row per event, notes on stderr.

    On a history tree the view is the path from HEAD (or from the event asked for) to the
    root: what it leaves out is counted among the events on that path, not among all ids."""
    if v.upto < 0:
        if empty_head:
            click.echo(f"{conversation_id}: HEAD is empty, so the view is too (the next event starts a new root)")
        else:
            click.echo(f"{conversation_id} has no events yet")
        return
    again = sum(1 for e in v.events if e.kind == "PinnedContextEvent")
    summaries = sum(1 for e in v.events if e.seq is None) - again
    derived = summaries + again
    on_path = v.upto + 1 if v.path is None else ranges.count(v.path)
    where = "" if v.path is None else f" (path {path_text(v.path)})"
    click.echo(textwrap.fill(
        # Stored events and the summary counted apart, as `stats` and `conversations` count
        # visible events.
        f"{conversation_id} · view {'as of' if historical else 'after'} event {v.upto}{where} · "
        f"{len(v) - derived:,} events" + (f" + {summaries} summary" if summaries else "")
        + (f" + {again} re-injected pin{'s' if again != 1 else ''}" if again else "")
        + f" · {on_path - (len(v) - derived):,} of {on_path:,} left out",
        term_width(), break_on_hyphens=False,
    ))
    # A "pin" column only when there are pins, so that a view without any looks as it did.
    pinned = bool(v.pins) or again > 0
    columns = [Column("id", ">"), Column("kind"), Column("source")]
    columns += [Column("pin", min=4)] if pinned else []
    table = Table(columns + [Column("preview", flex=True, min=10)])
    for e in v.events:
        d = e.to_json_dict()
        if e.kind == "PinnedContextEvent":
            cells = [PIN_MARK, "pinned", source_label(e.source)]
            cells += [pin_cell(v, e.pinned_seq)] if pinned else []
            table.add(cells + [reinjected_preview(e)], {"fg": "magenta"})
        elif e.seq is None:
            cells = ["S", "summary", source_label(e.source)] + ([""] if pinned else [])
            table.add(cells + [one(d)], {"fg": "cyan", "bold": True})
        else:
            cells = [e.seq, kind_label(e.kind), source_label(e.source)]  # type: ignore[list-item]
            cells += [pin_cell(v, e.seq)] if pinned else []
            table.add(cells + [one(d)], {"bold": True} if e.seq in v.pins else None)
    table.echo()
    if again:
        shown = ", ".join(f"#{e.pinned_seq}" for e in v.events if e.kind == "PinnedContextEvent")
        note(f"note: pinned event{'s' if again != 1 else ''} {shown} forgotten by a condensation, shown "
             f"again after the summary ({PIN_MARK} rows)")
    for d in v.dropped:
        note(f"note: {len(d.seqs)} event(s) left out because {d.property.replace('_', ' ')} requires it: "
             f"{id_runs(s for s in d.seqs if s is not None)}")
    if v.unhandled_condensation_request:
        note("note: a condensation was requested and not done yet (run `condense`)")


@click.command()
@click.argument("db", type=DATABASE)
@click.argument("conversation", metavar="CONV", type=TEXT)
@click.option("--at", type=EVENT_ID, metavar="N",
              help="The view right after event N: what HEAD at N would give, on any branch.")
@old_spelling("--head", into="at", new="--at", type=EVENT_ID, metavar="N")
@output_format("messages")
def view(db: str, conversation: str, at: int | None, fmt: str) -> None:
    """What the agent sees now: the events sent to the model, with the summary in place.

    On a history tree (see `branches`) that is the path from HEAD to the root; --at N
    shows the view right after event N, the path from N to the root, whichever branch N is
    on. --format messages prints the provider messages (litellm's shape) instead. With pins
    (see `pins`), a "pin" column says keep or reinject; a pinned event a condensation forgot
    is shown again after the summary, as a "P" row.

    \b
    Example:
      openhands-memory view agent.db fix-bug
      openhands-memory view agent.db fix-bug --at 120 --format messages
    """
    store = open_reader(db)
    conv = open_conversation(store, conversation)
    last = len(conv) - 1
    event_in(at, last, conv.id, "--at")
    v = conv.view(at=at)
    if fmt == "json":
        echo_json(view_json(v))
        return
    if fmt == "messages":
        echo_json(v.to_messages())
        return
    echo_view(conv.id, v, at is not None, empty_head=last >= 0 and at is None)
    store.close()


# --- history ---------------------------------------------------------------------------------


def history_rows(store: "EventStore", cid: str, start: int, stop: int | None,
                 path: list[ranges.Run]) -> Iterator[dict[str, Any]]:
    """The library's history rows, each with a one-line preview for the table, and whether it
    lies on HEAD's ``path`` (``on_head_path``: false for the events of other branches)."""
    from ..inspection import history
    from ..inspection.history import on_path

    for row in history(store, cid, start, stop):
        out = row.as_dict()
        out["on_head_path"] = on_path(path, row.id)
        info = row.condensation
        if row.kind == "PinEvent":
            # A pin names its event by external id: the id reads better.
            out["preview"] = one_line(pin_text(row.payload, row.pinned_id))
            yield out
            continue
        if info is not None:
            forgot = info["forgotten_ranges"]
            n = sum(e - s + 1 for s, e in forgot)
            how = "/".join(x for x in (info.get("strategy"), info.get("reason")) if x)
            text = (f"[{how}] " if how else "") + f"forgot {n}"
            if forgot:
                text += f" ({id_runs(i for s, e in forgot for i in range(s, e + 1))})"
            if info.get("summary") is not None:
                text += " · summary: " + one({"kind": "CondensationSummaryEvent", "summary": info["summary"]})
            out["preview"] = " ".join(text.split())
        else:
            out["preview"] = one(row.payload)
        yield out


@click.command()
@click.argument("db", type=DATABASE)
@click.argument("conversation", metavar="CONV", type=TEXT)
@click.option("--from", "start", type=EVENT_ID, default=0, metavar="N", help="First event id to show.")
@click.option("--to", "stop", type=EVENT_ID, default=None, metavar="N", help="Last event id to show.")
@output_format("csv")
def history(db: str, conversation: str, start: int, stop: int | None, fmt: str) -> None:
    """Every event of CONV, forgotten or not.

    A forgotten event shows the id of the condensation that hid it (its "hid by" column); a
    condensation shows its strategy/reason, what it forgot and the start of its summary.
    On a history tree, the events off HEAD's path (other branches) say "other" in a
    "branch" column; JSON and CSV give every event's on_head_path. A pin event reads
    "pin #12 keep 'plan'" or "unpin #12" (JSON: the pinned event's id as pinned_id).

    \b
    Example:
      openhands-memory history agent.db fix-bug --from 100 --to 140
    """
    from ..inspection.history import head_path

    store = open_reader(db)
    cid = store.find_conversation(conversation)
    last = len(store.conversation(cid)) - 1 if fmt == "text" else -1  # read before the path
    path = head_path(store, cid)
    rows = history_rows(store, cid, start, stop, path)
    if fmt == "text":
        first = next(rows, None)
        if first is None:
            click.echo(f"{cid} has no events" + (" in that range" if start or stop is not None else " yet"))
            return
        rows = itertools.chain([first], rows)
    if fmt == "json":
        click.echo("[", nl=False)
        for i, row in enumerate(rows):
            click.echo(("," if i else "") + "\n  " + json.dumps(row, ensure_ascii=False), nl=False)
        click.echo("\n]")
        return
    keys = ["id", "uid", "kind", "source", "timestamp", "llm_visible", "forgotten_by", "on_head_path", "preview"]
    if fmt == "csv":
        echo_csv(keys, ([r[k] for k in keys] for r in rows))
        return
    # The events in range off HEAD's path (other branches): a "branch" column says which,
    # shown only when there are some, so that a history with no branches looks as it did.
    hi = last if stop is None else min(stop, last)
    off = [(max(s, start), min(e, hi)) for s, e in ranges.complement(path, last) if e >= start and s <= hi]
    columns = [Column("id", ">"), Column("kind"), Column("source"), Column("hid by", ">")]
    columns += [Column("branch")] if off else []
    table = Table(columns + [Column("preview", flex=True, min=10)])
    for r in rows:
        style = None
        if r["kind"] == "Condensation":
            style = {"fg": "cyan"}
        elif r["forgotten_by"] is not None or not r["on_head_path"]:
            style = {"dim": True}
        cells = [r["id"], kind_label(r["kind"]), source_label(r["source"]),
                 "" if r["forgotten_by"] is None else f"#{r['forgotten_by']}"]
        cells += ["" if r["on_head_path"] else "other"] if off else []
        table.add(cells + [r["preview"]], style)
    table.echo()
    if off:
        n = ranges.count(off)
        note(f"note: {n:,} event{'s' if n != 1 else ''} not on HEAD's path (other branches, see "
             f"`branches`): {path_text(off, most=8)}")
