"""The same library on PostgreSQL: a view, a step, appends and eight writers, beside SQLite.

    PYTHONPATH=. python bench/postgres.py [--url postgresql://...] [--sizes 10k,100k,1M]

Without ``--url`` it starts a throwaway server on 127.0.0.1 (tools/pg_server.py: the
machine's PostgreSQL binaries, fsync off) and removes it afterwards. Each size is a fresh
database filled with the SDK-shaped workload (bench/sdk_workload.py) by ``append_many``.
Figures (medians; wall time, since the server does part of the work):
  * first view: a new EventStore and its first ``view()``;
  * cached step: append an action and its observation, ``view()``, ``to_messages()``;
  * condensing step: a step whose ``conv.step`` writes a condensation (offline summarizer,
    LLMSummarizingCondenser(max_size=120, keep_first=4), the view grown past 120 first);
  * single appends/s: one event per transaction, one connection;
  * 8 writers: eight processes appending single events to one conversation, events/s in all;
    then ids are checked 0..N-1 with no gap and no duplicate.
The same figures on SQLite (a file of the same workload) are printed beside them.
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import sys
import tempfile
import time
from contextlib import nullcontext
from itertools import islice
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Figure, Session, add_arguments, human, median, print_figures, say  # noqa: E402
from openhands_memory.condensers import LLMSummarizingCondenser  # noqa: E402
from openhands_memory.store import EventStore  # noqa: E402

CHUNK = 5_000
WRITERS = 8
PER_WRITER = 500


def fill(url: str, wl, n: int, seed: int) -> float:
    t = time.perf_counter()
    with EventStore(url) as store:
        conv = store.create_conversation("bench")
        events = wl.events(n, seed)
        while True:
            chunk = list(islice(events, CHUNK))
            if not chunk:
                break
            conv.append_many(chunk)
    return n / (time.perf_counter() - t)


def first_view(url: str, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        with EventStore(url, create=False) as store:
            store.conversation("bench").view()
        times.append(time.perf_counter() - t)
    return median(times) * 1000  # type: ignore[operator]


def cached_steps(url: str, wl, seed: int, steps: int) -> float:
    times = []
    pairs = wl.pairs(seed + 1)
    with EventStore(url, create=False) as store:
        conv = store.conversation("bench")
        conv.view()
        for _ in range(steps):
            a, o = next(pairs)
            t = time.perf_counter()
            conv.append(a)
            conv.append(o)
            conv.view().to_messages()
            times.append(time.perf_counter() - t)
    return median(times) * 1000  # type: ignore[operator]


def condensing_steps(url: str, wl, seed: int, count: int) -> float:
    condenser = LLMSummarizingCondenser(max_size=120, keep_first=4)
    times = []
    pairs = wl.pairs(seed + 2)
    with EventStore(url, create=False) as store:
        conv = store.conversation("bench")
        for _ in range(count):
            while len(conv.view()) <= 120:
                conv.append_many(next(pairs))
            before = len(conv)
            t = time.perf_counter()
            conv.step(condenser).to_messages()
            times.append(time.perf_counter() - t)
            assert len(conv) == before + 1, "the step did not condense"
    return median(times) * 1000  # type: ignore[operator]


def single_appends(url: str, wl, seed: int, count: int) -> float:
    pairs = wl.pairs(seed + 3)
    events = [e for _ in range(count // 2) for e in next(pairs)]
    with EventStore(url, create=False) as store:
        conv = store.conversation("bench")
        t = time.perf_counter()
        for e in events:
            conv.append(e)
        return len(events) / (time.perf_counter() - t)


def _writer(url: str, worker: int, n: int, start, done) -> None:
    from openhands_memory.events import Message, MessageEvent, TextContent

    with EventStore(url, create=False) as store:
        conv = store.conversation("writers")
        events = [MessageEvent(source="user", llm_message=Message(role="user", content=[TextContent(text=f"{worker}-{i}")]))
                  for i in range(n)]
        start.wait()
        for e in events:
            conv.append(e)
    done.put(worker)


def concurrent_writers(url: str) -> tuple[float, bool]:
    with EventStore(url, create=False) as store:
        store.create_conversation("writers")
    ctx = multiprocessing.get_context("spawn")
    start, done = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(url, w, PER_WRITER, start, done)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    time.sleep(2.0)  # let every process import and connect
    t = time.perf_counter()
    start.set()
    for _ in procs:
        done.get(timeout=600)
    elapsed = time.perf_counter() - t
    for p in procs:
        p.join()
    ok = all(p.exitcode == 0 for p in procs)
    with EventStore(url, create=False) as store:
        seqs = [e.seq for e in store.conversation("writers").events()]
    gap_free = ok and seqs == list(range(WRITERS * PER_WRITER))
    return WRITERS * PER_WRITER / elapsed, gap_free


def new_database(admin_url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return admin_url.rsplit("/", 1)[0] + f"/{name}"


def run(admin_url: str | None, args: argparse.Namespace, session: Session) -> None:
    wl = session.workloads[0]
    backends = {"postgresql": [], "sqlite": []}  # type: dict[str, list[Figure]]
    for backend in backends:
        figures = {
            "first": Figure("first view, ms", target=10.0 if backend == "postgresql" else 5.0),
            "step": Figure("cached step, ms", target=2.0 if backend == "postgresql" else 0.5),
            "condense": Figure("condensing step, ms", target=30.0 if backend == "postgresql" else 20.0),
            "appends": Figure("single appends/s", "{:,.0f}", target=2000.0, at_most=False),
            "writers": Figure(f"{WRITERS} writers, events/s", "{:,.0f}", target=5000.0 if backend == "postgresql" else None,
                              at_most=False),
            "fill": Figure("append_many events/s (fill)", "{:,.0f}"),
        }
        gaps: list[str] = []
        for n in session.sizes:
            tmp = Path(tempfile.mkdtemp(prefix="ohm-bench-pg-"))
            try:
                url = (new_database(admin_url, f"bench_{n}") if backend == "postgresql"
                       else str(tmp / f"bench-{n}.db"))
                figures["fill"].values[n] = fill(url, wl, n, args.seed)
                figures["first"].values[n] = first_view(url, args.repeats)
                figures["step"].values[n] = cached_steps(url, wl, args.seed, 10 * args.repeats)
                figures["condense"].values[n] = condensing_steps(url, wl, args.seed, max(3, args.repeats // 2))
                figures["appends"].values[n] = single_appends(url, wl, args.seed, 2_000)
                rate, gap_free = concurrent_writers(url)
                figures["writers"].values[n] = rate
                if not gap_free:
                    gaps.append(human(n))
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        print_figures(f"{backend}, {wl.name}", session.sizes, list(figures.values()))
        say(f"{backend}: ids after {WRITERS} writers x {PER_WRITER} appends: "
            + ("gap-free at every size" if not gaps else f"GAPS OR ERRORS at {', '.join(gaps)}"))
        print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap, repeats=7)
    ap.add_argument("--url", help="a PostgreSQL server's postgres database (else a throwaway one)")
    ap.set_defaults(workload="sdk")
    args = ap.parse_args()
    if args.workload == "both":
        args.workload = "sdk"
    from tools.pg_server import throwaway_server

    server = nullcontext(args.url) if args.url else throwaway_server()
    with server as admin_url:
        session = Session("PostgreSQL beside SQLite: view, steps, appends, 8 writers", args,
                          [f"server: {'given' if args.url else 'throwaway (tools/pg_server.py), fsync off'}"])
        run(admin_url, args, session)
        session.end()


if __name__ == "__main__":
    main()
