"""Output: tables fitted to the terminal, JSON, CSV, and aligned key/value blocks.

Tables are for people: one line per row, cut to the terminal's width (``COLUMNS`` or 80 when
not a terminal), numbers right-aligned with thousands separators, over-long cells ending in
"…". JSON and CSV are for scripts: full values, nothing cut, numbers as numbers.
"""

from __future__ import annotations

import csv
import json
import shutil
import sys
import textwrap
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import click

from .. import ranges

ELLIPSIS = "…"
MIN_WIDTH = 40


def term_width() -> int:
    return max(MIN_WIDTH, shutil.get_terminal_size((80, 24)).columns)


def _unicode_ok() -> bool:
    encoding = (getattr(sys.stdout, "encoding", None) or "").lower()
    return encoding.startswith("utf")


def one_line(text: Any) -> str:
    """Whitespace runs (newlines included) collapsed to single spaces."""
    return " ".join(str(text).split())


def cut(text: str, width: int) -> str:
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    mark = ELLIPSIS if _unicode_ok() else "~"
    return text[: max(0, width - 1)] + mark


def number(value: Any) -> str:
    if value is None or value == "":
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.4f}" if abs(value) < 1 else f"{value:,.2f}"
    return str(value)


@dataclass
class Column:
    title: str
    align: str = "<"  # "<" or ">"
    flex: bool = False  # takes the room left over, and is cut first
    min: int = 3
    max: int | None = None  # cap on the natural width of a fixed column


class Table:
    """Rows of already-formatted cells (``str``); ``styles`` colour whole rows."""

    def __init__(self, columns: Sequence[Column]):
        self.columns = list(columns)
        self.rows: list[list[str]] = []
        self.styles: list[dict[str, Any] | None] = []

    def add(self, cells: Sequence[Any], style: dict[str, Any] | None = None) -> None:
        self.rows.append([one_line(number(c)) if not isinstance(c, str) else one_line(c) for c in cells])
        self.styles.append(style)

    def widths(self, total: int) -> list[int]:
        """Natural widths; when too wide for ``total``, flexible columns give way first (the
        widest first), then the others, never below their minimum."""
        natural = [
            max([len(c.title)] + [len(r[i]) for r in self.rows]) for i, c in enumerate(self.columns)
        ]
        widths = [min(n, c.max) if c.max and not c.flex else n for n, c in zip(natural, self.columns)]
        excess = sum(widths) + 2 * (len(widths) - 1) - total
        for pool in ([i for i, c in enumerate(self.columns) if c.flex], list(range(len(widths)))):
            while excess > 0:
                room = [i for i in pool if widths[i] > self.columns[i].min]
                if not room:
                    break
                i = max(room, key=lambda k: widths[k])
                others = [widths[k] for k in room if k != i]
                # Down to the next widest column (or by what is left to shed) in one step.
                step = min(excess, widths[i] - self.columns[i].min, max(1, widths[i] - max(others, default=0)))
                widths[i] -= step
                excess -= step
        return widths

    def lines(self, total: int | None = None) -> Iterable[tuple[str, dict[str, Any] | None]]:
        total = total or term_width()
        widths = self.widths(total)

        def render(cells: Sequence[str]) -> str:
            parts = []
            for cell, width, col in zip(cells, widths, self.columns):
                text = cut(cell, width)
                parts.append(text.rjust(width) if col.align == ">" else text.ljust(width))
            return "  ".join(parts).rstrip()

        yield render([c.title for c in self.columns]), {"bold": True}
        rule = "─" if _unicode_ok() else "-"
        yield "  ".join(rule * w for w in widths), {"dim": True}
        for row, style in zip(self.rows, self.styles):
            yield render(row), style

    def echo(self, total: int | None = None) -> None:
        for line, style in self.lines(total):
            click.echo(click.style(line, **style) if style else line)


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def echo_csv(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    stream = sys.stdout
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow(["" if v is None else v for v in row])


def echo_pairs(pairs: Sequence[tuple[str, Any]], indent: int = 0, wrap: bool = False) -> None:
    """Aligned ``label  value`` lines; with ``wrap``, long values continue on further lines
    under the value's first column, within the terminal's width."""
    if not pairs:
        return
    width = max(len(k) for k, _ in pairs)
    pad = " " * indent
    for key, value in pairs:
        text = value if isinstance(value, str) else number(value)
        line = f"{pad}{key.ljust(width)}  {text}".rstrip()
        if wrap and len(line) > term_width():
            line = textwrap.fill(line, term_width(), subsequent_indent=" " * (indent + width + 2),
                                 break_on_hyphens=False)
        click.echo(line)


def say(text: str) -> None:
    """A sentence for people, wrapped to the terminal's width (80 columns when unknown)."""
    click.echo(textwrap.fill(text, term_width(), subsequent_indent="  ", break_on_hyphens=False))


def heading(text: str) -> None:
    click.echo(click.style(text, bold=True))


def note(text: str) -> None:
    """A remark for people, on stderr, so that stdout stays clean for pipes."""
    click.echo(text, err=True)


def id_runs(ids: Iterable[int]) -> str:
    """``[1, 2, 3, 7, 9, 10]`` -> ``"1..3, 7, 9..10"``."""
    return ranges.text(ids)


def progress_bar(label: str):
    """(update(done, total), finish()): a progress bar on stderr when it is a terminal, else
    (None, None)."""
    if not sys.stderr.isatty():
        return None, None
    state: dict = {}

    def update(done: int, total: int) -> None:
        bar = state.get("bar")
        if bar is None:
            bar = state["bar"] = click.progressbar(length=total, label=label, file=sys.stderr)
            bar.__enter__()
        bar.update(done - bar.pos)

    def finish() -> None:
        if "bar" in state:
            state["bar"].__exit__(None, None, None)

    return update, finish
