"""Keeping a digest within its budget: a cap on the items of each list, then a cap on the
characters of the whole text, dropping the oldest items first and never the current state."""

from __future__ import annotations

from .digest import LIST_KEYS, Digest
from .layout import HEADER, item_lines, render
from .text import clip

# How many items each list keeps before the oldest ones become an "omitted" count.
CAPS: dict[str, int] = {
    "requests": 30,
    "changed": 40,
    "read": 40,
    "commands": 20,
    "errors": 10,
    "pages": 10,
}


def cap(d: Digest) -> None:
    for key in LIST_KEYS:
        drop_oldest(d, key, len(d.items(key)) - CAPS[key])


def drop_oldest(d: Digest, key: str, n: int) -> None:
    if n > 0:
        items = d.items(key)
        del items[:n]
        d.omitted[key] += n


# The order in which lists give up their oldest items when the text is too long, and how many
# items each keeps in the first pass. The first pass spares the most useful items. The second
# pass (floor 0) empties lists in the same order. The current state is never trimmed.
_TRIM_PASSES: tuple[tuple[tuple[str, int], ...], ...] = (
    (("commands", 5), ("pages", 2), ("errors", 3), ("read", 5), ("earlier", 1000),
     ("changed", 5), ("requests", 3)),
    (("commands", 0), ("pages", 0), ("read", 0), ("errors", 0), ("earlier", 0),
     ("changed", 0), ("requests", 1), ("requests", 0)),
)


def fit(d: Digest, max_chars: int) -> str:
    text = render(d)
    for trim_pass in _TRIM_PASSES:
        for key, floor in trim_pass:
            while len(text) > max_chars:
                if not _trim(d, key, floor, len(text) - max_chars):
                    break
                text = render(d)
    if len(text) > max_chars:
        # Only the current state is left and it is still too long (a tiny max_chars). Keep the
        # header and the newest part, as the state is the last section.
        marker = f"\n[... {len(text)} chars clipped ...]\n"
        keep = max_chars - len(HEADER) - len(marker)
        text = HEADER + marker + text[len(text) - keep:] if keep > 0 else text[:max_chars]
    return text


def _trim(d: Digest, key: str, floor: int, excess: int) -> bool:
    """Drop just enough oldest items of one list (or clip the earlier summary). False: nothing left to drop."""
    if key == "earlier":
        if len(d.earlier) <= floor:
            return False
        limit = max(floor, len(d.earlier) - excess - 64)  # some slack for the clip note
        d.earlier = clip(d.earlier, limit) if limit > 0 else ""
        return True
    items = d.items(key)
    n, freed = 0, 0
    while len(items) - n > floor and freed < excess:
        freed += sum(len(ln) + 1 for ln in item_lines(key, items[n]))
        n += 1
    if n == 0:
        return False
    drop_oldest(d, key, n)
    return True
