"""Printing for the benches: plain aligned tables, 80 columns at most.

The first column is left-aligned, the rest right-aligned. When a table would be wider than
``width``, the first column's cells are shortened (ending in "~") so that the figures, which
are what a reader compares, are never cut.
"""

from __future__ import annotations

WIDTH = 80
GAP = "  "


def table(header: list[str], rows: list[list[str]], width: int = WIDTH) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    total = sum(widths) + len(GAP) * (len(widths) - 1)
    if total > width:
        widths[0] = max(8, widths[0] - (total - width))

    def fit(cell: str, w: int) -> str:
        return cell if len(cell) <= w else cell[: w - 1] + "~"

    def line(cells: list[str]) -> str:
        out = [fit(cells[0], widths[0]).ljust(widths[0])]
        out += [c.rjust(w) for c, w in zip(cells[1:], widths[1:])]
        return GAP.join(out).rstrip()

    return "\n".join([line(header), GAP.join("-" * w for w in widths), *map(line, rows)])
