"""History trees: a view on a branch, navigate, fork and a cached step on a branch, beside
the linear figures, as the history grows (issue 19's targets).

    python bench/tree.py [--workload sdk] [--sizes 10k,100k,1M] [--repeats 7] [--steps 100]

For each size, on a copy of the cached history (bench/common.py):
  * linear first view: a new ``EventStore`` and ``conv.view()`` (CPU, median of --repeats),
    after 20 steps appended on the line (the branch below gets the same 20 steps);
  * navigate: ``conv.navigate(n // 2)`` and back to the leaf, alternately (CPU and wall per
    call), and the bytes it adds to the file (page count × page size after a checkpoint);
  * a branch: HEAD moved back to the first event from n // 2 on whose view is as long as the
    line's (the fork point is half the history back; equal tails make the figures
    comparable), 20 steps appended there; then the first view on that branch (a new store each time) and
    its SQL statements, and its ratio to the linear first view;
  * cached step on the branch (append a pair, view, messages) beside the same on the line;
  * fork: ``conv.fork()`` of the branch into a new conversation (it copies the path: CPU,
    wall and bytes added; once per size, it is not small).
CPU = time.process_time. Targets (issue 19): branch first view ≤ 1.3 × linear; navigate and
fork ≤ 5 ms and ≤ 4 KB; cached step on a branch within 10 % of the linear one; ≤ 12
statements per view.
"""

from __future__ import annotations

import argparse
import logging
import os
import sqlite3
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    CONVERSATION,
    Figure,
    Session,
    StatementCounter,
    Workload,
    add_arguments,
    database,
    human,
    median,
    print_figures,
    say,
    work_copy,
)
from openhands_memory.conversation import EventStore  # noqa: E402

TARGET_BRANCH_RATIO = 1.3
TARGET_MOVE_MS = 5.0
TARGET_MOVE_BYTES = 4096
TARGET_STEP_RATIO = 1.10
TARGET_STATEMENTS = 12
BRANCH_STEPS = 20


def file_bytes(path: Path) -> int:
    """The file's size once everything is checkpointed into it."""
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return db.execute("PRAGMA page_count").fetchone()[0] * db.execute("PRAGMA page_size").fetchone()[0]


def first_views(path: Path, repeats: int) -> tuple[float, int]:
    """(median CPU ms of open + first view, statements of one)."""
    cpu = []
    for _ in range(repeats):
        c0 = time.process_time()
        with EventStore(path, create=False) as store:
            store.conversation(CONVERSATION).view()
        cpu.append((time.process_time() - c0) * 1000)
    with EventStore(path, create=False) as store:
        conv = store.conversation(CONVERSATION)
        with StatementCounter(store.db) as counter:
            conv.view()
    return median(cpu) or 0.0, counter.count


def navigations(path: Path, repeats: int) -> dict:
    with EventStore(path, create=False) as store:
        conv = store.conversation(CONVERSATION)
        leaf, middle = len(conv) - 1, len(conv) // 2
        before = file_bytes(path)
        cpu, wall = [], []
        for k in range(2 * repeats):
            w0, c0 = time.perf_counter(), time.process_time()
            conv.navigate(middle if k % 2 == 0 else leaf)
            cpu.append((time.process_time() - c0) * 1000)
            wall.append((time.perf_counter() - w0) * 1000)
    return {"cpu": median(cpu), "wall": median(wall), "bytes": file_bytes(path) - before}


def cached_steps(path: Path, wl: Workload, seed: int, steps: int) -> float:
    cpu = []
    pairs = wl.pairs(seed + 200)
    with EventStore(path, create=False) as store:
        conv = store.conversation(CONVERSATION)
        conv.view().to_messages()
        for _ in range(steps):
            action, obs = next(pairs)
            c0 = time.process_time()
            conv.append(action)
            conv.append(obs)
            conv.view().to_messages()
            cpu.append((time.process_time() - c0) * 1000)
    return median(cpu) or 0.0


def grow(path: Path, wl: Workload, seed: int, back: bool) -> int:
    """Append BRANCH_STEPS steps at HEAD, having moved it half the history back (``back``):
    a branch whose fork point is n/2. The same steps on the line (``back=False``) give the
    linear view of the same length to compare with. Returns where they start from."""
    with EventStore(path, create=False) as store:
        conv = store.conversation(CONVERSATION)
        start = len(conv) - 1
        if back:  # from n/2 on, the first event whose view is as long as the line's now
            want, start = len(conv.view()), len(conv) // 2
            logging.disable(logging.WARNING)  # views of points inside tool batches say what they drop
            try:
                while len(conv.view(at=start)) != want and start < len(conv) - 1:
                    start += 1
            finally:
                logging.disable(logging.NOTSET)
            conv.navigate(start)
        pairs = wl.pairs(seed + 300)
        for _ in range(BRANCH_STEPS):
            conv.append_many(next(pairs))
        return start


