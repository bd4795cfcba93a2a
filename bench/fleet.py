"""A fleet of agent processes on one database: PostgreSQL direct, through PgBouncer, SQLite.

    PYTHONPATH=. python bench/fleet.py [--agents 10,50,200] [--seconds 10] [--runs 3]
                                       [--backends direct,pgbouncer,sqlite] [--pool 20]
                                       [--max-connections 100] [--json results.json]

Each agent is a process of its own (forked once the library is imported, as an agent
runtime's workers are), with a conversation of its own, running the SDK-shaped workload's
step loop (bench/sdk_workload.py's steps: a tool call of ~1.2 KB and its result of ~2.8 KB)
for ``--seconds`` from a common start:
  append the call and its result (one write), ``conv.step(LLMSummarizingCondenser(120, 4))``
  (the view, and a condensation by the offline summarizer when the view passes 120 events),
  ``view.to_messages()``, and every 20th step a search of the conversation.
A failed command is counted (its message one line) and the agent goes on; an agent that
cannot connect (the server's ``max_connections``) counts one error and stops.

Backends: ``direct``: a throwaway PostgreSQL server (tools/pg_server.py) with PostgreSQL's
own durability (fsync, synchronous_commit, full_page_writes on), ``max_connections``
``--max-connections``, shared_buffers 256MB, each agent on a connection of its own;
``pgbouncer``: the same server behind PgBouncer (tools/pgbouncer.py: Debian's, transaction
mode, ``default_pool_size`` ``--pool``); ``sqlite``: one file (WAL, the library's defaults)
under ``--dir``, every agent a writer on it. Each run has a new database.

Figures, medians of ``--runs`` runs: steps/s of the whole fleet, p50 and p99 of the step's
latency (every step of every agent), errors, the agents' CPU per step (this process's reaped
children), the server's CPU (every PostgreSQL process, as % of one core) and the pooler's
(PgBouncer's process), and the pooler's wait: the time clients waited for a server
connection (PgBouncer's ``SHOW STATS`` total_wait_time), per step. The load average is
printed before and after each run: on one machine it is mostly the fleet's own processes.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import load, machine, say  # noqa: E402
from bench.report import table  # noqa: E402

MAX_SIZE, KEEP_FIRST = 120, 4
SEARCH_EVERY = 20


@dataclass
class AgentResult:
    agent: int
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@dataclass
class Run:
    backend: str
    agents: int
    seconds: float
    steps: int
    steps_per_s: float
    p50_ms: float | None
    p99_ms: float | None
    errors: int
    first_error: str | None
    agent_cpu_ms_per_step: float | None
    server_cpu_pct: float | None
    pooler_cpu_pct: float | None
    pooler_wait_ms_per_step: float | None
    load_before: str
    load_after: str


# --- the agent ---------------------------------------------------------------------------


def agent(url: str, cid: str, number: int, seconds: float, start: Any, out: Any) -> None:
    """One agent's loop (in a forked process): see the module's docstring."""
    from bench.common import workloads
    from openhands_memory.condensers import LLMSummarizingCondenser
    from openhands_memory.conversation import EventStore
    from openhands_memory.errors import OpenHandsMemoryError

    result = AgentResult(number)
    pairs = workloads("sdk")[0].pairs(seed=number)
    condenser = LLMSummarizingCondenser(max_size=MAX_SIZE, keep_first=KEEP_FIRST)
    try:
        store = EventStore(url)
        conv = store.conversation(cid)
    except OpenHandsMemoryError as e:
        result.errors.append(str(e))
        store = None
    try:
        start.wait(600)
    except Exception as e:  # noqa: BLE001  a broken barrier: the parent gave up
        result.errors.append(f"no start: {type(e).__name__}")
        store = None
    if store is not None:
        with store:
            end = time.monotonic() + seconds
            step = 0
            while time.monotonic() < end:
                began = time.perf_counter()
                try:
                    conv.append_many(next(pairs))
                    conv.step(condenser).to_messages()
                    if step % SEARCH_EVERY == SEARCH_EVERY - 1:
                        conv.search("error", limit=5, scope="all")
                except OpenHandsMemoryError as e:
                    result.errors.append(str(e))
                result.latencies.append(time.perf_counter() - began)
                step += 1
    out.put(asdict(result))


# --- measuring the server and the pooler -------------------------------------------------


def process_cpu(pid: int, children: bool = True) -> float:
    """CPU seconds of a process (and of the children it has waited for)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)
    return ticks / os.sysconf("SC_CLK_TCK")


def server_cpu(uid: int, exclude: set[int]) -> float:
    """CPU seconds of every process of the server's user (a backend that exited counts in
    its postmaster's waited-for children), the pooler's excluded."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in exclude:
            continue
        try:
            if entry.stat().st_uid == uid:
                total += process_cpu(int(entry.name))
        except (OSError, IndexError, ValueError):
            pass  # it ended meanwhile
    return total


def pooler_wait_us(admin_url: str) -> int:
    """Every client's wait for a server connection so far (PgBouncer's SHOW STATS), in µs."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True, prepare_threshold=None) as conn:
        cursor = conn.execute("SHOW STATS")
        names = [d.name for d in cursor.description]
        return sum(int(row[names.index("total_wait_time")]) for row in cursor.fetchall())


