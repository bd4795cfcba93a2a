"""This project beside the session stores agent builders use, on one workload, in one run.

    python bench/peers.py [--sizes 1k,10k,100k] [--repeats 5] [--steps 10]
                          [--stores ohm-condenser,openai-sqlite,...] [--dir /tmp/ohm-bench/peers]
                          [--json results.json]

Stores (bench/peer_stores/, one script each; each peer in a virtual environment the bench
makes on first use under ``--dir`` with the versions pinned in registry.py, never by the
project's test command or CI):
  * this project, with a condenser: the SDK workload with the Condensations of the SDK's
    ``LLMSummarizingCondenser(max_size=120, keep_first=4)`` (offline, bench/sdk_workload.py),
    and without one (the same events, no Condensations: every event is in the view);
  * this project's ``MemorySession`` (the Agents SDK's ``Session``), given the same items as
    the OpenAI sessions, with that condenser (run by the session after each ``add_items``)
    and without one;
  * OpenAI Agents ``SQLiteSession`` and ``SQLAlchemySession`` (sqlite+aiosqlite);
  * LangGraph ``SqliteSaver`` under a graph whose state is the message list;
  * Google ADK ``DatabaseSessionService`` (sqlite+aiosqlite).
Workload: bench/sdk_workload.py's ``sdk_events(n)`` - a user message, then steps of tool
calls (~1.2 KB) and their results (~2.8 KB) - each store given the same items in its own
types (the system prompt is the agent's configuration in the peers, so they get n - 1).
Each history is built once per size by the store's own bulk API and cached under ``--dir``.

Measured at each size, in every repeat store after store, each in a fresh process pinned to
one core (``--core``, by ``os.sched_setaffinity``):
  * resume: open the store and produce what is sent to the model (this project:
    ``EventStore(path)``, ``conv.view()``, ``view.to_messages()``); CPU (process_time)
    and wall of that, and the process's peak RSS (VmHWM);
  * a window, for the sessions (``MemorySession``, the OpenAI ones): open the store and
    ``get_items(limit=100)``, what the Agents SDK asks at each turn under
    ``SessionSettings(limit=100)``; CPU;
  * a step: append a tool call and its result (two commits, as an agent loop does) onto a
    copy of the history, ``--steps`` steps, their median; with each store's default
    durability, then with synchronous=FULL (an fsync each commit) in another process;
  * disk per event: the built file (and its -wal) divided by the workload's events.
Figures are medians of ``--repeats`` (the resume's spread, min to max, in a table of its
own); each table has a column per size, each cell a figure and its ratio to this project
without a condenser (like for like: every item sent).
``--json FILE`` writes every raw result.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    Workload,
    workloads,
    child_env,
    database,
    disk_bytes,
    human,
    load,
    machine,
    median,
    parse_size,
    remove_db,
    say,
    work_copy,
)
from bench.peer_stores import registry  # noqa: E402
from bench.peer_stores.registry import BASELINE, STORES, Store  # noqa: E402
from bench.report import table  # noqa: E402

DEFAULT_DIR = Path("/tmp/ohm-bench/peers")
#: The items a "window" measurement asks for (``get_items(limit=WINDOW)``).
WINDOW = 100
TIMEOUT = 3600.0


def no_condenser() -> Workload:
    from bench import sdk_workload

    sdk = workloads("sdk")[0]
    return Workload("sdk-nocondenser", "the SDK workload without Condensations", sdk.version,
                    lambda n, seed: sdk_workload.sdk_events(n, seed=seed, condense=False), sdk.make_pairs)


# --- children ------------------------------------------------------------------------------


def run_child(store: Store, op: str, folder: Path, **args: Any) -> dict[str, Any]:
    """Run ``op`` of ``store``'s script in its environment; its JSON result."""
    argv = [registry.python_of(store, folder), str(registry.HERE / store.script), op,
            json.dumps({"store": store.name, **args})]
    env = {**os.environ, **(child_env() if store.ours else {}), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=TIMEOUT)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode or not lines:
        raise RuntimeError(f"{store.name} {op} exited with {proc.returncode}: {proc.stderr[-2000:]}")
    return json.loads(lines[-1])


# --- histories -----------------------------------------------------------------------------


def fold_wal(path: Path) -> int:
    """Checkpoint ``path``'s -wal into it (so the file is the whole history); its size."""
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    return disk_bytes(path)


