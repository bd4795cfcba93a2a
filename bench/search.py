"""Recall's search at scale, on both backends: query time, the cost to appends, index size,
and the backfill of an existing file (issue 21).

    PYTHONPATH=. python bench/search.py [--backend sqlite|postgres|both] [--sizes 100k,1M]
                                        [--repeats 7] [--appends 2000] [--url postgresql://...]

On the SDK-shaped workload (bench/sdk_workload.py, databases cached: bench/common.py, and
bench/postgres.py for PostgreSQL), per size:
  * search, median wall ms over ``--repeats`` runs of each query, scope "forgotten" (the
    default), 10 hits: a word ("AttributeError") and a 12-character identifier fragment
    ("alidate_entr", a substring of ``validate_entry`` and its kin); through
    ``conv.search`` on a store opened once;
  * single appends/s: ``conv.append`` of one event per transaction (an action, then its
    observation), ``--appends`` events, on a copy with the index and a copy whose index is
    switched off (its triggers dropped), interleaved in blocks of 100;
  * index size ÷ payload bytes: SQLite ``dbstat`` pages of the FTS5 tables; PostgreSQL
    ``pg_total_relation_size`` of the texts (with their primary key and two GIN indexes);
    over ``SUM(LENGTH(payload))``;
  * backfill events/s: ``set_search_index(True)`` over the whole file once it is switched
    off (what the migrations that build the index run: ``storage/search.py``, a chunk of ids
    at a time), all events of the file over its wall time, with the peak RSS of the process
    that ran it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    CONVERSATION,
    Figure,
    Session,
    add_arguments,
    database,
    print_figures,
    work_copy,
)
from openhands_memory.conversation import EventStore  # noqa: E402
from openhands_memory.storage import search as index  # noqa: E402

WORD, FRAGMENT = "AttributeError", "alidate_entr"
TARGET_SEARCH_MS = 20.0
TARGET_APPEND_SHARE = 0.85
TARGET_SIZE_SHARE = 0.60
TARGET_BACKFILL = 20_000.0


def search_ms(url: str, repeats: int) -> tuple[float, float, int, int]:
    """(word ms, fragment ms, word hits, fragment hits): medians of wall time."""
    with EventStore(url, create=False) as store:
        conv = store.conversation(CONVERSATION)
        conv.view()
        out = []
        for query in (WORD, FRAGMENT):
            conv.search(query)  # warm: the first search reads the index's pages
            times = []
            for _ in range(repeats):
                t = time.perf_counter()
                hits = conv.search(query)
                times.append((time.perf_counter() - t) * 1000)
            out.append((statistics.median(times), len(hits)))
    return out[0][0], out[1][0], out[0][1], out[1][1]


def switch_off(url: str) -> None:
    """The index no longer maintained (what the append rate is compared with)."""
    with EventStore(url, create=False) as store, store.writing() as db:
        if url.startswith("postgresql"):
            db.execute("DROP TRIGGER event_search_flush ON event")
            db.execute("DROP TRIGGER event_search_update ON event")
        else:
            for name in index.TRIGGER_NAMES:
                db.execute(f"DROP TRIGGER {name}")


def appends_per_s(urls: dict[str, str], wl, seed: int, count: int) -> dict[str, float]:
    """Single appends/s on each url, interleaved in blocks of 100 events."""
    pairs = wl.pairs(seed + 7)
    events = [e for _ in range(count // 2) for e in next(pairs)]
    spent = {k: 0.0 for k in urls}
    stores = {k: EventStore(u, create=False) for k, u in urls.items()}
    try:
        convs = {k: s.conversation(CONVERSATION) for k, s in stores.items()}
        for c in convs.values():
            c.view()
        for lo in range(0, len(events), 100):
            for k, conv in convs.items():
                block = [e.model_copy() for e in events[lo : lo + 100]]
                t = time.perf_counter()
                for e in block:
                    conv.append(e)
                spent[k] += time.perf_counter() - t
    finally:
        for s in stores.values():
            s.close()
    return {k: len(events) / v for k, v in spent.items()}


def size_share(url: str) -> float:
    with EventStore(url, create=False) as store, store.reading() as db:
        payload = db.one("SELECT SUM(LENGTH(payload)) FROM event")
        if url.startswith("postgresql"):  # the texts, their primary key and their two GIN indexes
            size = db.one(f"SELECT pg_total_relation_size('{index.PG_TEXTS}')")
        else:
            size = db.one("SELECT SUM(pgsize) FROM dbstat WHERE name LIKE 'event_words%' OR name LIKE 'event_grams%'")
    return size / payload


# Each in a process of its own, so that the build's peak RSS is its own.
SWITCH_OFF = """
import sys
from openhands_memory.conversation import EventStore
with EventStore(sys.argv[1], create=False) as store:
    store.set_search_index(False)
"""
# VmHWM, not ru_maxrss: that carries the parent's peak across fork and exec.
BACKFILL = """
import sys, time
from pathlib import Path
from openhands_memory.conversation import EventStore
with EventStore(sys.argv[1], create=False) as store:
    t = time.perf_counter()
    store.set_search_index(True)
    seconds = time.perf_counter() - t
