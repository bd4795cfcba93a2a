"""Charts of a replay: the input tokens each strategy would have sent, call by call.

``svg_chart`` draws one conversation as a standalone SVG (usable as an image in a
README): one line per strategy, input tokens (y) against the model call's number (x),
the recorded run (the baseline) dashed, a dot where a condensation was made right
before the call, round ticks, axis titles and a legend. ``html_page`` wraps one
replay, or a set of them, in a self-contained HTML page: facts, the charts and a
totals table. Both are pure functions of the report: standard library only, no
scripts, no external resources, and equal inputs give byte-identical output.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Sequence

from .report import CallInput, Prices, Replay, ReplaySet, StrategyReplay

# Okabe-Ito, which stays distinguishable under the common colour-vision deficiencies;
# yellow is last because it is hard to see on white.
PALETTE = ("#000000", "#E69F00", "#56B4E9", "#009E73", "#0072B2", "#D55E00", "#CC79A7", "#F0E442")
MAX_MARKERS = 400  # condensation dots per series; more would only bloat the SVG
LABEL_CHARS = 40  # longer legend labels are cut (the tooltip keeps the whole label)
_MARGIN_LEFT, _MARGIN_RIGHT, _MARGIN_BOTTOM = 64, 32, 48  # the right one fits half a tick label


def colour(index: int) -> str:
    """The colour of the ``index``-th strategy (the palette cycles)."""
    return PALETTE[index % len(PALETTE)]


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _n(x: float) -> str:
    """A coordinate with one decimal at most: compact, and the same on every platform."""
    s = f"{x:.1f}"
    return s[:-2] if s.endswith(".0") else s


def _tokens(v: int) -> str:
    """A tick label: 0, 500, 1.5k, 20k, 1.2M."""
    if v >= 1_000_000:
        return f"{v / 1_000_000:g}M"
    if v >= 1_000:
        return f"{v / 1_000:g}k"
    return str(v)


def _usd(v: float | None) -> str:
    return "—" if v is None else f"${v:,.4f}"


def _nice_step(span: int, target: int) -> int:
    """The 1, 2 or 5 times a power of ten that cuts ``span`` into about ``target`` ticks."""
    raw = max(span / target, 1.0)
    magnitude = 1
    while magnitude * 10 <= raw:
        magnitude *= 10
    for m in (1, 2, 5, 10):
        if m * magnitude >= raw:
            return m * magnitude
    return 10 * magnitude  # unreachable: 10 * magnitude > raw


def _axis(span: int, target: int) -> tuple[int, int]:
    """The axis's top (a whole number of steps, at least one) and its step."""
    step = _nice_step(span, target)
    return max(-(-span // step), 1) * step, step


@dataclass(frozen=True)
class _Plot:
    """The plot area in pixels and the data ranges it maps (both axes start at 0)."""

    left: float
    top: float
    right: float
    bottom: float
    x_max: int
    y_max: int

    def x(self, call: int) -> float:
        return self.left + (self.right - self.left) * call / self.x_max

    def y(self, tokens: int) -> float:
        return self.bottom - (self.bottom - self.top) * tokens / self.y_max


def _downsample(calls: Sequence[CallInput], plot: _Plot) -> list[CallInput]:
    """Per pixel column, its lowest and highest call, in call order.

    A column holds many calls once a history has more calls than the plot has pixels;
    keeping its extremes keeps every peak and every drop (a condensation) visible while
    the line stays at two points per pixel at most.
    """
    columns: list[tuple[int, CallInput, CallInput]] = []  # (column, lowest, highest)
    for c in calls:
        col = int(plot.x(c.call))
        if not columns or columns[-1][0] != col:
            columns.append((col, c, c))
            continue
        _, lo, hi = columns[-1]
        if c.input_tokens < lo.input_tokens:
            lo = c
        elif c.input_tokens > hi.input_tokens:
            hi = c
        columns[-1] = (col, lo, hi)
    kept: list[CallInput] = []
    for _, lo, hi in columns:
        kept.extend([lo] if lo is hi else sorted((lo, hi), key=lambda c: c.call))
    return kept


def _evenly(items: Sequence[CallInput], cap: int) -> list[CallInput]:
    """At most ``cap`` of ``items``, evenly spaced, first and last included."""
    n = len(items)
    if n <= cap:
        return list(items)
    return [items[i * (n - 1) // (cap - 1)] for i in range(cap)]


def _summary(s: StrategyReplay) -> str:
    """One line on a strategy's totals: the series' tooltip."""
    t = s.totals
    text = (
        f"{s.label}{' (recorded)' if s.baseline else ''}: {t.calls:,} calls, "
        f"{t.input_tokens:,} input tokens, peak {t.peak_context:,}, {t.condensations:,} condensations"
    )
    if t.cost_usd is not None:
        text += f", {_usd(t.cost_usd)}"
    return text


def _short(label: str) -> str:
    return label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"


def _legend(strategies: Sequence[StrategyReplay], width: int) -> tuple[list[str], float]:
    """The legend's elements, wrapped into rows across the top, and the y below it."""
    items = [(_short(s.label), colour(i), s.baseline) for i, s in enumerate(strategies)]
    out: list[str] = []
    x, y = float(_MARGIN_LEFT), 18.0
    for text, col, dashed in [*items, ("condensation", "", False)]:
        w = 44 + 7.5 * len(text)  # sans-serif at 12 px: about 7.5 px per character
        if x + w > width - _MARGIN_RIGHT and x > _MARGIN_LEFT:
            x, y = float(_MARGIN_LEFT), y + 18
        if col:
            dash = ' stroke-dasharray="6 3"' if dashed else ""
            out.append(
                f'<line x1="{_n(x)}" y1="{_n(y)}" x2="{_n(x + 22)}" y2="{_n(y)}" '
                f'stroke="{col}" stroke-width="2"{dash}/>'
            )
        else:
            out.append(f'<circle cx="{_n(x + 11)}" cy="{_n(y)}" r="3" fill="#555"/>')
        out.append(f'<text x="{_n(x + 28)}" y="{_n(y)}" dy="0.32em">{_esc(text)}</text>')
        x += w
    return out, y + 14


def _axes(plot: _Plot, x_step: int, y_step: int) -> list[str]:
    """Grid lines, ticks, tick labels and the axis titles."""
    out: list[str] = []
    for v in range(0, plot.y_max + 1, y_step):
        y = _n(plot.y(v))
        out.append(f'<line x1="{_n(plot.left)}" y1="{y}" x2="{_n(plot.right)}" y2="{y}" stroke="#e6e6e6"/>')
        out.append(f'<text x="{_n(plot.left - 6)}" y="{y}" dy="0.32em" text-anchor="end">{_tokens(v)}</text>')
    for v in range(0, plot.x_max + 1, x_step):
        x = _n(plot.x(v))
        out.append(f'<line x1="{x}" y1="{_n(plot.bottom)}" x2="{x}" y2="{_n(plot.bottom + 4)}" stroke="#333"/>')
        out.append(f'<text x="{x}" y="{_n(plot.bottom + 17)}" text-anchor="middle">{v:,}</text>')
    out.append(
        f'<path d="M{_n(plot.left)} {_n(plot.top)}V{_n(plot.bottom)}H{_n(plot.right)}" fill="none" stroke="#333"/>'
    )
    mid_x, mid_y = (plot.left + plot.right) / 2, (plot.top + plot.bottom) / 2
    out.append(f'<text x="{_n(mid_x)}" y="{_n(plot.bottom + 38)}" text-anchor="middle">model call</text>')
    out.append(
        f'<text transform="translate(14 {_n(mid_y)}) rotate(-90)" text-anchor="middle">input tokens</text>'
    )
    return out


def svg_chart(replay: Replay, *, width: int = 880, height: int = 360) -> str:
    """A standalone SVG of each strategy's input tokens per model call (see the module)."""
    if width < 240 or height < 160:
        raise ValueError(f"a chart needs at least 240x160 pixels, not {width}x{height}")
    strategies = replay.strategies
    ordered = [sorted(s.calls, key=lambda c: c.call) for s in strategies]
    all_calls = [c for calls in ordered for c in calls]
    legend, legend_bottom = _legend(strategies, width)
    x_max, x_step = _axis(max((c.call for c in all_calls), default=0), 8)
    y_max, y_step = _axis(max((c.input_tokens for c in all_calls), default=0), 5)
    # The plot keeps at least 60 px of height even if a long legend has to overlap it.
    top = min(legend_bottom + 8, height - _MARGIN_BOTTOM - 60)
    plot = _Plot(_MARGIN_LEFT, top, width - _MARGIN_RIGHT, height - _MARGIN_BOTTOM, x_max, y_max)

    lines: list[str] = []
    dots: list[str] = []
    for i, (s, calls) in enumerate(zip(strategies, ordered)):
        col = colour(i)
        points = " ".join(f"{_n(plot.x(c.call))},{_n(plot.y(c.input_tokens))}" for c in _downsample(calls, plot))
        dash = ' stroke-dasharray="6 3"' if s.baseline else ""
        lines.append(
            f'<polyline class="series" data-strategy="{_esc(s.label)}" points="{points}" fill="none" '
            f'stroke="{col}" stroke-width="1.5" stroke-linejoin="round"{dash}>'
            f"<title>{_esc(_summary(s))}</title></polyline>"
        )
        marked = _evenly([c for c in calls if c.condensed], MAX_MARKERS)
        if len(calls) == 1 and not marked:  # a one-point line draws nothing: show the point
            c = calls[0]
            dots.append(
                f'<circle class="point" cx="{_n(plot.x(c.call))}" cy="{_n(plot.y(c.input_tokens))}" r="2" fill="{col}"/>'
            )
        if marked:
            circles = "".join(
                f'<circle cx="{_n(plot.x(c.call))}" cy="{_n(plot.y(c.input_tokens))}" r="3"/>' for c in marked
            )
            dots.append(
                f'<g class="condensed" data-strategy="{_esc(s.label)}" fill="{col}" stroke="#fff" '
                f'stroke-width="0.75">{circles}</g>'
            )

    caption = f"input tokens per model call: {replay.conversation}"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_esc(caption)}">',
        f"<title>{_esc(caption)}</title>",
        '<rect width="100%" height="100%" fill="#fff"/>',  # readable on dark themes too
        '<g font-family="sans-serif" font-size="12" fill="#333">',
        *_axes(plot, x_step, y_step),
        *legend,
    ]
    if not all_calls:
        mid_x, mid_y = (plot.left + plot.right) / 2, (plot.top + plot.bottom) / 2
        parts.append(f'<text class="empty" x="{_n(mid_x)}" y="{_n(mid_y)}" text-anchor="middle">no model calls</text>')
    parts += ["</g>", *lines, *dots, "</svg>"]
    return "\n".join(parts) + "\n"


_STYLE = """
body{font-family:system-ui,sans-serif;color:#222;max-width:960px;margin:2em auto;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em}
dl.facts{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}dt{color:#666}dd{margin:0}
svg{max-width:100%;height:auto}
table{border-collapse:collapse;font-size:.9em;margin:1em 0}
th,td{padding:.3em .6em;border-bottom:1px solid #ddd;text-align:left}
th{background:#f4f4f4}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.swatch{display:inline-block;width:.8em;height:.8em;margin-right:.4em;vertical-align:baseline}
.note{color:#666}
""".strip()

_COLUMNS = (
    "calls", "input tokens", "cached tokens", "peak context", "condensations", "summary calls",
    "forgotten", "pairs broken", "pins broken", "lost", "cost", "cost with cache",
)  # fmt: skip


def _prices(p: Prices) -> str:
    def per_million(v: float | None) -> str:
        return "—" if v is None else f"${v * 1_000_000:.4g}"

    return (
        f"{p.model}: input {per_million(p.input)}, cached input {per_million(p.cached_input)}, "
        f"output {per_million(p.output)} per million tokens"
    )


def _facts(rows: Sequence[tuple[str, str]]) -> str:
    return '<dl class="facts">' + "".join(f"<dt>{_esc(k)}</dt><dd>{_esc(v)}</dd>" for k, v in rows) + "</dl>"


def _table(strategies: Sequence[StrategyReplay]) -> str:
    """The totals, one row per strategy, its colour matching the chart's line."""
    head = '<tr><th>strategy</th>' + "".join(f'<th class="num">{c}</th>' for c in _COLUMNS) + "</tr>"
    rows = []
    for i, s in enumerate(strategies):
        t = s.totals
        forgotten = ", ".join(f"{k}: {v:,}" for k, v in sorted(t.forgotten.items()))
        cells = [
            f"{t.calls:,}", f"{t.input_tokens:,}", f"{t.cached_tokens:,}", f"{t.peak_context:,}",
            f"{t.condensations:,}", f"{t.summary_calls:,}",
            f'<span title="{_esc(forgotten)}">{sum(t.forgotten.values()):,}</span>' if forgotten else "0",
            f"{t.pairs_broken:,}", f"{t.pins_broken:,}", f"{t.lost:,}",
            _usd(t.cost_usd), _usd(t.cost_cached_usd),
        ]  # fmt: skip
        recorded = " <small>(recorded)</small>" if s.baseline else ""
        label = f'<span class="swatch" style="background:{colour(i)}"></span>{_esc(s.label)}{recorded}'
        rows.append(f"<tr><td>{label}</td>" + "".join(f'<td class="num">{c}</td>' for c in cells) + "</tr>")
    return f"<table>\n<thead>{head}</thead>\n<tbody>\n" + "\n".join(rows) + "\n</tbody>\n</table>"


def html_page(replay: Replay | ReplaySet, *, title: str | None = None) -> str:
    """A self-contained HTML page: facts, the chart(s) and the totals table."""
    if isinstance(replay, ReplaySet):
        conversations, totals = replay.conversations, replay.totals
        heading = title or f"Memory replay of {len(conversations)} conversations"
        facts = [
            ("conversations", f"{len(conversations):,}"),
            ("events", f"{sum(r.events for r in conversations):,}"),
            ("model calls", f"{sum(r.calls for r in conversations):,}"),
            ("tokenizer", ", ".join(sorted({r.tokenizer for r in conversations})) or "—"),
        ]
        # The distinct price maps, in order of first appearance.
        prices = {p.model_dump_json(): p for r in conversations if (p := r.prices) is not None}
        facts += [("prices", _prices(p)) for p in prices.values()]
        sections = [
            f"<section>\n<h2>{_esc(r.conversation)}</h2>\n"
            f'<p class="note">{r.events:,} events, {r.calls:,} model calls</p>\n{svg_chart(r)}</section>'
            for r in conversations
        ] or ['<p class="note">no conversations</p>']
    else:
        totals = replay.strategies
        heading = title or f"Memory replay: {replay.conversation}"
        facts = [
            ("conversation", replay.conversation),
            ("events", f"{replay.events:,}"),
            ("model calls", f"{replay.calls:,}"),
            ("tokenizer", replay.tokenizer),
        ]
        if replay.prices is not None:
            facts.append(("prices", _prices(replay.prices)))
        sections = [f"<section>\n{svg_chart(replay)}</section>"]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{_esc(heading)}</title>",
            f"<style>\n{_STYLE}\n</style>",
            "</head>",
            "<body>",
            f"<h1>{_esc(heading)}</h1>",
            _facts(facts),
            "<h2>Totals</h2>",
            _table(totals),
            *sections,
            "</body>",
            "</html>",
        ]
    ) + "\n"
