"""History-tree commands: branches, navigate, fork (storage/tree.py).

A conversation is a tree, as in the OpenHands SDK: each event has a parent, HEAD can be moved
back, and the next event appended then starts a branch. The agent sees the path from HEAD to
the root (``view``; ``view --at N`` shows the path from any event N).
"""

from __future__ import annotations

import json
import textwrap
from typing import TYPE_CHECKING, Any, Sequence

import click

from .opening import conversation as open_conversation
from .opening import open_reader, writing_store
from .output import Column, Table, _unicode_ok, echo_json, number, term_width
from .params import DATABASE, EVENT_ID, TEXT
from .vocabulary import output_format

if TYPE_CHECKING:
    from ..storage.tree import Branch

DRAWING_MAX = 28  # columns the tree drawing may take before its indentation is cut


def fitted_path(path: Sequence[tuple[int, int]], room: int) -> str:
    """A path's id intervals (``0..2, 5, 7..9``, as ``ranges.text`` writes ids), within
    ``room`` columns if it can be: the runs in the middle give way first (``0, …, 58,
    60..61``), since the first says where the path starts and the last ones where its branch
    is; what still does not fit, the table cuts at the end."""
    runs = [f"{s}..{e}" if e > s else f"{s}" for s, e in path]
    text = ", ".join(runs)
    if len(text) <= room or len(runs) < 3:
        return text
    mark = "…" if _unicode_ok() else "~"
    for keep in range(len(runs) - 2, 0, -1):  # how many of the last runs to keep
        text = ", ".join([runs[0], mark, *runs[-keep:]])
        if len(text) <= room:
            return text
    return text


def drawing(indent: str, connector: str, leaf: int) -> str:
    """The tree cell: indentation, connector and leaf id; a deep one loses its left part."""
    text = f"{indent}{connector}{leaf}"
    if len(text) <= DRAWING_MAX:
        return text
    mark = "…" if _unicode_ok() else "~"
    return mark + text[len(text) - DRAWING_MAX + 1 :]


def head_sentence(head: int | None, branches: Sequence["Branch"]) -> str:
    if head is None:
        return "HEAD is empty: the next event starts a new root"
    if any(b.head for b in branches):
        return f"HEAD at event {head} (*)"
    return f"HEAD at event {head}, inside a branch: the next event starts a new branch there"


def branch_json(b: "Branch") -> dict[str, Any]:
    return {"leaf": b.leaf, "length": b.length, "fork": b.fork, "head": b.head,
            "path": [[s, e] for s, e in b.path]}


@click.command()
@click.argument("db", type=DATABASE)
@click.argument("conversation", metavar="CONV", type=TEXT)
@output_format()
def branches(db: str, conversation: str, fmt: str) -> None:
    """The branches of CONV's history tree: one line per leaf, drawn as a tree.

    Each line gives the leaf's id, its length (the events on its path to the root), its
    fork point (the nearest event before it where another branch parts from it; - for none,
    "root" for a new root) and its path as id intervals; * marks HEAD's branch. A branch is
    drawn under the one it shares most with. --json gives a list of {leaf, length, fork,
    head, path}.

    \b
    Example:
      openhands-memory branches agent.db fix-bug
      openhands-memory branches agent.db fix-bug --json
    """
    store = open_reader(db)
    conv = open_conversation(store, conversation)
    found = conv.branches()
    if fmt == "json":  # one branch a line, as `history --json` prints its rows
        click.echo("[", nl=False)
        for i, b in enumerate(found):
            click.echo(("," if i else "") + "\n  " + json.dumps(branch_json(b)), nl=False)
        click.echo("\n]")
        return
    if not found:
        click.echo(f"{conv.id} has no events yet")
        return
    head = conv.head
    events = len(conv)
    click.echo(textwrap.fill(
        f"{conv.id} · {events:,} event{'s' if events != 1 else ''} · {len(found):,} "
        f"branch{'es' if len(found) != 1 else ''} · {head_sentence(head, found)}",
        term_width(), break_on_hyphens=False,
    ))
    rows = []
    from ..inspection.branches import tree_order

    for b, indent, connector in tree_order(found, unicode=_unicode_ok()):
        if b.fork is not None:
            fork = number(b.fork)
        else:
            fork = "root" if b.path and b.path[0][0] != 0 else "-"
        rows.append((b, ["*" if b.head else "", drawing(indent, connector, b.leaf), number(b.length), fork]))
    # The path column gets what the other columns leave of the width.
    titles = ("", "leaf", "length", "fork")
    fixed = [max([len(title)] + [len(cells[i]) for _, cells in rows]) for i, title in enumerate(titles)]
    room = max(10, term_width() - sum(fixed) - 2 * len(fixed))
    table = Table([Column("", min=1), Column("leaf"), Column("length", ">"), Column("fork", ">"),
                   Column("path", flex=True, min=10)])
    for b, cells in rows:
        # Rows go in as they are, not through Table.add: it would squeeze the drawing's spaces.
        table.rows.append(cells + [fitted_path(b.path, room)])
        table.styles.append({"bold": True} if b.head else None)
    table.echo()