hwm = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmHWM:"))
print(seconds, int(hwm.split()[1]) / 1024)
"""


def backfill(url: str, n: int) -> tuple[float, float]:
    """(events/s, peak RSS MB) of ``search-index on`` over the whole file (what a migration
    that builds the index runs), in a process of its own, after the index is dropped in
    another."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    subprocess.run([sys.executable, "-c", SWITCH_OFF, url], capture_output=True, text=True, check=True, env=env)
    out = subprocess.run([sys.executable, "-c", BACKFILL, url], capture_output=True, text=True, check=True, env=env)
    seconds, rss = (float(x) for x in out.stdout.split())
    return n / seconds, rss


def sqlite_rows(args, session, wl, n: int) -> dict[str, float]:
    src = database(args.dir, wl, n, args.seed)
    out: dict[str, float] = {}
    with work_copy(args.dir, src, "search-on") as on, work_copy(args.dir, src, "search-off") as off:
        for path in (on, off):  # the cached files may be at an older revision
            subprocess.run([sys.executable, "cli.py", "migrate", str(path)], check=True, capture_output=True,
                           cwd=Path(__file__).resolve().parent.parent)
        out["word"], out["fragment"], out["word_hits"], out["fragment_hits"] = search_ms(str(on), args.repeats)
        out["size"] = size_share(str(on))
        switch_off(str(off))
        rates = appends_per_s({"on": str(on), "off": str(off)}, wl, args.seed, args.appends)
        out["appends_on"], out["appends_off"] = rates["on"], rates["off"]
        out["backfill"], out["rss"] = backfill(str(on), n)
    return out


def postgres_rows(args, admin_url: str, wl, n: int) -> dict[str, float]:
    from bench.postgres import cached_pg_database, db_url, pg_work_copy

    name = cached_pg_database(admin_url, args.dir, wl, n, args.seed)
    out: dict[str, float] = {}
    with pg_work_copy(admin_url, name, "on") as on, pg_work_copy(admin_url, name, "off") as off:
        on_url, off_url = db_url(admin_url, on), db_url(admin_url, off)
        out["word"], out["fragment"], out["word_hits"], out["fragment_hits"] = search_ms(on_url, args.repeats)
        out["size"] = size_share(on_url)
        switch_off(off_url)
        rates = appends_per_s({"on": on_url, "off": off_url}, wl, args.seed, args.appends)
        out["appends_on"], out["appends_off"] = rates["on"], rates["off"]
        out["backfill"], out["rss"] = backfill(on_url, n)
    return out


def table(title: str, sizes: list[int], rows: dict[int, dict[str, float]]) -> None:
    def fig(label: str, key, fmt: str = "{:.2f}", **kw) -> Figure:
        f = Figure(label, fmt, **kw)
        f.values = {n: key(rows[n]) for n in sizes}
        return f

    print_figures(title, sizes, [
        fig(f"search a word ({WORD}), ms", lambda r: r["word"], target=TARGET_SEARCH_MS),
        fig(f"search a fragment ({FRAGMENT}), ms", lambda r: r["fragment"], target=TARGET_SEARCH_MS),
        fig("hits (word / fragment)", lambda r: f"{r['word_hits']:.0f} / {r['fragment_hits']:.0f}", "{}"),
        fig("single appends/s, index on", lambda r: r["appends_on"], "{:,.0f}"),
        fig("single appends/s, index off", lambda r: r["appends_off"], "{:,.0f}"),
        fig("appends: on ÷ off", lambda r: r["appends_on"] / r["appends_off"], "{:.3f}",
            target=TARGET_APPEND_SHARE, at_most=False),
        fig("index size ÷ payload bytes", lambda r: r["size"], "{:.3f}", target=TARGET_SIZE_SHARE),
        fig("backfill, events/s", lambda r: r["backfill"], "{:,.0f}", target=TARGET_BACKFILL, at_most=False),
        fig("backfill peak RSS, MB", lambda r: r["rss"], "{:,.0f}"),
    ])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(ap, repeats=7)
    ap.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="sqlite")
    ap.add_argument("--appends", type=int, default=4 * index.FLUSH_AT,
                    help=f"single appends per copy (default {4 * index.FLUSH_AT}: whole flushes of the index)")
    ap.add_argument("--url", help="a PostgreSQL server's postgres database (else a local one kept under DIR/pg)")
    ap.set_defaults(workload="sdk")
    args = ap.parse_args()
    session = Session("search: query time, appends, index size, backfill (recall)", args)
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    for wl in session.workloads:
        if "sqlite" in backends:
            rows = {n: sqlite_rows(args, session, wl, n) for n in session.sizes}
            table(f"{wl.name} on SQLite", session.sizes, rows)
        if "postgres" in backends:
            from tools.pg_server import kept_server

            server = nullcontext(args.url) if args.url else kept_server(args.dir / "pg")
            with server as admin_url:
                rows = {n: postgres_rows(args, admin_url, wl, n) for n in session.sizes}
            table(f"{wl.name} on PostgreSQL", session.sizes, rows)
    session.end()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
