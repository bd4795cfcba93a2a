"""The same library on PostgreSQL: a view, a step, appends and eight writers, beside SQLite.

    PYTHONPATH=. python bench/postgres.py [--sizes 10k,100k,1M] [--repeats 7] [--url postgresql://...]

The server: without ``--url``, a local one on 127.0.0.1 (``tools/pg_server.py``
``kept_server``: the machine's PostgreSQL binaries, PostgreSQL's own durability settings —
fsync, synchronous_commit and full_page_writes on — and shared_buffers=256MB), whose data
folder is kept under ``<dir>/pg`` so that each history is built once: the first run fills a
database per size with the SDK-shaped workload (``bench/sdk_workload.py``) by ``append_many``
(COPY, 5,000 events a transaction), VACUUM ANALYZEs it and keeps it; every run works on a
copy of it (``CREATE DATABASE ... TEMPLATE ... STRATEGY FILE_COPY``), dropped afterwards.
SQLite works on a copy of the cached file the other benches use (``bench/common.py``).

Figures (medians of ``--repeats`` runs, or of ``--runs`` for the write rates; wall time unless
said, since the server does part of the work):
  * open + first view: a new EventStore (connect, schema check) and its first ``view()``,
    wall and this process's CPU, after one untimed (the copy's catalogs and pages warmed, as
    a served database's are); the round trips it takes (PostgreSQL);
  * cached step: append an action and its observation, ``view()``, ``to_messages()``; the
    median of ``10 * --repeats`` steps (on PostgreSQL, rounded up to whole periods of the
    search index's flush, 64 steps), and on PostgreSQL their mean, which counts at their
    share the steps that index a batch of waiting texts (storage/search.py);
  * condensing step: a step whose ``conv.step`` writes a condensation (offline summarizer,
    LLMSummarizingCondenser(max_size=120, keep_first=4), the view grown past 120 first);
  * single appends/s: SDK-shaped events, one per transaction, one connection;
  * 8 writers: eight processes appending SDK-shaped events to one new conversation of the
    database, one event per transaction (k=1), an action with its observation per
    ``append_many`` (k=2), or any ``--k``; events/s in all, from the start signal to the last
    commit. Then the bench checks that no writer saw an error, that the ids are 0..N-1 with
    no gap or duplicate and that every event written is there.
  * on PostgreSQL the write rates again with ``synchronous_commit=off`` for the bench's
    connections (labelled): commits no longer wait for the WAL flush, and a crash may lose the
    last ones (never corrupt anything), which is SQLite's ``synchronous=NORMAL`` bargain.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from itertools import islice
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    CHUNK,
    CONVERSATION,
    Figure,
    Session,
    add_arguments,
    complete,
    database,
    human,
    load,
    median,
    print_figures,
    say,
    work_copy,
)
from openhands_memory.condensers import LLMSummarizingCondenser
from openhands_memory.conversation import EventStore
from openhands_memory.storage import search as index

WRITERS = 8
ASYNC_COMMIT = "options=-c%20synchronous_commit%3Doff"


# --- PostgreSQL databases: built once, copied for every run ---------------------------------


def _admin(admin_url: str):
    import psycopg

    return psycopg.connect(admin_url, autocommit=True)


def db_url(admin_url: str, name: str, options: str = "") -> str:
    base = admin_url.rsplit("/", 1)[0] + f"/{name}"
    return base + (f"?{options}" if options else "")


def cached_pg_database(admin_url: str, folder: Path, wl, n: int, seed: int) -> str:
    """The name of the kept database of ``n`` events of ``wl``: built unless complete."""
    name = "ohm_" + wl.key(n, seed).replace("-", "_").lower()
    partial = name + "_partial"
    with _admin(admin_url) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
    if exists and complete(db_url(admin_url, name), n, name):
        return name
    with _admin(admin_url) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'DROP DATABASE IF EXISTS "{partial}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{partial}"')
    print(f"  building PostgreSQL database {name} ({n:,} events)...", end="", flush=True)
    wall, cpu = time.perf_counter(), time.process_time()
    url = db_url(admin_url, partial)
    with EventStore(url) as store:
        conv = store.create_conversation(CONVERSATION, metadata={"workload": wl.name, "n": n, "seed": seed})
        events = wl.events(n, seed)
        while chunk := list(islice(events, CHUNK)):
            conv.append_many(chunk)
        assert len(conv) == n, (len(conv), n)
    fill = time.perf_counter() - wall
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:  # as a long-lived database would be
        conn.execute("VACUUM (ANALYZE)")
    with _admin(admin_url) as admin:
        admin.execute("CHECKPOINT")
        admin.execute(f'ALTER DATABASE "{partial}" RENAME TO "{name}"')
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    info = {"events": n, "seconds": wall, "fill_seconds": fill, "cpu_seconds": cpu, "events_per_s": n / fill,
            "built_at": time.strftime("%Y-%m-%d %H:%M:%S")}
    (folder / f"{name}.build.json").write_text(json.dumps(info))
    print(f" {wall:.1f} s (fill {n / fill:,.0f} events/s, generation included; then VACUUM ANALYZE)", flush=True)
    return name


@contextmanager
def pg_work_copy(admin_url: str, template: str, tag: str = "") -> Iterator[str]:
    """A private copy of a kept database (a file copy of its folder), dropped afterwards."""
    name = f"ohm_work_{os.getpid()}_{tag}".lower()
    with _admin(admin_url) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY FILE_COPY')
    try:
        yield name
    finally:
        with _admin(admin_url) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def server_settings(admin_url: str) -> str:
    with _admin(admin_url) as admin:
        names = ["server_version", "fsync", "synchronous_commit", "full_page_writes", "wal_sync_method",
                 "shared_buffers"]
        values = [admin.execute(f"SHOW {x}").fetchone()[0] for x in names]
        where = admin.execute("SHOW data_directory").fetchone()[0]
    return ", ".join(f"{k}={v}" for k, v in zip(names, values)) + f"; data in {where}"


# --- figures --------------------------------------------------------------------------------


class RoundTrips:
    """Counts a psycopg connection's round trips: the ReadyForQuery messages in libpq's
    protocol trace (one ends every round trip, the connection's own start-up included)."""

    def __init__(self) -> None:
        import tempfile

        self.file = tempfile.TemporaryFile(mode="w+b")  # noqa: SIM115  (read after the trace)

    @contextmanager
    def counting(self) -> Iterator[None]:
        import psycopg

        real = psycopg.Connection.connect.__func__  # type: ignore[attr-defined]
        real_close = psycopg.Connection.close
        traced: set[int] = set()

        def connect(cls, *args, **kwargs):
            conn = real(cls, *args, **kwargs)
            conn.pgconn.trace(self.file.fileno())
            traced.add(id(conn))
            return conn

        def close(conn) -> None:
            if id(conn) in traced:  # libpq writes its trace through a buffer: flush it
                traced.discard(id(conn))
                conn.pgconn.untrace()
            real_close(conn)

        real_module_connect = psycopg.connect  # the same classmethod, bound at import
        psycopg.Connection.connect = classmethod(connect)  # type: ignore[method-assign]
        psycopg.connect = psycopg.Connection.connect  # type: ignore[misc]
        psycopg.Connection.close = close  # type: ignore[method-assign]
        try:
            yield
        finally:
            psycopg.Connection.connect = classmethod(real)  # type: ignore[method-assign]
            psycopg.connect = real_module_connect  # type: ignore[misc]
            psycopg.Connection.close = real_close  # type: ignore[method-assign]

    def count(self) -> int:
        self.file.seek(0)
        return sum(1 for line in self.file.read().decode(errors="replace").splitlines()
                   if "\tB\t" in line and "ReadyForQuery" in line) + 1  # + the start-up's


def first_views(url: str, repeats: int, postgres: bool) -> dict[str, float | None]:
    # One untimed first: a database just copied from its template has none of its pages in
    # the server's buffers and no cached catalog file (pg_internal.init), which the first
    # connections build (measured: 19, 11 and 13 ms, then 7-9 ms), and a served database has.
    with EventStore(url, create=False) as store:
        store.conversation(CONVERSATION).view()
    wall, cpu = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        with EventStore(url, create=False) as store:
            store.conversation(CONVERSATION).view()
            w, c = time.perf_counter() - w, time.process_time() - c
        wall.append(w * 1000)
        cpu.append(c * 1000)
    trips = None
    if postgres:
        counter = RoundTrips()
        with counter.counting(), EventStore(url, create=False) as store:
            store.conversation(CONVERSATION).view()
        trips = counter.count()
    return {"wall": median(wall), "cpu": median(cpu), "trips": trips}


def cached_steps(url: str, wl, seed: int, steps: int) -> tuple[float, float]:
    """(median, mean) ms of ``steps`` cached steps: the mean counts the steps that index a
    batch of texts for search (every ``PG_FLUSH_AT // 2`` steps on PostgreSQL, ``FLUSH_AT //
    2`` on SQLite) at their share."""
    times = []
    pairs = wl.pairs(seed + 1)
    with EventStore(url, create=False) as store:
        conv = store.conversation(CONVERSATION)
        conv.view()
        for _ in range(steps):
            a, o = next(pairs)
            t = time.perf_counter()
            conv.append(a)
            conv.append(o)
            conv.view().to_messages()
            times.append(time.perf_counter() - t)
    return median(times) * 1000, sum(times) / len(times) * 1000  # type: ignore[operator]


def condensing_steps(url: str, wl, seed: int, count: int) -> float:
    condenser = LLMSummarizingCondenser(max_size=120, keep_first=4)
    times = []
    pairs = wl.pairs(seed + 2)
    with EventStore(url, create=False) as store:
        conv = store.conversation(CONVERSATION)
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
    pairs = wl.pairs(seed)
    events = [e for _ in range(count // 2) for e in next(pairs)]
    with EventStore(url, create=False) as store:
        conv = store.conversation(CONVERSATION)
        t = time.perf_counter()
        for e in events:
            conv.append(e)
        return len(events) / (time.perf_counter() - t)


def _writer(url: str, cid: str, worker: int, pairs: int, k: int, seed: int, ready, start, done) -> None:
    from bench.common import workloads

    errors: list[str] = []
    written: list[str] = []
    try:
        wl = workloads("sdk")[0]
        steps = wl.pairs(seed)
        events = [e for _ in range(pairs) for e in next(steps)]
        batches = [events[i : i + k] for i in range(0, len(events), k)]
        with EventStore(url, create=False) as store:
            conv = store.conversation(cid)
            ready.put(worker)
            start.wait()
            for batch in batches:
                try:
                    if len(batch) == 1:
                        conv.append(batch[0])
                    else:
                        conv.append_many(batch)
                    written.extend(e.id for e in batch)
                except Exception as e:  # noqa: BLE001  (counted and reported, not fatal)
                    errors.append(f"{type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001
        errors.append(f"{type(e).__name__}: {e}")
        ready.put(worker)
    done.put((worker, written, errors))


def concurrent_writers(url: str, cid: str, k: int, pairs: int, seed: int) -> tuple[float, list[str]]:
    """(events/s, problems): WRITERS processes, ``pairs`` action+observation steps each,
    written ``k`` events a transaction (k=1: ``append``; else ``append_many``; k=2: one
    step, its action and observation, a transaction)."""
    with EventStore(url, create=False) as store:
        store.create_conversation(cid)
    ctx = multiprocessing.get_context("spawn")
    ready, start, done = ctx.Queue(), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(url, cid, w, pairs, k, seed + 1000 * (w + 1), ready, start, done))
             for w in range(WRITERS)]
    for p in procs:
        p.start()
    for _ in procs:  # every process has imported, made its events and connected
        ready.get(timeout=600)
    t = time.perf_counter()
    start.set()
    results = [done.get(timeout=600) for _ in procs]
    elapsed = time.perf_counter() - t
    for p in procs:
        p.join()
    problems = [f"writer {w}: {e}" for w, _, errors in results for e in errors[:3]]
    problems += [f"writer exited with {p.exitcode}" for p in procs if p.exitcode != 0]
    uids = [u for _, written, _ in results for u in written]
    with EventStore(url, create=False) as store:
        stored = [(e.seq, e.id) for e in store.conversation(cid).events()]
    n = len(uids)
    if [s for s, _ in stored] != list(range(len(stored))):
        problems.append(f"ids are not 0..{len(stored) - 1} without a gap")
    if len(stored) != n or {u for _, u in stored} != set(uids):
        problems.append(f"{len(stored)} rows stored for {n} events written")
    if n != WRITERS * pairs * 2:
        problems.append(f"{n} of {WRITERS * pairs * 2} events written")
    return n / elapsed, problems


# --- the run --------------------------------------------------------------------------------


def figures(pg: bool, args: argparse.Namespace) -> dict[str, Figure]:
    f = {
        "first_wall": Figure("open + first view, wall ms", target=8.0 if pg else None),
        "first_cpu": Figure("open + first view, CPU ms", target=10.0 if pg else 5.0),
        "trips": Figure("  round trips of it", "{:.0f}", optional=True),
        "step": Figure("cached step, ms", target=1.5 if pg else 0.5),
        "step_mean": Figure("  mean, search flushes included", optional=True),
        "condense": Figure("condensing step, ms", target=30.0 if pg else 20.0),
        "appends": Figure("single appends/s", "{:,.0f}", target=2000.0, at_most=False),
    }
    for k in args.k:
        f[f"w{k}"] = Figure(f"{WRITERS} writers, k={k}, events/s", "{:,.0f}", target=5000.0 if pg else None,
                            at_most=False)
    if pg:
        f["step_async"] = Figure("cached step, ms [sc=off]")
        f["a_async"] = Figure("single appends/s [sc=off]", "{:,.0f}")
        for k in args.k:
            f[f"w{k}_async"] = Figure(f"{WRITERS} writers, k={k} [sc=off]", "{:,.0f}")
    return f


def run(backends: list[str], args: argparse.Namespace, session: Session, admin_url: str | None) -> bool:
    """Every size's copies first; then the reads (views and steps) of every size and backend,
    before any write-rate run, so that the writers' processes do not load the machine they
    are measured on; then the write rates."""
    wl = session.workloads[0]
    f = {b: figures(b == "postgresql", args) for b in backends}
    problems: dict[str, list[str]] = {b: [] for b in backends}
    spreads: dict[str, list[str]] = {b: [] for b in backends}
    with ExitStack() as stack:
        urls: dict[tuple[str, int], tuple[str, str | None]] = {}
        for n in session.sizes:
            for b in backends:
                if b == "postgresql":
                    assert admin_url is not None
                    template = cached_pg_database(admin_url, args.dir / "pg", wl, n, args.seed)
                    name = stack.enter_context(pg_work_copy(admin_url, template, human(n)))
                    urls[b, n] = db_url(admin_url, name), db_url(admin_url, name, ASYNC_COMMIT)
                else:
                    path = stack.enter_context(work_copy(args.dir, database(args.dir, wl, n, args.seed), "pg-bench"))
                    urls[b, n] = str(path), None
        say(f"views and steps: load average {load()}")
        for n in session.sizes:
            for b in backends:
                url, slow = urls[b, n]
                first = first_views(url, args.repeats, b == "postgresql")
                f[b]["first_wall"].values[n], f[b]["first_cpu"].values[n] = first["wall"], first["cpu"]
                f[b]["trips"].values[n] = first["trips"]
                # PostgreSQL: whole flushes of the search index (128 events, 64 steps), so that
                # the mean counts them at their share. (SQLite's, 1,024 events, would take 512
                # steps, over which the view grows enough to change what a step costs.)
                pg = b == "postgresql"
                steps = index.PG_FLUSH_AT // 2 * -(-10 * args.repeats // (index.PG_FLUSH_AT // 2)) if pg \
                    else 10 * args.repeats
                step, mean = cached_steps(url, wl, args.seed, steps)
                f[b]["step"].values[n] = step
                if pg:
                    f[b]["step_mean"].values[n] = mean
                f[b]["condense"].values[n] = condensing_steps(url, wl, args.seed, max(3, args.repeats // 2))
                if slow:
                    f[b]["step_async"].values[n] = cached_steps(slow, wl, args.seed + 5, steps)[0]
        say(f"write rates: load average {load()}")
        for n in session.sizes:
            for b in backends:
                url, slow = urls[b, n]

                def rate(key: str, label: str, fn: Callable[[int], Any], b: str = b, n: int = n) -> None:
                    values = []
                    for r in range(args.runs):
                        got = fn(r)
                        value, issues = got if isinstance(got, tuple) else (got, [])
                        values.append(value)
                        problems[b].extend(f"{label} {human(n)} run {r + 1}: {p}" for p in issues)
                    f[b][key].values[n] = median(values)
                    spreads[b].append(f"{label} {human(n)}: " + ", ".join(f"{v:,.0f}" for v in values))

                writes = [("", url, 0)] + ([(" [sc=off]", slow, 50)] if slow else [])
                for tag, target, offset in writes:
                    key = "_async" if tag else ""
                    rate("appends" if not tag else "a_async", "single appends" + tag,
                         lambda r, u=target, o=offset: single_appends(u, wl, args.seed + 10 + o + r, args.appends))
                    for k in args.k:
                        rate(f"w{k}{key}", f"writers k={k}{tag}", lambda r, u=target, o=offset, k=k: concurrent_writers(
                            u, f"writers{o}-k{k}-r{r}", k, args.pairs, args.seed + 100 * r + o + k))
    print()
    for b in backends:
        print_figures(f"{b}, {wl.name}", session.sizes, list(f[b].values()))
        say(f"{b}: write rates per run (medians above): " + "; ".join(spreads[b]))
        if b == "postgresql":
            say("[sc=off]: the bench's connections with synchronous_commit=off (labelled, not the headline: "
                "a commit returns before its WAL is flushed)")
        say(f"{b}: after every writer run: " + ("no errors, ids 0..N-1 gap-free, every event stored"
                                                if not problems[b] else "PROBLEMS: " + "; ".join(problems[b])))
        print(flush=True)
    return not any(problems.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap, repeats=7)
    ap.add_argument("--url", help="a PostgreSQL server's postgres database (else a local one kept under DIR/pg)")
    ap.add_argument("--runs", type=int, default=3, help="runs of each write rate, median reported (default: 3)")
    ap.add_argument("--appends", type=int, default=2000, help="events per single-append run (default: 2000)")
    ap.add_argument("--pairs", type=int, default=300,
                    help=f"action+observation steps per writer and run (default: 300; {WRITERS} writers)")
    ap.add_argument("--backends", default="postgresql,sqlite", help="default: postgresql,sqlite")
    ap.add_argument("--k", default="1,2", help="events per transaction of the writers' runs, each its own row "
                    "(default: 1,2: single events, and an action with its observation)")
    ap.set_defaults(workload="sdk")
    args = ap.parse_args()
    args.k = [int(x) for x in args.k.split(",") if x.strip()]
    if args.workload == "both":
        args.workload = "sdk"
    from tools.pg_server import kept_server

    backends = [b for b in args.backends.split(",") if b]
    pg = "postgresql" in backends
    server = nullcontext(args.url) if args.url or not pg else kept_server(args.dir / "pg")
    with server as admin_url:
        notes = [f"server: {server_settings(admin_url)}" + ("" if args.url else " (tools/pg_server.py kept_server)")
                 ] if pg else []
        notes.append(f"write rates: medians of {args.runs} runs; single appends: {args.appends:,} events a run; "
                     f"{WRITERS} writers: {args.pairs} action+observation steps each a run")
        session = Session("PostgreSQL beside SQLite: view, steps, appends, 8 writers", args, notes)
        ok = run(backends, args, session, admin_url)
        session.end()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
