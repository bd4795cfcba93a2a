"""What every measured child process of bench/peers.py shares (standard library only: the
peers' virtual environments have nothing of this project in them).

A child is ``<python> bench/peer_stores/<adapter>.py OP ARGS_JSON``; it pins itself to one
core, runs OP (``build``, ``append`` or ``resume``) with the store named in ARGS and prints
one JSON line: the figures, its peak RSS and the durability it ran with.

The workload reaches a child as neutral JSON lines written by the parent (bench/peers.py):
``{"k": "user"|"agent", "text"}``, ``{"k": "call", "turn", "id", "name", "arguments",
"thought"}``, ``{"k": "result", "id", "name", "output"}``; calls of one LLM response share
``turn``. :func:`units` groups them into what a store keeps: a message, one response's
calls, or one result.
"""

from __future__ import annotations

import json
import os
import sys
import time
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator


def pin(core: int | None) -> None:
    if core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})


def peak_rss_mb() -> float:
    """This process's peak RSS. VmHWM belongs to the address space made at exec, where
    ``getrusage``'s ru_maxrss would also carry the parent's peak across fork and exec."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def records(path: str) -> Iterator[dict[str, Any]]:
    with open(path) as f:
        for line in f:
            yield json.loads(line)


def units(recs: Iterable[dict[str, Any]]) -> Iterator[tuple[str, Any]]:
    """("user"|"agent", text), ("calls", [call records of one response]), ("result", record)."""
    calls: list[dict[str, Any]] = []
    for r in recs:
        if calls and (r["k"] != "call" or r["turn"] != calls[0]["turn"]):
            yield "calls", calls
            calls = []
        if r["k"] == "call":
            calls.append(r)
        elif r["k"] == "result":
            yield "result", r
        else:
            yield r["k"], r["text"]
    if calls:
        yield "calls", calls


def steps(args: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The steps to append, ``args["count"]`` from ``args["offset"]``: (call, result) records."""
    pairs = islice(records(args["steps"]), args["offset"], args["offset"] + args["count"])
    return [(call, result) for call, result in pairs]


class Clock:
    """CPU (process_time) and wall seconds since the last ``lap``."""

    def __init__(self) -> None:
        self.cpu, self.wall = time.process_time(), time.perf_counter()

    def lap(self) -> tuple[float, float]:
        cpu, wall = time.process_time(), time.perf_counter()
        out = (cpu - self.cpu, wall - self.wall)
        self.cpu, self.wall = cpu, wall
        return out


def timed_each(items: Iterable[Any], fn: Callable[[Any], None]) -> list[tuple[float, float]]:
    """(CPU, wall) of ``fn`` on each item."""
    laps = []
    clock = Clock()
    for item in items:
        fn(item)
        laps.append(clock.lap())
    return laps


def sqlite_durability(execute: Callable[[str], Any]) -> str:
    """'journal=wal synchronous=FULL' from a function that runs one PRAGMA and returns its value."""
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    journal = execute("PRAGMA journal_mode")
    sync = execute("PRAGMA synchronous")
    return f"journal={journal} synchronous={names.get(int(sync), sync)}"


def pragma(cursor: Any, sql: str) -> Any:
    """One PRAGMA's value through a DB-API cursor (an adapted async driver's too)."""
    cursor.execute(sql)
    return cursor.fetchone()[0]


def watch_connections(sync_engine: Any, full: bool) -> list[str]:
    """On each connection an SQLAlchemy engine opens: synchronous=FULL if ``full``, and its
    durability noted in the list returned (the store's own settings come first)."""
    from sqlalchemy import event

    seen: list[str] = []

    @event.listens_for(sync_engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        if full:
            cur.execute("PRAGMA synchronous=FULL")
        seen.append(sqlite_durability(lambda sql: pragma(cur, sql)))
        cur.close()

    return seen


def run(ops: dict[str, Callable[[dict[str, Any]], dict[str, Any]]]) -> None:
    """The child's main: ``OP ARGS_JSON`` on the command line, one JSON line out."""
    op, args = sys.argv[1], json.loads(sys.argv[2])
    pin(args.get("core"))
    result = ops[op](args)
    result["peak_rss_mb"] = peak_rss_mb()
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def append_result(laps: list[tuple[float, float]], durability: str) -> dict[str, Any]:
    return {"step_cpu": [c for c, _ in laps], "step_wall": [w for _, w in laps], "durability": durability}


def resume_result(clock: Clock, produced: int) -> dict[str, Any]:
    cpu, wall = clock.lap()
    return {"cpu": cpu, "wall": wall, "produced": produced}
