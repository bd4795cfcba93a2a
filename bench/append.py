"""How fast events go in, and how much disk they take.

    python bench/append.py [--events 100000] [--dir DIR] [--profile]

Measures, on a coding-agent event mix (bench/workload.py):
  * durable single-event appends per second: one event per transaction, as an agent loop
    appends, with the default durability "normal" (WAL, synchronous=NORMAL) and with "full"
    (an fsync at every commit) for reference;
  * batched appends per second: append_many in batches of 1,000, up to --events events;
  * bytes on disk per event: the file plus its -wal after PRAGMA wal_checkpoint(TRUNCATE),
    divided by the number of events; and the average JSON payload for context.
Prints a plain-text table, the machine, the targets as PASS/FAIL, and OpenHands SDK 1.58's
figures from DESIGN.md for comparison. Runs in well under two minutes.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.report import table  # noqa: E402
from bench.workload import coding_events  # noqa: E402
from openhands_memory.store import EventStore  # noqa: E402

# Targets (the project's), and OpenHands SDK 1.58 measured on the same machine kind (DESIGN.md).
TARGET_SINGLE = 5_000  # events/s
TARGET_BATCHED = 50_000  # events/s
TARGET_BYTES = 2_100  # bytes/event (2.1 KB, KB = 1000 B)
SDK_APPEND = 900  # events/s
SDK_BYTES = 4_200  # bytes/event

BATCH = 1_000


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def single_appends(path: Path, events: list, durability: str, limit_s: float) -> tuple[int, float]:
    """Append one event per transaction until ``events`` or ``limit_s`` runs out."""
    with EventStore(path, durability=durability) as store:
        conv = store.create_conversation()  # a generated UUID, as in real use
        append = conv.append
        n = 0
        t0 = time.perf_counter()
        deadline = t0 + limit_s
        for e in events:
            append(e)
            n += 1
            if n % 100 == 0 and time.perf_counter() > deadline:
                break
        elapsed = time.perf_counter() - t0
    return n, elapsed


def batched_appends(path: Path, events: list) -> tuple[list[tuple[int, float]], int]:
    """append_many in batches of BATCH; returns (events so far, seconds so far) checkpoints and bytes."""
    marks = []
    with EventStore(path) as store:
        conv = store.create_conversation()
        t0 = time.perf_counter()
        for i in range(0, len(events), BATCH):
            conv.append_many(events[i : i + BATCH])
            done = min(i + BATCH, len(events))
            if done in (10_000, 50_000) or done == len(events):
                marks.append((done, time.perf_counter() - t0))
        store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = disk_bytes(path)
        assert len(conv) == len(events)
    return marks, size


def space_by_object(path: Path, n: int) -> list[list[str]] | None:
    """Bytes per event of each table and index, from SQLite's dbstat (None where it is missing)."""
    db = sqlite3.connect(path)
    try:
        db.execute("CREATE VIRTUAL TABLE temp.stat USING dbstat(main)")
        result = db.execute(
            "SELECT name, SUM(pgsize), SUM(payload), SUM(unused) FROM temp.stat GROUP BY name "
            "ORDER BY 2 DESC LIMIT 6").fetchall()
    except sqlite3.Error:
        return None
    finally:
        db.close()
    return [[f"  {name}", f"{size:,}", f"{size / n:,.0f} B",
             f"{payload / n:,.0f} B", f"{unused / n:,.0f} B"] for name, size, payload, unused in result]