# --- one run -----------------------------------------------------------------------------


def prepare(url: str, n: int) -> None:
    from openhands_memory.conversation import EventStore
    from openhands_memory.events import MessageEvent, SystemPromptEvent, TextContent, Message

    with EventStore(url) as store:
        for k in range(n):
            store.create_conversation(f"agent{k}").append_many([
                SystemPromptEvent(system_prompt=TextContent(text="You are a careful coding agent."), tools=[]),
                MessageEvent(source="user", llm_message=Message(role="user", content=[TextContent(text=f"task {k}")])),
            ])


def warm_up(folder: Path) -> None:
    """Everything the step loop imports on first use (the condenser, the offline summarizer,
    messages, search, the driver), imported here once: the agents are forked from this
    process, and their first steps would otherwise spend a second of CPU each importing."""
    import psycopg  # noqa: F401

    from bench.common import workloads
    from openhands_memory.condensers import LLMSummarizingCondenser
    from openhands_memory.conversation import EventStore

    path = folder / "warm-up.db"
    prepare(str(path), 1)
    pairs = workloads("sdk")[0].pairs(seed=0)
    with EventStore(path) as store:
        conv = store.conversation("agent0")
        for _ in range(70):  # past max_size: a condensation
            conv.append_many(next(pairs))
            conv.step(LLMSummarizingCondenser(max_size=MAX_SIZE, keep_first=KEEP_FIRST)).to_messages()
        conv.search("error", limit=5, scope="all")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def one_run(backend: str, url: str, n: int, seconds: float, *, server_uid: int | None,
            pooler: Any = None) -> Run:
    ctx = multiprocessing.get_context("fork")
    start, out = ctx.Barrier(n + 1), ctx.Queue()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)  # the agents, once reaped
    before_load = load()
    procs = [ctx.Process(target=agent, args=(url, f"agent{k}", k, seconds, start, out)) for k in range(n)]
    for p in procs:
        p.start()
    start.wait(600)
    began = time.monotonic()
    exclude = {os.getpid(), *(p.pid for p in procs)}
    if pooler is not None and pooler.process is not None:
        exclude.add(pooler.process.pid)
    cpu0 = server_cpu(server_uid, exclude) if server_uid is not None else None
    pooler0 = process_cpu(pooler.process.pid) if pooler is not None else None
    wait0 = pooler_wait_us(pooler.admin_url()) if pooler is not None else None
    results = [AgentResult(**out.get(timeout=seconds + 600)) for _ in procs]
    for p in procs:
        p.join(60)
    elapsed = time.monotonic() - began
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    time.sleep(0.5)  # the backends of agents that closed their connections exit
    cpu1 = server_cpu(server_uid, exclude) if server_uid is not None else None
    pooler1 = process_cpu(pooler.process.pid) if pooler is not None else None
    wait1 = pooler_wait_us(pooler.admin_url()) if pooler is not None else None
    latencies = sorted(x for r in results for x in r.latencies)
    errors = [e for r in results for e in r.errors]
    steps = len(latencies)

    def pct(q: float) -> float | None:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else None

    agents_cpu = (reaped.ru_utime + reaped.ru_stime) - (before.ru_utime + before.ru_stime)
    return Run(
        backend, n, round(elapsed, 2), steps, steps / seconds, pct(0.5), pct(0.99), len(errors),
        errors[0] if errors else None, agents_cpu * 1000 / steps if steps else None,
        None if cpu0 is None else (cpu1 - cpu0) / elapsed * 100,
        None if pooler0 is None else (pooler1 - pooler0) / elapsed * 100,
        None if wait0 is None or not steps else (wait1 - wait0) / 1000 / steps,
        before_load, load(),
    )


# --- the table ---------------------------------------------------------------------------


def med(runs: list[Run], name: str) -> float | None:
    values = [getattr(r, name) for r in runs if getattr(r, name) is not None]
    return statistics.median(values) if values else None


def cell(value: float | None, digits: int = 1) -> str:
    if value is None:
        return ""
    return f"{value:,.0f}" if digits == 0 else f"{value:,.{digits}f}"


