"""The inspector's ASGI app: routes, read-only stores, templates, and the headers that keep a
history's untrusted text inert.

Every page is rendered on the server from ``pages.py``'s models and has a ``.json`` twin
with the same model. Handlers are plain functions: Starlette runs them in its thread pool,
and each thread reads through a read-only store of its own (a store holds one connection,
which is not shared between threads).
"""

from __future__ import annotations

import math
from contextlib import asynccontextmanager, contextmanager
import threading
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterator, Sequence
from urllib.parse import quote, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..errors import OpenHandsMemoryError
from . import call_page, pages
from .reading import Missing
from .timeline import Timelines

HERE = Path(__file__).resolve().parent

#: What a page may load: its own script and style, nothing inline, nothing from elsewhere.
#: Histories hold tool output and web pages; even a ``<script>`` that escaped escaping
#: would not run.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}


class Stores:
    """Read-only stores over one database, lent to one request at a time and kept for the
    next (a store holds one connection, which two threads must not share); all closed with
    the app. At most as many are made as requests run at once (``THREADS``)."""

    def __init__(self, location: str | Path, statement_timeout: float):
        self.location = location
        self.statement_timeout = statement_timeout
        self._idle: list[Any] = []
        self._all: list[Any] = []
        self._lock = threading.Lock()

    @contextmanager
    def lease(self) -> Iterator[Any]:
        with self._lock:
            store = self._idle.pop() if self._idle else None
        if store is None:
            from ..conversation import EventStore

            store = EventStore(self.location, create=False, readonly=True,
                               statement_timeout=self.statement_timeout)
            with self._lock:
                self._all.append(store)
        try:
            yield store
        finally:
            with self._lock:
                self._idle.append(store)

    def close(self) -> None:
        with self._lock:
            stores, self._all, self._idle = self._all, [], []
        for store in stores:
            store.close()


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(str(HERE / "templates")),
                      autoescape=select_autoescape(default=True, default_for_string=True))
    env.filters["q"] = lambda s: quote(str(s), safe="")
    env.filters["num"] = lambda v: "–" if v is None else f"{v:,}"
    env.filters["usd"] = lambda v: "–" if v is None else f"${v:,.4f}"
    env.globals["query"] = lambda **kw: urlencode({k: v for k, v in kw.items() if v not in (None, "", ())}, doseq=True)
    env.globals["chart"] = chart
    env.globals["bar"] = makeup_bar
    return env


