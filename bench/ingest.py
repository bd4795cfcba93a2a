"""The receiver of the OpenHands agent server's webhooks (``serve DB --ingest``): events/s.

    PYTHONPATH=. python bench/ingest.py [--events 20000] [--repeats 3] [--backend both]

What is timed is what an agent server's webhooks cost the receiver, over real HTTP: the
receiver is ``openhands-memory serve DB --ingest`` in its own process (uvicorn), and the
sender posts the SDK-shaped workload (``bench/sdk_workload.py``: every event naming the one
before it as the SDK 1.58 stamps them, a Condensation now and then) as the agent server does:
``POST /events/{conversation hex}`` with a JSON list of ``event_buffer_size`` events, a new
connection per batch, the next batch once the previous one is answered (the agent server
posts a conversation's batches one at a time, and the receiver answers after the commit).

Rows: batches of 5 (the agent server's default buffer) and of 100, one conversation posting,
and ``--agents`` conversations posting at once (threads, each its own conversation, as a
fleet's agent servers would); events/s from the first post to the last answer, the median of
``--repeats`` runs, each into a new database (SQLite: a file in ``--dir``; PostgreSQL: a new
database on a throwaway local server with PostgreSQL's own durability settings).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import load, machine, median, say  # noqa: E402
from bench.sdk_workload import sdk_events  # noqa: E402

GOAL = 5_000  # events/s with batches of 100 on SQLite (the target)
FLEET = 10  # agents x 1 event/s: what the receiver must never fall behind


def wire(n: int, seed: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for e in sdk_events(n, seed=seed):
        data = json.loads(e.model_dump_json())
        data["parent_id"] = out[-1]["id"] if out else None
        out.append(data)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Receiver:
    def __init__(self, database: str):
        self.port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "openhands_memory.cli", "serve", database, "--ingest", "--port", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        end = time.monotonic() + 30
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            if self.process.poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"the receiver did not start: {self.process.stderr.read().decode()[-2000:]}")
            time.sleep(0.05)

    def post(self, cid: uuid.UUID, body: bytes) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            connection.request("POST", f"/events/{cid.hex}", body, {"Content-Type": "application/json"})
            answer = connection.getresponse()
            text = answer.read()
            if answer.status != 200:
                raise RuntimeError(f"HTTP {answer.status}: {text[:300]!r}")
        finally:
            connection.close()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def bodies(events: list[dict[str, Any]], size: int) -> list[bytes]:
    return [json.dumps(events[k : k + size]).encode() for k in range(0, len(events), size)]


def run(database: str, conversations: list[list[bytes]], events: int) -> float:
    """events/s of posting each conversation's batches in order, the conversations at once."""
    receiver = Receiver(database)
    try:
        failures: list[BaseException] = []

        def agent(batches: list[bytes]) -> None:
            cid = uuid.uuid4()
            try:
                for body in batches:
                    receiver.post(cid, body)
            except BaseException as e:  # reported below
                failures.append(e)

        threads = [threading.Thread(target=agent, args=(c,)) for c in conversations]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.perf_counter() - start
        if failures:
            raise failures[0]
        return events / took
    finally:
        receiver.stop()


def new_database(backend: str, folder: Path, admin_url: str | None, k: int) -> str:
    if backend == "sqlite":
        path = folder / f"ingest-{k}.db"
        subprocess.run([sys.executable, "-m", "openhands_memory.cli", "init", str(path)], check=True,
                       stdout=subprocess.DEVNULL)
        return str(path)
    import psycopg

    name = f"ingest_{k}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = admin_url.rsplit("/", 1)[0] + f"/{name}"
    from openhands_memory.conversation import EventStore

    EventStore(url).close()
    return url


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=20_000, help="events per run (default: 20000)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per figure, median reported (default: 3)")
    ap.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    ap.add_argument("--agents", type=int, default=FLEET, help=f"conversations posting at once (default: {FLEET})")
    ap.add_argument("--dir", type=Path, default=None, help="where SQLite files go (default: a temporary folder)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    say("ingest: the receiver of the OpenHands agent server's webhooks (serve --ingest), over HTTP")
    say(f"machine: {machine()}")
    say(f"load average at start (1/5/15 min): {load()}")
    say(f"{args.events:,} SDK-shaped events a run; repeats: {args.repeats} (medians reported); "
        f"{args.agents} conversations at once in the fleet rows; seed {args.seed}")
    started = time.perf_counter()
    events = wire(args.events, args.seed)
    share = [wire(args.events // args.agents, args.seed + 1 + a) for a in range(args.agents)]
    rows: dict[tuple[int, int], dict[str, float | None]] = {}
    with ExitStack() as stack:
        folder = args.dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ohm-ingest-")))
        folder.mkdir(parents=True, exist_ok=True)
        admin_url = None
        if "postgres" in backends:
            from tools.pg_server import DURABLE, throwaway_server

            admin_url = stack.enter_context(throwaway_server(settings=DURABLE))
            say("PostgreSQL: a throwaway local server (tools/pg_server.py), fsync and synchronous_commit on")
        print(flush=True)
        k = 0
        for size in (5, 100):
            single = [bodies(events, size)]
            fleet = [bodies(c, size) for c in share]
            for agents, work, n in ((1, single, len(events)), (args.agents, fleet, sum(len(c) for c in share))):
                for backend in backends:
                    rates = []
                    for _ in range(args.repeats):
                        k += 1
                        rates.append(run(new_database(backend, folder, admin_url, k), work, n))
                    rows.setdefault((size, agents), {})[backend] = median(rates)
    head = f"{'events/s (median)':<44}" + "".join(f"{b:>12}" for b in backends)
    print(head)
    print("-" * len(head))
    for (size, agents), by in rows.items():
        label = f"batches of {size}, " + ("one conversation" if agents == 1 else f"{agents} conversations at once")
        print(f"{label:<44}" + "".join(f"{by[b]:>12,.0f}" for b in backends))
    print()
    best = rows[(100, 1)].get("sqlite")
    if best is not None:
        say(f"target: >= {GOAL:,} events/s with batches of 100 on SQLite: {best:,.0f} "
            f"{'PASS' if best >= GOAL else 'FAIL'}")
    slowest = min(v for by in rows.values() for v in by.values() if v is not None)
    say(f"a fleet of {FLEET} agents at 1 event/s each sends {FLEET} events/s; the slowest row takes "
        f"{slowest:,.0f} ({slowest / FLEET:,.0f}x that)")
    print()
    say(f"load average at end (1/5/15 min): {load()}; this bench took {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