@click.command()
@click.argument("db", type=DATABASE)
@click.argument("conversation", metavar="CONV", type=TEXT)
@click.argument("seq", type=EVENT_ID, required=False, metavar="[SEQ]")
@click.option("--root", is_flag=True, help="Empty HEAD: the next event starts a new root.")
@output_format()
def navigate(db: str, conversation: str, seq: int | None, root: bool, fmt: str) -> None:
    """Move CONV's HEAD to event SEQ (--root: empty it), as the SDK's navigate_to.

    The next event appended follows SEQ: after an event inside a branch it starts a new
    branch there. Nothing is deleted; the agent's view becomes the path from SEQ to the
    root. A conversation the SDK persisted has its base_state.json moved along.

    \b
    Example:
      openhands-memory navigate agent.db fix-bug 41
      openhands-memory navigate agent.db fix-bug --root
    """
    from ..errors import EventNotFound

    if root and seq is not None:
        raise click.UsageError("give SEQ or --root, not both")
    if not root and seq is None:
        raise click.UsageError("give the event to move HEAD to (SEQ), or --root for an empty HEAD")
    with writing_store(db) as store:
        conv = open_conversation(store, conversation)
        if seq is not None and seq < 0:
            raise EventNotFound(conv.id, seq)
        conv.navigate(seq)
        head = conv.head
        leaf = head is not None and any(b.leaf == head for b in conv.branches())
    if fmt == "json":
        echo_json({"conversation": conv.id, "head": head})
    elif head is None:
        click.echo(f"HEAD of {conv.id} is empty now: the next event starts a new root")
    elif leaf:
        click.echo(f"HEAD of {conv.id} is at event {head} now, the leaf of its branch: the next event continues it")
    else:
        click.echo(f"HEAD of {conv.id} is at event {head} now: the next event starts a new branch after it")


@click.command()
@click.argument("db", type=DATABASE)
@click.argument("conversation", metavar="CONV", type=TEXT)
@click.option("--at", type=EVENT_ID, metavar="N", help="The event the copied path ends at (default: HEAD).")
@click.option("--as", "new_id", metavar="ID", type=TEXT, help="The new conversation's id (default: a new UUID).")
@output_format()
def fork(db: str, conversation: str, at: int | None, new_id: str | None, fmt: str) -> None:
    """Copy the path from event --at (default: HEAD) to the root into a new conversation.

    The copy holds the same events (same external ids), condensations and forgotten ranges,
    numbered 0, 1, 2, ... along the path; its metadata says where it came from
    (forked_from). CONV itself is left as it is.

    \b
    Example:
      openhands-memory fork agent.db fix-bug --at 41 --as fix-bug-retry
    """
    if new_id is not None and not new_id.strip():
        raise click.ClickException("--as needs a conversation id, not an empty string")
    with writing_store(db) as store:
        conv = open_conversation(store, conversation)
        if at is None and conv.head is None:  # an empty HEAD, or no events: no path to copy
            raise click.ClickException(
                f"HEAD of {conv.id} is empty: there is no path to fork (give --at N)" if len(conv)
                else f"{conv.id} has no events: there is nothing to fork"
            )
        new = conv.fork(at=at, conversation_id=new_id)
        length = len(new)
        leaf = (new.metadata.get("forked_from") or {}).get("event")
    if fmt == "json":
        echo_json({"conversation": new.id, "length": length, "forked_from": conv.id, "at": leaf})
        return
    click.echo(f"forked {conv.id} at event {leaf} into {new.id}: {length:,} event{'s' if length != 1 else ''}")