def peer_history(store: Store, folder: Path, n: int, seed: int) -> Path:
    """``store``'s cached history of ``n`` workload events, built by its child once."""
    path = folder / store.name / f"{store.name}-{n}-s{seed}.db"
    info = path.with_suffix(".build.json")
    if path.exists() and info.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial.db")
    remove_db(partial)
    print(f"  building {store.name} at {human(n)}...", end="", flush=True)
    t0 = time.perf_counter()
    items = registry.items_file(folder, n, seed)
    result = run_child(store, "build", folder, path=str(partial), items=str(items))
    seconds = time.perf_counter() - t0
    fold_wal(partial)
    remove_db(path)
    os.replace(partial, path)
    remove_db(partial)
    info.write_text(json.dumps({"events": n, "stored": result["stored"], "seconds": seconds}))
    print(f" {seconds:.0f} s", flush=True)
    return path


def history(store: Store, folder: Path, n: int, seed: int) -> Path:
    if store.ours and store.events:
        return database(folder, workloads("sdk")[0] if store.condenser else no_condenser(), n, seed)
    return peer_history(store, folder, n, seed)


# --- one repeat ----------------------------------------------------------------------------


@dataclass
class Bench:
    folder: Path
    seed: int
    steps: int
    core: int

    def resume(self, store: Store, path: Path) -> dict[str, Any]:
        return run_child(store, "resume", self.folder, path=str(path), core=self.core)

    def append(self, store: Store, path: Path) -> list[dict[str, Any]]:
        """Default durability, then synchronous=FULL, on one copy, in two processes; the
        first result also has the file's growth per step (its -wal folded in before and after)."""
        steps = registry.steps_file(self.folder, self.seed, 2 * self.steps)
        out = []
        with work_copy(self.folder, path, store.name) as copy:
            size = fold_wal(copy)
            for k, durability in enumerate(("default", "full")):
                out.append(run_child(store, "append", self.folder, path=str(copy), steps=str(steps),
                                     offset=k * self.steps, count=self.steps, seed=self.seed,
                                     durability=durability, core=self.core))
                if k == 0:
                    out[0]["disk_per_step"] = (fold_wal(copy) - size) / self.steps
        return out

    def measure(self, store: Store, path: Path, into: dict[str, list]) -> None:
        into.setdefault("resume", []).append(self.resume(store, path))
        if store.window:
            into.setdefault("window", []).append(
                run_child(store, "window", self.folder, path=str(path), limit=WINDOW, core=self.core))
        default, full = self.append(store, path)
        into.setdefault("append", []).append(default)
        into.setdefault("append_full", []).append(full)


# --- figures -------------------------------------------------------------------------------


def ms(values: list[float]) -> float | None:
    m = median(values)
    return None if m is None else m * 1000


FIGURES: list[tuple[str, Callable[[dict[str, Any]], float | None]]] = [
    ("resume CPU, ms", lambda r: ms([x["cpu"] for x in r["resume"]])),
    ("resume wall, ms", lambda r: ms([x["wall"] for x in r["resume"]])),
    ("resume peak RSS, MB", lambda r: median([x["peak_rss_mb"] for x in r["resume"]])),
    (f"get_items(limit={WINDOW}) CPU, ms", lambda r: ms([x["cpu"] for x in r.get("window", [])])),
    ("step CPU, default durability, ms", lambda r: ms([median(x["step_cpu"]) for x in r["append"]])),
    ("step wall, default durability, ms", lambda r: ms([median(x["step_wall"]) for x in r["append"]])),
    ("step CPU, synchronous=FULL, ms", lambda r: ms([median(x["step_cpu"]) for x in r["append_full"]])),
    ("step wall, synchronous=FULL, ms", lambda r: ms([median(x["step_wall"]) for x in r["append_full"]])),
    ("disk per event, B", lambda r: r["disk_bytes"] / r["events"]),
    ("disk growth per appended step, KB", lambda r: median([x["disk_per_step"] / 1024 for x in r["append"]])),
]


def number(v: float | None) -> str:
    if v is None:
        return "-"
    if v < 10:
        return f"{v:.2f}"
    return f"{v:.1f}" if v < 100 else f"{v:,.0f}"


def ratio(v: float | None, base: float | None) -> str:
    if v is None or not base:
        return ""
    r = v / base
    return f" ×{r:.2g}" if r < 10 else f" ×{r:,.0f}"


def print_tables(results: dict[str, dict[int, dict]], stores: list[Store], sizes: list[int]) -> None:
    for title, fn in FIGURES:
        rows = []
        for store in stores:
            cells = []
            for n in sizes:
                v = fn(results[store.name][n])
                base = fn(results[BASELINE][n]) if BASELINE in results and store.name != BASELINE else None
                cells.append(number(v) + ratio(v, base))
            rows.append([store.label, *cells])
        print(table([title, *(human(n) for n in sizes)], rows))
        print(flush=True)
    # How far the repeats lie apart: a median of a wide spread is a weak promise.
    rows = []
    for store in stores:
        cells = []
        for n in sizes:
            cpu = [x["cpu"] * 1000 for x in results[store.name][n]["resume"]]
            cells.append(f"{number(min(cpu))}–{number(max(cpu))}" if cpu else "-")
        rows.append([store.label, *cells])
    print(table(["resume CPU, min–max of repeats, ms", *(human(n) for n in sizes)], rows))
    print(flush=True)