def chart(points: list[pages.ChartPoint], marks: list[int], limit: int | None, cid: str, suffix: str = "",
          width: int = 880, height: int = 240) -> dict[str, Any]:
    """The input-tokens chart's geometry: points, condensation marks and the limit line, in
    an SVG's coordinates (the template draws them; every value is a number)."""
    left, right, top, bottom = 60, 10, 10, 30
    if not points:
        return {"width": width, "height": height, "empty": True}
    x_max = max(points[-1].call, 1)
    y_max = max([p.tokens for p in points] + [limit or 0, 1])
    y_top = _nice(y_max)

    def x(call: float) -> float:
        return round(left + (width - left - right) * (call - 1) / max(x_max - 1, 1), 1)

    def y(v: float) -> float:
        return round(top + (height - top - bottom) * (1 - v / y_top), 1)

    ticks = [(y(v), f"{v:,}") for v in (0, y_top // 2, y_top)]
    return {
        "width": width, "height": height, "empty": False, "left": left, "bottom": height - bottom,
        "right": width - right, "top": top,
        "line": " ".join(f"{x(p.call)},{y(p.tokens)}" for p in points),
        "dots": [(x(p.call), y(p.tokens), p.call, p.tokens, f"/c/{quote(cid, safe='')}/call/{p.call}{suffix}")
                 for p in (points if len(points) <= 200 else [])],
        "marks": [x(m) for m in marks if m <= x_max],
        "limit": None if not limit else y(limit), "limit_text": None if not limit else f"limit {limit:,}",
        "ticks": ticks, "x_max": x_max,
    }


def _nice(v: int) -> int:
    """A round number at or above ``v``, for an axis's top."""
    step = 10 ** max(int(math.log10(max(v, 1))), 0)
    return int(math.ceil(v / step) * step)


def makeup_bar(makeup: dict[str, int], width: int = 880) -> list[tuple[float, float, str, int, int]]:
    """The context's make-up by kind as bar segments: (x, width, kind, tokens, colour index)."""
    total = sum(makeup.values()) or 1
    out, at = [], 0.0
    for k, (kind, tokens) in enumerate(sorted(makeup.items(), key=lambda kv: -kv[1])):
        w = width * tokens / total
        out.append((round(at, 1), round(w, 1), kind, tokens, k % 8))
        at += w
    return out


def create_app(location: str | Path, *, statement_timeout: float = 10.0, ingest: bool = False,
               api_keys: Sequence[str] = (), backfill: str | None = None,
               backfill_delay: float | None = None) -> Starlette:
    """The inspector over the database at ``location`` (a file path or a URL), read-only.
    ``statement_timeout``: seconds a PostgreSQL statement may run before it is stopped.
    ``ingest``: also receive an OpenHands agent server's webhooks (``ingest.py``), checking
    ``api_keys`` when there are any. ``backfill``: with ``ingest``, the agent server's
    address, read for what its webhooks did not bring (``backfill.py``; its REST API takes the
    first of ``api_keys``); ``backfill_delay``: seconds a gap waits for the sender's retries."""
    if backfill is not None and not ingest:
        raise ValueError("backfill fills what ingest receives: give ingest=True")
    stores = Stores(location, statement_timeout)
    timelines = Timelines()
    env = _environment()

    def page(template: str, build: Callable[[Request, Any], Any]) -> Callable[[Request], Response]:
        def html(request: Request) -> Response:
            with stores.lease() as store:
                model = build(request, store)
            body = env.get_template(template).render(page=model, request=request, db=_label(location))
            return HTMLResponse(body, headers=HEADERS)

        def as_json(request: Request) -> Response:
            with stores.lease() as store:
                model = build(request, store)
            return JSONResponse(model.model_dump(mode="json"), headers=HEADERS)

        return html, as_json  # type: ignore[return-value]

    def index(r: Request, store: Any) -> pages.IndexPage:
        return pages.index_page(store, timelines, r.query_params.get("after", ""), r.query_params.get("q"))

    def conversation(r: Request, store: Any) -> pages.ConversationPage:
        return pages.conversation_page(store, timelines, r.path_params["cid"],
                                       _int(r.query_params.get("cond_after"), -1), _branch(r))

    def call(r: Request, store: Any) -> call_page.CallPage:
        return call_page.call_page(store, timelines, r.path_params["cid"], r.path_params["n"],
                               _int(r.query_params.get("forgot_before"), None), _branch(r))

    def event(r: Request, store: Any) -> pages.EventPage:
        return pages.event_page(store, timelines, r.path_params["cid"], r.path_params["seq"])

    def condensation(r: Request, store: Any) -> pages.CondensationPage:
        return pages.condensation_page(store, timelines, r.path_params["cid"], r.path_params["seq"])

    def events(r: Request, store: Any) -> pages.EventsPage:
        kinds = tuple(k for v in r.query_params.getlist("kind") for k in v.split(",") if k)
        return pages.events_page(store, timelines, r.path_params["cid"], _int(r.query_params.get("after"), -1), kinds)

    def search(r: Request, store: Any) -> pages.SearchPage:
        q = r.query_params
        return pages.search_page(store, timelines, q.get("q", ""), q.get("c") or None, q.get("scope", "all"))

    def replays(r: Request, store: Any) -> pages.ReplaysPage:
        return pages.replays_page(store, r.path_params["cid"], _int(r.query_params.get("before"), None))

    def replay_run(r: Request, store: Any) -> pages.ReplayRunPage:
        return pages.replay_run_page(store, r.path_params["cid"], r.path_params["run"])

    routes = []
    for path, template, build in (
        ("/c/{cid}/replay/{run:int}", "replay_run.html", replay_run),
        ("/c/{cid}/replay", "replays.html", replays),
        ("/", "index.html", index),
        ("/search", "search.html", search),
        ("/c/{cid}/call/{n:int}", "call.html", call),
        ("/c/{cid}/event/{seq:int}", "event.html", event),
        ("/c/{cid}/condensation/{seq:int}", "condensation.html", condensation),
        ("/c/{cid}/events", "events.html", events),
        ("/c/{cid}", "conversation.html", conversation),
    ):
        html, as_json = page(template, build)
        routes.append(Route("/index.json" if path == "/" else f"{path}.json", as_json))
        routes.append(Route(path, html))
    def goto_call(r: Request) -> Response:
        """The conversation page's "go to call" box, without JavaScript."""
        n, branch = _int(r.query_params.get("n"), None), _branch(r)
        target = f"/c/{quote(r.path_params['cid'], safe='')}" + (f"/call/{n}" if n is not None else "")
        target += f"?branch={branch}" if branch is not None else ""
        return RedirectResponse(target, status_code=303, headers=HEADERS)

    def favicon(r: Request) -> Response:
        return Response(status_code=204, headers=HEADERS)

    routes.insert(0, Route("/c/{cid}/call/", goto_call))
    routes.insert(0, Route("/favicon.ico", favicon))
    routes.append(Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"))

    def missing(request: Request, exc: Exception) -> Response:
        message = str(exc) if isinstance(exc, (Missing, OpenHandsMemoryError)) else "no such page"
        if request.url.path.endswith(".json"):
            return JSONResponse({"error": message}, status_code=404, headers=HEADERS)
        body = env.get_template("missing.html").render(message=message, request=request, db=_label(location))
        return HTMLResponse(body, status_code=404, headers=HEADERS)

    def refused(request: Request, exc: Exception) -> Response:
        message = " ".join(str(exc).split())
        if request.url.path.endswith(".json"):
            return JSONResponse({"error": message}, status_code=400, headers=HEADERS)
        body = env.get_template("missing.html").render(message=message, request=request, db=_label(location))
        return HTMLResponse(body, status_code=400, headers=HEADERS)

    from ..errors import ConversationNotFound, EventNotFound

    # The agent server's webhooks (serve --ingest): first, and writing through a store of
    # their own; the pages stay read-only.
    starting: list[Any] = []
    closing: list[Any] = [stores]
    if ingest:
        from .ingest import WritingStore, ingest_routes

        writer = WritingStore(location)
        on_gap = None
        if backfill is not None:
            from .backfill import DELAY, Backfill

            filler = Backfill(backfill, api_keys[0] if api_keys else None, writer.run,
                              DELAY if backfill_delay is None else backfill_delay)
            on_gap = filler.gap
            starting.append(filler)
            closing.append(filler)  # (stopped before the store it writes through is closed)
        routes[:0] = ingest_routes(writer, api_keys, on_gap)
        closing.append(writer)

    app = Starlette(
        routes=routes,
        exception_handlers={404: missing, Missing: missing, ConversationNotFound: missing,
                            EventNotFound: missing, OpenHandsMemoryError: refused},
        lifespan=_lifespan(starting, closing),
    )
    app.state.stores = stores
    return app


#: Threads that run page handlers at once, each with its store (a connection of its own):
#: enough for a few people's browsers, few enough not to take a server's connections.
THREADS = 4


def _lifespan(starting: list[Any], closables: list[Any]) -> Any:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        import anyio.to_thread

        anyio.to_thread.current_default_thread_limiter().total_tokens = THREADS
        try:
            for each in starting:
                each.start()
            yield
        finally:
            for each in closables:
                each.close()

    return lifespan


def _branch(r: Request) -> int | None:
    """``?branch=LEAF``: the calls on the path to that event instead of HEAD's."""
    return _int(r.query_params.get("branch"), None)


def _int(value: str | None, default: Any) -> Any:
    try:
        return int(value) if value not in (None, "") else default
    except ValueError:
        return default


def _label(location: str | Path) -> str:
    from ..location import Location

    return Location.parse(location).label
