"""The web inspector's pages: server time per page, warm process, at each size and backend.

    PYTHONPATH=. python bench/serve.py [--sizes 10k,1M] [--repeats 20] [--backends sqlite,postgresql]

Each database is the benches' cached SDK-shaped history (``bench/common.py``; PostgreSQL's as
``bench/postgres.py`` keeps it). The app (``openhands_memory.web.create_app``) runs in this
process behind Starlette's test client, so a figure is the server's time for a page (routing,
the library's reads, rendering) without a network. Every page is asked once untimed first: the
first ask of a conversation reads its calls and token sizes once (the "first load" row), and
afterwards a page reads only what it shows. Then each page is asked ``--repeats`` times and
the median is reported. The call page is asked at the middle call and at the last: its time
must not grow with the history (the ratio row).
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import CONVERSATION, Figure, Session, add_arguments, database, median, print_figures, ratio_figure  # noqa: E402

TARGET_MS = 100.0


def pages_of(client, n: int) -> dict[str, str]:
    """The pages to time, found from the conversation's own JSON."""
    info = client.get(f"/c/{CONVERSATION}.json").json()
    calls = info["calls"]
    cond = info["condensations"][0]["seq"] if info["condensations"] else 0
    return {
        "conversations /": "/",
        "conversation /c/ID": f"/c/{CONVERSATION}",
        "call page, middle call": f"/c/{CONVERSATION}/call/{max(calls // 2, 1)}",
        "call page, last call": f"/c/{CONVERSATION}/call/{calls}",
        "call page .json": f"/c/{CONVERSATION}/call/{calls}.json",
        "event page": f"/c/{CONVERSATION}/event/{n // 2}",
        "condensation page": f"/c/{CONVERSATION}/condensation/{cond}",
        "history page (200)": f"/c/{CONVERSATION}/events?after={n // 2}",
        "search (forgotten)": f"/search?q=pytest&c={CONVERSATION}&scope=forgotten",
    }


def measure(url: str, n: int, repeats: int) -> tuple[dict[str, float], float]:
    from starlette.testclient import TestClient

    from openhands_memory.web import create_app

    with TestClient(create_app(url)) as client:
        started = time.perf_counter()
        assert client.get(f"/c/{CONVERSATION}.json").status_code == 200
        first = (time.perf_counter() - started) * 1000
        out = {}
        for label, path in pages_of(client, n).items():
            response = client.get(path)  # warm: the page's rows in the cache, as a served page's are
            assert response.status_code == 200, (path, response.text[:300])
            times = []
            for _ in range(repeats):
                t = time.perf_counter()
                client.get(path)
                times.append((time.perf_counter() - t) * 1000)
            out[label] = median(times)  # type: ignore[assignment]
    return out, first


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap, repeats=20)
    ap.add_argument("--backends", default="sqlite,postgresql", help="default: sqlite,postgresql")
    ap.add_argument("--url", help="a PostgreSQL server's postgres database (else a local one kept under DIR/pg)")
    ap.set_defaults(workload="sdk", sizes="10k,1M")
    args = ap.parse_args()
    if args.workload == "both":
        args.workload = "sdk"
    backends = [b for b in args.backends.split(",") if b]
    from tools.pg_server import kept_server

    server = nullcontext(args.url) if args.url or "postgresql" not in backends else kept_server(args.dir / "pg")
    with server as admin_url:
        session = Session("The web inspector: server time per page (ms), warm process", args,
                          [f"backends: {', '.join(backends)}; target: every page ≤ {TARGET_MS:.0f} ms; the call "
                           "page 1M ÷ 10k ≤ 1.3"])
        ok = True
        for backend in backends:
            figures: dict[str, Figure] = {}
            first = Figure("first load (calls read once)", "{:,.0f}")
            for wl in session.workloads:
                for n in session.sizes:
                    if backend == "sqlite":
                        url = str(database(args.dir, wl, n, args.seed))
                    else:
                        from bench.postgres import cached_pg_database, db_url

                        url = db_url(admin_url, cached_pg_database(admin_url, args.dir, wl, n, args.seed))
                    times, first_ms = measure(url, n, args.repeats)
                    first.values[n] = first_ms
                    for label, ms in times.items():
                        figures.setdefault(label, Figure(label, "{:,.1f}", TARGET_MS)).values[n] = ms
            rows = list(figures.values())
            ratio = ratio_figure("call page", figures["call page, last call"], session.sizes, 1.3)
            rows += [first] + ([ratio] if ratio else [])
            print_figures(f"{backend} (ms)", session.sizes, rows)
            ok = ok and all(f.verdict() != "FAIL" for f in rows)
        session.end()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
