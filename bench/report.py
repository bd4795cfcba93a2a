"""Printing for the benches: plain aligned tables (first column left, the rest right)."""

from __future__ import annotations


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *map(line, rows)])