def view_length(path: Path) -> int:
    with EventStore(path, create=False) as store:
        return len(store.conversation(CONVERSATION).view())


def fork(path: Path) -> dict:
    before = file_bytes(path)
    with EventStore(path, create=False) as store:
        conv = store.conversation(CONVERSATION)
        w0, c0 = time.perf_counter(), time.process_time()
        copy = conv.fork(conversation_id="bench-fork")
        cpu, wall = (time.process_time() - c0) * 1000, (time.perf_counter() - w0) * 1000
        events = len(copy)
    return {"cpu": cpu, "wall": wall, "bytes": file_bytes(path) - before, "events": events}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(ap, repeats=7)
    ap.set_defaults(workload="sdk")
    ap.add_argument("--steps", type=int, default=100, help="cached steps per size, line and branch (default 100)")
    args = ap.parse_args()
    s = Session("openhands-memory history-tree bench", args,
                [f"branch: HEAD moved back to about n/2, {BRANCH_STEPS} steps appended there; CPU = "
                 "time.process_time; targets from issue 19"])
    ok = True
    for wl in s.workloads:
        f = {
            "line_len": Figure("events in the view, line", "{:.0f}"),
            "branch_len": Figure("events in the view, branch", "{:.0f}"),
            "linear": Figure("first view, line, CPU ms"),
            "branch": Figure("first view, branch, CPU ms"),
            "ratio": Figure("first view, branch / line", "{:.2f}", TARGET_BRANCH_RATIO),
            "sql": Figure("SQL statements, view on a branch", "{:.0f}", TARGET_STATEMENTS),
            "nav": Figure("navigate, CPU ms", "{:.3f}", TARGET_MOVE_MS),
            "nav_wall": Figure("navigate, wall ms", "{:.3f}"),
            "nav_bytes": Figure("navigate, bytes added", "{:.0f}", TARGET_MOVE_BYTES),
            "step_line": Figure("cached step, line, CPU ms", "{:.3f}"),
            "step_branch": Figure("cached step, branch, CPU ms", "{:.3f}"),
            "step_ratio": Figure("cached step, branch / line", "{:.2f}", TARGET_STEP_RATIO),
            "fork": Figure("fork (copies the path), CPU ms", "{:.0f}", TARGET_MOVE_MS),
            "fork_wall": Figure("fork, wall ms", "{:.0f}"),
            "fork_kb": Figure("fork, KB added", "{:.0f}", TARGET_MOVE_BYTES / 1024),
        }
        for n in s.sizes:
            path = database(args.dir, wl, n, args.seed)
            with work_copy(args.dir, path, "line") as copy:
                grow(copy, wl, args.seed, back=False)
                linear, _ = first_views(copy, args.repeats)
                line_len = view_length(copy)
                step_line = cached_steps(copy, wl, args.seed, args.steps)
            with work_copy(args.dir, path, "tree") as copy:
                nav = navigations(copy, args.repeats)
                point = grow(copy, wl, args.seed, back=True)
                on_branch, statements = first_views(copy, args.repeats)
                branch_len = view_length(copy)
                step_branch = cached_steps(copy, wl, args.seed, args.steps)
                forked = fork(copy)
            values = {
                "line_len": line_len, "branch_len": branch_len, "linear": linear, "branch": on_branch, "ratio": on_branch / linear, "sql": statements,
                "nav": nav["cpu"], "nav_wall": nav["wall"], "nav_bytes": nav["bytes"],
                "step_line": step_line, "step_branch": step_branch, "step_ratio": step_branch / step_line,
                "fork": forked["cpu"], "fork_wall": forked["wall"], "fork_kb": forked["bytes"] / 1024,
            }
            for key, value in values.items():
                f[key].values[n] = value
            say(f"{wl.name} {human(n)}: fork point {point}; first view line {linear:.2f} ms, branch "
                f"{on_branch:.2f} ms ({statements} statements); navigate {nav['cpu']:.3f} ms, "
                f"{nav['bytes']} B; cached step line {step_line:.3f} ms, branch {step_branch:.3f} ms; "
                f"fork of {forked['events']:,} events {forked['wall']:.0f} ms wall, "
                f"{forked['bytes'] / 1024:.0f} KB", "  ")
        print()
        figures = list(f.values())
        print_figures(f"{wl.name} workload", s.sizes, figures)
        ok = ok and all(x.verdict() != "FAIL" for x in figures)
    s.end()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
