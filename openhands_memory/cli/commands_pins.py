"""Pin commands: pin, unpin, pins (view/pins.py).

A pin keeps an event in front of the model: ``keep`` (no condensation forgets it) or
``reinject`` (a condensation may forget it; the view then shows it again right after the
summary, as standing context). A pin is an event like any other, so it has an id, belongs to
the branch it was made on, and ``view --at N`` before it shows no pin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from .opening import conversation as open_conversation
from .opening import open_reader, writing_store
from .output import Column, Table, echo_json, say
from .params import DATABASE, EVENT_ID, TEXT, count, event_in
from .vocabulary import output_format

if TYPE_CHECKING:
    from ..view import View
    from ..view.pins import Pin

SHOWN = "in view"
REINJECTED = "re-injected"
LEFT_OUT = "left out"


def pin_json(pin: "Pin", shown: str | None = None) -> dict[str, Any]:
    out = {"id": pin.seq, "mode": pin.mode, "label": pin.label, "group": pin.group, "rule": pin.rule,
           "pinned_at": pin.at}
    if shown is not None:
        out["shown"] = shown
    return out


def shown_as(view: "View") -> dict[int, str]:
    """How the view shows each pinned event: in the view, re-injected after the summary, or
    left out (not shown at all: a dropped tool pair, say)."""
    seqs = {s for s in view.seqs if s is not None}
    again = {getattr(e, "pinned_seq") for e in view.events if e.kind == "PinnedContextEvent"}
    return {p.seq: SHOWN if p.seq in seqs else REINJECTED if p.seq in again else LEFT_OUT for p in view.pins}


@click.command()
@click.argument("db", type=DATABASE)
@click.argument("conversation", metavar="CONV", type=TEXT)
@click.argument("seq", type=EVENT_ID, metavar="SEQ")
@click.option("-m", "--mode", type=click.Choice(["keep", "reinject"]), default="keep", show_default=True,
              help="keep: never forgotten; reinject: shown again after the summary once forgotten.")
@click.option("-l", "--label", metavar="TEXT", type=TEXT, help="A name for the pin (shown with it).")
@click.option("-g", "--group", metavar="NAME", type=TEXT, help="A newer pin in the same group replaces the older one.")
@click.option("--budget", type=count(0), metavar="TOKENS",
              help="Refuse the pin if all pinned events would take more tokens than this.")
@output_format()
def pin(db: str, conversation: str, seq: int, mode: str, label: str | None, group: str | None,
        budget: int | None, fmt: str) -> None:
    """Pin event SEQ of CONV, so that condensing never loses it from the model's view.

    --mode keep (the default): no condensation forgets the event. --mode reinject: a
    condensation may forget it, and the view then shows it again right after the summary,
    framed as standing context. The pin is stored as an event; its id is printed. Only an
    event the model is shown, on HEAD's branch, can be pinned; a forgotten one only with
    --mode reinject.

    \b
    Example:
      openhands-memory pin agent.db fix-bug 12
      openhands-memory pin agent.db fix-bug 31 --mode reinject --label plan
    """
    with writing_store(db) as store:
        conv = open_conversation(store, conversation)
        at = conv.pin(seq, mode, label=label, group=group, budget=budget)  # type: ignore[arg-type]
    if fmt == "json":
        echo_json({"conversation": conv.id, "event": seq, "mode": mode, "label": label, "group": group,
                   "id": at})
        return
    extra = [repr(label)] if label else []
    extra += [f"group {group}"] if group else []
    click.echo(f"pinned event {seq} ({', '.join([mode, *extra])}) as event {at}")


@click.command()
@click.argument("db", type=DATABASE)
@click.argument("conversation", metavar="CONV", type=TEXT)
@click.argument("seq", type=EVENT_ID, metavar="SEQ")
@output_format()
def unpin(db: str, conversation: str, seq: int, fmt: str) -> None:
    """Unpin event SEQ of CONV: later condensations may forget it again.

    The unpin is stored as an event too, so `view --at N` and `pins --at N` before it still
    show the pin. Only an event pinned on HEAD's branch can be unpinned.

    \b
    Example:
      openhands-memory unpin agent.db fix-bug 12
    """
    with writing_store(db) as store:
        conv = open_conversation(store, conversation)
        at = conv.unpin(seq)
    if fmt == "json":
        echo_json({"conversation": conv.id, "event": seq, "id": at})
        return
    click.echo(f"unpinned event {seq} as event {at}")


@click.command()
@click.argument("db", type=DATABASE)
@click.argument("conversation", metavar="CONV", type=TEXT)
@click.option("--at", type=EVENT_ID, metavar="N", help="The pins in force right after event N.")
@output_format()
def pins(db: str, conversation: str, at: int | None, fmt: str) -> None:
    """The pins in force in CONV (on HEAD's branch, or right after event --at N).

    One row per pinned event: its mode, label, group, the rule that pinned it (if a
    condenser's [[condenser.pins]] rule did), the id of the pin event, and how the view
    shows it now: "in view", "re-injected" (forgotten, shown again after the summary) or
    "left out".

    \b
    Example:
      openhands-memory pins agent.db fix-bug
      openhands-memory pins agent.db fix-bug --at 120 --json
    """
    store = open_reader(db)
    conv = open_conversation(store, conversation)
    last = len(conv) - 1
    event_in(at, last, conv.id, "--at")
    v = conv.view(at=at)
    shown = shown_as(v)
    found = list(v.pins)
    if fmt == "json":
        echo_json({"conversation": conv.id, "upto": v.upto, "pins": [pin_json(p, shown[p.seq]) for p in found]})
        return
    where = f"after event {at}" if at is not None else "now"
    if not found:
        say(f"{conv.id} has no pins {where} (pin an event with `openhands-memory pin`)")
        return
    n = len(found)
    again = sum(1 for s in shown.values() if s == REINJECTED)
    say(f"{conv.id} · {n} pin{'s' if n != 1 else ''} {where}"
        + (f" · {again} re-injected after the summary" if again else ""))
    table = Table([Column("event", ">"), Column("mode"), Column("label", flex=True, min=5),
                   Column("group", flex=True, min=5), Column("rule", flex=True, min=4),
                   Column("pinned at", ">"), Column("shown")])
    for p in found:
        table.add([p.seq, p.mode, p.label or "", p.group or "", p.rule or "", p.at, shown[p.seq]],
                  {"dim": True} if shown[p.seq] == LEFT_OUT else None)
    table.echo()