def report(results: dict[str, dict[int, dict]], stores: list[Store], sizes: list[int]) -> dict[str, tuple[str, str]]:
    """The durability each store ran with, a note, the tables; the durabilities."""
    first = {s.name: results[s.name][sizes[0]] for s in stores}
    durability = {k: (r["append"][0]["durability"], r["append_full"][0]["durability"]) for k, r in first.items()}
    for s in stores:
        say(f"{s.label}: by default {durability[s.name][0]}; FULL run {durability[s.name][1]}")
    say(f"each cell: the figure, then × its ratio to {next(s.label for s in STORES if s.name == BASELINE)}")
    print()
    print_tables(results, stores, sizes)
    return durability


# --- the run -------------------------------------------------------------------------------


def prepare(args: argparse.Namespace, stores: list[Store], sizes: list[int]) -> dict[str, Any]:
    """Environments, versions, and every cached history; {store: {n: path}} and versions."""
    args.dir.mkdir(parents=True, exist_ok=True)
    envs = sorted({s.env for s in stores if s.env})
    for env in envs:
        registry.ensure_env(env, args.dir)
    versions = {env: registry.versions(env, args.dir) for env in envs}
    paths = {s.name: {n: history(s, args.dir, n, args.seed) for n in sizes} for s in stores}
    return {"versions": versions, "paths": paths}


def arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1k,10k,100k", help="workload events (default: 1k,10k,100k)")
    ap.add_argument("--repeats", type=int, default=5, help="runs per figure, median reported (default: 5)")
    ap.add_argument("--steps", type=int, default=10, help="steps appended per append measurement (default: 10)")
    names = [s.name for s in STORES]
    ap.add_argument("--stores", default=",".join(names), help="comma-separated (default: all): " + ", ".join(names))
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR,
                    help=f"environments and histories (default: {DEFAULT_DIR})")
    ap.add_argument("--seed", type=int, default=0, help="workload seed (default: 0)")
    ap.add_argument("--core", type=int, default=0, help="the core children are pinned to (default: 0)")
    ap.add_argument("--json", type=Path, help="write the raw results here")
    args = ap.parse_args()
    args.sizes = sorted({parse_size(s) for s in args.sizes.split(",") if s.strip()})
    wanted = set(args.stores.split(","))
    if wanted - set(names):
        ap.error(f"unknown stores: {', '.join(sorted(wanted - set(names)))}")
    args.stores = [s for s in STORES if s.name in wanted]
    return args


def measure_all(args: argparse.Namespace, paths: dict[str, dict[int, Path]]) -> dict[str, dict[int, dict]]:
    """Every repeat: each size, each store (resume, then the two step runs)."""
    bench = Bench(args.dir, args.seed, args.steps, args.core)
    results = {s.name: {n: {"events": n, "disk_bytes": disk_bytes(p), "path": str(p)}
                        for n, p in paths[s.name].items()} for s in args.stores}
    for r in range(args.repeats):
        print(f"  repeat {r + 1}/{args.repeats}, load {load()}", flush=True)
        for n in args.sizes:
            for s in args.stores:
                bench.measure(s, paths[s.name][n], results[s.name][n])
    print()
    return results


def main() -> int:
    args = arguments()
    started = time.perf_counter()
    say("openhands-memory beside the peer session stores (bench/peers.py)")
    say(f"machine: {machine()}")
    load_start = load()
    say(f"load average at start (1/5/15 min): {load_start}")
    ready = prepare(args, args.stores, args.sizes)
    for env, vs in ready["versions"].items():
        say(f"{env}: " + ", ".join(f"{p} {v}" for p, v in vs.items()))
    say(f"sizes: {', '.join(human(n) for n in args.sizes)}; repeats: {args.repeats} (medians); {args.steps} "
        f"steps per append measurement; children pinned to core {args.core}; files under {args.dir}")
    results = measure_all(args, ready["paths"])
    durability = report(results, args.stores, args.sizes) if args.repeats > 0 else {}
    load_end = load()
    say(f"load average at end (1/5/15 min): {load_end}; this bench took {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({
            "machine": machine(), "load_start": load_start, "load_end": load_end,
            "versions": ready["versions"], "pins": registry.PINS, "sizes": args.sizes, "repeats": args.repeats,
            "steps": args.steps, "durability": durability,
            "results": {k: {str(n): v for n, v in per.items()} for k, per in results.items()},
        }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
