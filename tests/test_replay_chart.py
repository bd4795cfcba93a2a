"""The replay's SVG chart and HTML page: well-formed, self-contained, escaped, compact and
deterministic, for small, huge and empty histories."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest

from openhands_memory.replay.chart import MAX_MARKERS, html_page, svg_chart
from openhands_memory.replay.report import CallInput, Prices, Replay, ReplaySet, StrategyReplay, Totals

SVG_NS = "http://www.w3.org/2000/svg"


class Collector(HTMLParser):
    """Every start tag with its attributes, and the text (the parser raises on nothing,
    so also check that each opened element was closed in order)."""

    VOID = {"meta", "br", "hr", "img", "input", "link"}
    SVG_SELF_CLOSED = {"line", "circle", "rect", "path", "polyline"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.open: list[str] = []
        self.doctype: str | None = None

    def handle_decl(self, decl: str) -> None:
        self.doctype = decl

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        assert self.open and self.open[-1] == tag, (tag, self.open[-5:])
        self.open.pop()

    def handle_data(self, data):
        self.text.append(data)

    def with_class(self, cls: str) -> list[dict[str, str | None]]:
        return [a for _, a in self.tags if a.get("class") == cls]


def parse(page: str) -> Collector:
    c = Collector()
    c.feed(page)
    c.close()
    assert c.open == []
    return c


def calls(tokens: list[int], condensed: set[int] = frozenset()) -> list[CallInput]:
    return [
        CallInput(call=i, seq=10 * i, input_tokens=t, cached_tokens=t // 2, events=i + 1, condensed=i in condensed)
        for i, t in enumerate(tokens)
    ]


def strategy(label: str, tokens: list[int], condensed: set[int] = frozenset(), **kw) -> StrategyReplay:
    cs = calls(tokens, condensed)
    totals = Totals(
        calls=len(cs),
        input_tokens=sum(tokens),
        cached_tokens=sum(c.cached_tokens for c in cs),
        output_tokens=7 * len(cs),
        peak_context=max(tokens, default=0),
        condensations=len(condensed),
        forgotten={"observation": 3, "action": 2} if condensed else {},
        cost_usd=kw.pop("cost_usd", None),
        cost_cached_usd=kw.pop("cost_cached_usd", None),
    )
    return StrategyReplay(label=label, calls=cs, totals=totals, **kw)


def small_replay(conversation: str = "conv-1", labels=("recorded", "window 40", "summarize 0.5")) -> Replay:
    grow = [1200, 2500, 4100, 5200, 7900, 9100, 12000]
    strategies = [strategy(labels[0], grow, baseline=True, cost_usd=0.0421)]
    if len(labels) > 1:
        strategies.append(strategy(labels[1], [1200, 2500, 4100, 2000, 3600, 2100, 3900], {3, 5}, cost_usd=0.02))
    for label in labels[2:]:
        strategies.append(
            strategy(label, [1200, 2500, 4100, 1500, 2700, 4000, 1800], {3, 6}, cost_usd=0.015, cost_cached_usd=0.009)
        )
    return Replay(
        conversation=conversation,
        events=40,
        calls=7,
        tokenizer="tiktoken:o200k_base",
        prices=Prices(model="gpt-4o", input=2.5e-6, cached_input=1.25e-6, output=1e-5),
        strategies=strategies,
    )


def huge_replay(n: int = 20_000) -> Replay:
    # A saw-tooth: contexts grow and are condensed every 37 calls (540 condensations,
    # more than MAX_MARKERS), and the baseline grows steadily.
    saw = [500 + (i % 37) * 900 for i in range(n)]
    condensed = {i for i in range(n) if i % 37 == 0 and i}
    return Replay(
        conversation="long",
        events=5 * n,
        calls=n,
        tokenizer="chars/4",
        strategies=[
            strategy("recorded", [500 + 3 * i for i in range(n)], baseline=True),
            strategy("window", saw, condensed),
            strategy("summary", [t // 2 + 100 for t in saw], condensed),
        ],
    )


def series_labels(page: str) -> list[str | None]:
    return [a["data-strategy"] for a in parse(page).with_class("series")]


def test_svg_is_well_formed_xml_with_one_series_per_strategy():
    replay = small_replay()
    svg = svg_chart(replay)
    root = ET.fromstring(svg)
    assert root.tag == f"{{{SVG_NS}}}svg"
    series = [e for e in root.iter() if e.get("class") == "series"]
    assert [e.get("data-strategy") for e in series] == ["recorded", "window 40", "summarize 0.5"]
    assert all(e.tag == f"{{{SVG_NS}}}polyline" for e in series)
    # The recorded run is dashed, the others are not; each series has its totals as a tooltip.
    assert series[0].get("stroke-dasharray") and not series[1].get("stroke-dasharray")
    tooltip = series[0].find(f"{{{SVG_NS}}}title")
    assert tooltip is not None and "recorded" in tooltip.text and "50,000 input tokens" not in tooltip.text
    assert f"{sum(c.input_tokens for c in replay.strategies[0].calls):,} input tokens" in tooltip.text
    # Seven points per series, distinct colours, and a dot per condensed call.
    assert all(len(e.get("points").split()) == 7 for e in series)
    assert len({e.get("stroke") for e in series}) == 3
    markers = [e for e in root.iter() if e.get("class") == "condensed"]
    assert [(m.get("data-strategy"), len(list(m))) for m in markers] == [("window 40", 2), ("summarize 0.5", 2)]
    text = " ".join(t for t in root.itertext())
    for expected in ("model call", "input tokens", "0", "10k", "window 40", "condensation"):
        assert expected in text


def test_html_page_parses_and_holds_the_chart_and_table():
    page = html_page(small_replay())
    assert page.startswith("<!DOCTYPE html>")
    c = parse(page)
    assert c.doctype is not None and c.doctype.lower() == "doctype html"
    assert ("meta", {"charset": "utf-8"}) in c.tags
    assert series_labels(page) == ["recorded", "window 40", "summarize 0.5"]
    text = " ".join(c.text)
    for expected in ("conv-1", "tiktoken:o200k_base", "gpt-4o", "$2.5", "40", "cost with cache", "pairs broken"):
        assert expected in text
    rows = [a for t, a in c.tags if t == "tr"]
    assert len(rows) == 1 + 3  # the header and one row per strategy
    assert "$0.0421" in text and "$0.0090" in text and "—" in text  # cost_cached_usd None: a dash
    assert "5" in text  # forgotten: 3 + 2


def test_page_is_self_contained():
    for page in (html_page(small_replay()), html_page(huge_replay(500)), svg_chart(small_replay())):
        assert set(re.findall(r"https?://[^\s\"'<>]*", page)) == {SVG_NS}
        lowered = page.lower()
        assert "<script" not in lowered and "<link" not in lowered and "<img" not in lowered
        assert "@import" not in lowered and "url(" not in lowered


def test_output_is_byte_identical_across_calls():
    assert html_page(small_replay()) == html_page(small_replay())
    assert svg_chart(huge_replay(3000)) == svg_chart(huge_replay(3000))


def test_huge_history_is_downsampled_but_keeps_its_extremes():
    replay = huge_replay()
    svg = svg_chart(replay)
    assert len(svg.encode()) < 200_000
    root = ET.fromstring(svg)
    series = [e for e in root.iter() if e.get("class") == "series"]
    assert len(series) == 3
    plot_width = 880 - 64 - 32
    for e in series:
        points = [tuple(map(float, p.split(","))) for p in e.get("points").split()]
        assert 2 <= len(points) <= 2 * (plot_width + 1)
        xs = [x for x, _ in points]
        assert xs == sorted(xs)  # in call order
    # The saw-tooth's peaks and troughs survive downsampling: the line's highest and
    # lowest points stand in the ratio of the full history's (the x axis is at y=312).
    bottom = 360 - 48
    peak, trough = 500 + 36 * 900, 500
    ys = [float(p.split(",")[1]) for p in series[1].get("points").split()]
    assert len(ys) < 2000
    scale = (bottom - min(ys)) / peak
    assert abs((bottom - max(ys)) - trough * scale) < 0.11
    assert min(ys) < 250  # a real peak, not a flat line
    markers = [e for e in root.iter() if e.get("class") == "condensed"]
    assert [len(list(m)) for m in markers] == [MAX_MARKERS, MAX_MARKERS]


def test_labels_and_ids_are_escaped():
    nasty = 'a<b & "c"'
    replay = small_replay(conversation='<conv & "1">', labels=(nasty, "x'y", "</svg><script>"))
    page = html_page(replay, title="<Title & co>")
    assert "<script" not in page
    assert nasty not in page and "<conv" not in page and "<Title" not in page
    assert "a&lt;b &amp; &quot;c&quot;" in page
    assert series_labels(page) == [nasty, "x'y", "</svg><script>"]
    ET.fromstring(svg_chart(replay))  # still well-formed XML


def test_zero_calls_render_empty_axes():
    replay = Replay(
        conversation="empty",
        events=2,
        calls=0,
        tokenizer="chars/4",
        strategies=[strategy("recorded", [], baseline=True), strategy("window", [])],
    )
    svg = svg_chart(replay)
    root = ET.fromstring(svg)
    assert "no model calls" in " ".join(root.itertext())
    assert series_labels(html_page(replay)) == ["recorded", "window"]
    assert "—" in html_page(replay)


@pytest.mark.parametrize(
    "tokens",
    [[4200], [0, 0, 0], [0]],
    ids=["one call", "all zero", "one zero call"],
)
def test_single_strategy_and_degenerate_values(tokens):
    replay = Replay(
        conversation="c", events=3, calls=len(tokens), tokenizer="t", strategies=[strategy("only", tokens, baseline=True)]
    )
    svg = svg_chart(replay)
    root = ET.fromstring(svg)
    assert "nan" not in svg.lower() and "inf" not in svg.lower()
    assert len([e for e in root.iter() if e.get("class") == "series"]) == 1
    if len(tokens) == 1:  # a one-point line draws nothing: the point is shown as a dot
        assert [e for e in root.iter() if e.get("class") == "point"]
    assert series_labels(html_page(replay)) == ["only"]


def test_many_strategies_cycle_colours_and_wrap_the_legend():
    labels = tuple(f"strategy number {i} with a rather long label" for i in range(10))
    replay = small_replay(labels=labels)
    root = ET.fromstring(svg_chart(replay))
    series = [e for e in root.iter() if e.get("class") == "series"]
    assert len(series) == 10
    assert series[0].get("stroke") == series[8].get("stroke")  # eight colours, then again


def test_replay_set_page_has_a_chart_per_conversation_and_the_summed_totals():
    a, b = small_replay("conv-a"), small_replay("conv-b")
    sums = [
        s.model_copy(update={"calls": [], "totals": s.totals.model_copy(update={"calls": 2 * s.totals.calls})})
        for s in a.strategies
    ]
    page = html_page(ReplaySet(conversations=[a, b], totals=sums))
    c = parse(page)
    assert series_labels(page) == ["recorded", "window 40", "summarize 0.5"] * 2
    assert len([a for t, a in c.tags if t == "svg"]) == 2
    assert len([a for t, a in c.tags if t == "tr"]) == 1 + 3
    text = " ".join(c.text)
    assert "conv-a" in text and "conv-b" in text and "2 conversations" in text and "14" in text
    assert text.count("gpt-4o") == 1  # the same prices, shown once
    assert html_page(ReplaySet(conversations=[], totals=[])).count("no conversations") == 1