def encode_cost(events: list) -> float:
    """Microseconds per event spent turning events into row tuples (pydantic dump included)."""
    from openhands_memory import rows

    t0 = time.perf_counter()
    for i, e in enumerate(events):
        rows.event_row("c", i, e)
    return 1e6 * (time.perf_counter() - t0) / len(events)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=100_000, help="events for the batched run")
    ap.add_argument("--single", type=int, default=10_000, help="at most this many single appends")
    ap.add_argument("--seconds", type=float, default=8.0, help="time limit of each single-append run")
    ap.add_argument("--dir", default=None, help="where to put the database files (default: a temp dir)")
    ap.add_argument("--profile", action="store_true", help="cProfile the single appends and print the top")
    args = ap.parse_args()

    print("openhands-memory append benchmark")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    print(f"machine: {os.cpu_count()} CPUs, {platform.machine()}, {platform.system()} {platform.release()}; "
          f"Python {platform.python_version()}; SQLite {sqlite3.sqlite_version}; load average {load}")

    t0 = time.perf_counter()
    events = list(coding_events(args.events, seed=0))
    gen_s = time.perf_counter() - t0
    payload = sum(len(e.to_json().encode()) for e in events) / len(events)
    kinds: dict[str, int] = {}
    for e in events:
        kinds[e.kind] = kinds.get(e.kind, 0) + 1
    mix = ", ".join(f"{k} {v / len(events):.0%}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]))
    print(f"workload: {len(events):,} coding-agent events (seed 0) generated in {gen_s:.1f}s; mix: {mix}")
    print()

    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="ohm-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        single = events[: args.single]
        if args.profile:
            import cProfile
            import pstats

            prof = cProfile.Profile()
            prof.enable()
        n_norm, s_norm = single_appends(work / "single-normal.db", single, "normal", args.seconds)
        if args.profile:
            prof.disable()
        n_full, s_full = single_appends(work / "single-full.db", single, "full", args.seconds)
        if args.profile:
            prof_batch = cProfile.Profile()
            prof_batch.enable()
        marks, size = batched_appends(work / "batched.db", events)
        if args.profile:
            prof_batch.disable()
        by_object = space_by_object(work / "batched.db", len(events))
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)

    rate_norm = n_norm / s_norm
    rate_full = n_full / s_full
    n_b, s_b = marks[-1]
    rate_batch = n_b / s_b
    per_event = size / n_b

    rows = [
        ["single append, durability=normal (WAL, sync NORMAL)", f"{n_norm:,}", f"{s_norm:.2f}",
         f"{rate_norm:,.0f}", f"{1e6 / rate_norm:.0f}"],
        ["single append, durability=full (fsync per commit)", f"{n_full:,}", f"{s_full:.2f}",
         f"{rate_full:,.0f}", f"{1e6 / rate_full:.0f}"],
    ]
    for n, s in marks:
        rows.append([f"append_many, batches of {BATCH:,} (first {n:,})", f"{n:,}", f"{s:.2f}",
                     f"{n / s:,.0f}", f"{1e6 * s / n:.1f}"])
    print(table(["appends", "events", "seconds", "events/s", "us/event"], rows))
    print()
    print(table(
        ["space (coding mix)", "bytes", "per event"],
        [
            [f"database after {n_b:,} events, checkpointed (file + -wal)", f"{size:,}", f"{per_event:,.0f} B"],
            ["average JSON payload of an event", "", f"{payload:,.0f} B"],
            ["row, index and page overhead", "", f"{per_event - payload:,.0f} B"],
        ],
    ))
    if by_object:
        print()
        print(table(["largest tables and indexes", "bytes", "per event", "cells", "unused"], by_object))
    print()
    print(f"time: encoding an event into its row (pydantic JSON dump + columns) takes "
          f"{encode_cost(events[:20_000]):.1f} us; the rest of each append is SQLite and its I/O.")
    print()
    print("OpenHands SDK 1.58, measured on the same machine kind (DESIGN.md; not measured in this run): "
          f"~{SDK_APPEND:,} events/s append, {SDK_BYTES / 1000:.1f} KB of disk per event.")
    print(f"this run vs SDK: single appends {rate_norm / SDK_APPEND:.1f}x faster, "
          f"batched {rate_batch / SDK_APPEND:.0f}x faster, {SDK_BYTES / per_event:.1f}x less disk per event.")
    print()
    checks = [
        (f"single appends (normal) >= {TARGET_SINGLE:,}/s", rate_norm >= TARGET_SINGLE, f"{rate_norm:,.0f}/s"),
        (f"batched appends >= {TARGET_BATCHED:,}/s", rate_batch >= TARGET_BATCHED, f"{rate_batch:,.0f}/s"),
        (f"disk per event <= {TARGET_BYTES / 1000:.1f} KB", per_event <= TARGET_BYTES,
         f"{per_event / 1000:.2f} KB"),
    ]
    print(table(["target", "measured", "result"],
                [[name, got, "PASS" if ok else "FAIL"] for name, ok, got in checks]))
    if args.profile:
        for title, p in (("single appends (durability=normal)", prof), ("batched appends", prof_batch)):
            print()
            print(f"profile of the {title}, by own time:")
            pstats.Stats(p).sort_stats("tottime").print_stats(12)
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
