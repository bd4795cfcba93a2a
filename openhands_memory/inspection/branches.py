"""A history tree drawn as lines: the branches in a depth-first order, each with its
indentation and connector (the ``branches`` command's table and the web inspector's tree)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from ..storage.tree import Branch


def shared_until(a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]]) -> int | None:
    """The last event two root paths share (None: none, as for two roots). Paths from one
    root share a prefix, and their intervals break only where a branch jumps: the first
    interval that differs either starts elsewhere (they parted at the end of the one before)
    or ends elsewhere (they parted at the smaller end)."""
    last = None
    for (s1, e1), (s2, e2) in zip(a, b):
        if s1 != s2:
            return last
        if e1 != e2:
            return min(e1, e2)
        last = e1
    return last


def tree_order(branches: Sequence["Branch"], *, unicode: bool = True) -> list[tuple["Branch", str, str]]:
    """The branches in drawing order, each with its indentation and connector.

    Branches are ordered as a depth-first walk draws them: the one running furthest along a
    stretch first, so that a line comes before the branches that leave it. Each hangs under
    the branch before it in that order with which it shares the most (the deepest common
    event; ties go to the earlier), so the drawing is a tree whatever the fork points; the
    first line and new roots share nothing with what comes before them and start at the
    left. ``unicode``: box-drawing connectors (else ASCII ones)."""
    tee, elbow, bar = ("├─ ", "└─ ", "│  ") if unicode else ("|- ", "`- ", "|  ")
    order = sorted(branches, key=lambda b: [(s, -e) for s, e in b.path])
    rank = {b.leaf: i for i, b in enumerate(order)}
    children: dict[int | None, list[tuple[int, "Branch"]]] = {}
    for i, b in enumerate(order):
        best: tuple[int, "Branch"] | None = None
        for o in order[:i]:
            d = shared_until(b.path, o.path)
            if d is not None and (best is None or d > best[0]):
                best = (d, o)
        key = None if best is None else best[1].leaf
        children.setdefault(key, []).append((-1 if best is None else best[0], b))
    for kids in children.values():
        kids.sort(key=lambda pair: (pair[0], rank[pair[1].leaf]))
    out: list[tuple["Branch", str, str]] = []
    # Iteratively (a deep tree must not hit the recursion limit): (branch, indent, connector).
    stack: list[tuple["Branch", str, str]] = [(b, "", "") for _, b in reversed(children.get(None, []))]
    while stack:
        b, indent, connector = stack.pop()
        out.append((b, indent, connector))
        kids = children.get(b.leaf, [])
        below = indent + ("" if not connector else (bar if connector == tee else "   "))
        for k in range(len(kids) - 1, -1, -1):
            stack.append((kids[k][1], below, elbow if k == len(kids) - 1 else tee))
    return out