def rows_of(groups: dict[tuple[str, int], list[Run]]) -> list[list[str]]:
    rows = []
    for (backend, n), runs in groups.items():
        rows.append([backend, str(n), cell(med(runs, "steps_per_s"), 0), cell(med(runs, "p50_ms")),
                     cell(med(runs, "p99_ms"), 0), cell(med(runs, "errors"), 0),
                     cell(med(runs, "agent_cpu_ms_per_step"), 2), cell(med(runs, "server_cpu_pct"), 0),
                     cell(med(runs, "pooler_cpu_pct"), 0), cell(med(runs, "pooler_wait_ms_per_step"), 2)])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", default="10,50,200", help="fleet sizes (default: 10,50,200)")
    ap.add_argument("--seconds", type=float, default=10.0, help="each run's length (default: 10)")
    ap.add_argument("--runs", type=int, default=3, help="runs of each figure, median reported (default: 3)")
    ap.add_argument("--backends", default="direct,pgbouncer,sqlite", help="default: direct,pgbouncer,sqlite")
    ap.add_argument("--pool", type=int, default=20, help="PgBouncer's default_pool_size (default: 20)")
    ap.add_argument("--max-connections", type=int, default=100, help="the server's (default: 100)")
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "ohm-bench" / "fleet",
                    help="SQLite's files (default: /tmp/ohm-bench/fleet)")
    ap.add_argument("--json", type=Path, help="write every run's figures here")
    args = ap.parse_args()
    sizes = [int(s) for s in args.agents.split(",") if s.strip()]
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]

    say("A fleet of agent processes on one database: PostgreSQL direct, through PgBouncer, SQLite")
    say(f"machine: {machine()}")
    say(f"load average at start (1/5/15 min): {load()}")
    say(f"agents: {', '.join(map(str, sizes))}; {args.seconds:g} s a run; {args.runs} runs (medians); "
        f"each agent its own conversation, the SDK workload's steps, LLMSummarizingCondenser"
        f"({MAX_SIZE}, {KEEP_FIRST}) offline, a search every {SEARCH_EVERY} steps")
    groups: dict[tuple[str, int], list[Run]] = {}
    started = time.perf_counter()
    args.dir.mkdir(parents=True, exist_ok=True)
    warm_up(args.dir)
    server_backends = [b for b in backends if b in ("direct", "pgbouncer")]
    if server_backends:
        from tools.pg_server import throwaway_server

        settings = f"-c max_connections={args.max_connections} -c shared_buffers=256MB"
        with throwaway_server(settings=settings) as server:
            import psycopg
            import pwd

            uid = pwd.getpwnam("postgres").pw_uid if os.geteuid() == 0 else os.geteuid()
            say(f"server: PostgreSQL with fsync, synchronous_commit and full_page_writes on; {settings}")
            for backend in server_backends:
                pooled = backend == "pgbouncer"
                if pooled:
                    from tools.pgbouncer import pooler as start_pooler

                    running_pooler = start_pooler(server, pool_size=args.pool, max_client_conn=max(sizes) + 50)
                    the_pooler = running_pooler.__enter__()
                    say(f"pgbouncer: PgBouncer (Debian's), pool_mode=transaction, default_pool_size={args.pool}, "
                        f"max_client_conn={max(sizes) + 50}, its defaults otherwise")
                try:
                    for n in sizes:
                        for k in range(args.runs):
                            name = f"fleet_{backend}_{n}_{k}"
                            with psycopg.connect(server, autocommit=True) as admin:
                                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                                admin.execute(f'CREATE DATABASE "{name}"')
                            direct = server.rsplit("/", 1)[0] + f"/{name}"
                            prepare(direct, n)
                            url = the_pooler.url(name) if pooled else direct
                            run = one_run(backend, url, n, args.seconds, server_uid=uid,
                                          pooler=the_pooler if pooled else None)
                            groups.setdefault((backend, n), []).append(run)
                            report_run(run)
                            with psycopg.connect(server, autocommit=True) as admin:
                                admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
                finally:
                    if pooled:
                        running_pooler.__exit__(None, None, None)
    if "sqlite" in backends:
        for n in sizes:
            for k in range(args.runs):
                folder = Path(tempfile.mkdtemp(prefix="fleet-", dir=args.dir))
                try:
                    path = str(folder / "fleet.db")
                    prepare(path, n)
                    run = one_run("sqlite", path, n, args.seconds, server_uid=None)
                    groups.setdefault(("sqlite", n), []).append(run)
                    report_run(run)
                finally:
                    shutil.rmtree(folder, ignore_errors=True)
    print()
    order = sorted(groups, key=lambda key: (key[1], backends.index(key[0])))
    print(table(["backend", "agents", "steps/s", "p50", "p99", "errors", "cpu", "srv %", "pool %", "wait"],
                rows_of({key: groups[key] for key in order})))
    say("p50, p99: a step's latency, ms; cpu: the agents' CPU per step, ms; srv %, pool %: CPU of "
        "the PostgreSQL processes, of PgBouncer's, as % of one core; wait: the pooler's wait for a "
        "server connection per step, ms")
    for key in order:
        firsts = [r.first_error for r in groups[key] if r.first_error]
        if firsts:
            say(f"{key[0]}, {key[1]} agents: first error: {firsts[0]}")
    say(f"load average at end (1/5/15 min): {load()}; this bench took {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for runs in groups.values() for r in runs], indent=1))


def report_run(run: Run) -> None:
    say(f"  {run.backend}, {run.agents} agents: {run.steps_per_s:,.0f} steps/s, p99 "
        f"{cell(run.p99_ms)} ms, {run.errors} errors; load {run.load_before} -> {run.load_after}")


if __name__ == "__main__":
    main()
