"""How fast events go in, onto histories of each size, and how much disk they take.

    python bench/append.py [--workload own|sdk|both] [--sizes 10000,100000,1000000]
                           [--single 4096] [--batched 20000]

For each workload and size, on a copy of the cached database (bench/common.py):
  * single appends: ``conv.append`` of the workload's next steps (action, observation), one
    event per transaction, with the default durability ("normal": WAL, synchronous=NORMAL)
    and with "full" (an fsync per commit, a quarter as many); ``--single`` events, their
    overall rate (whole multiples of the search index's ``FLUSH_AT``, so its flushes count);
  * batched appends: ``append_many`` in batches of 1,000, ``--batched`` events, median batch;
and, on the cached database itself (as built: append_many of the whole history):
  * disk per event: the file plus its -wal, divided by the events; the events' mean JSON;
  * bytes per event of each table and index (SQLite's dbstat), and the condensation
    bookkeeping: every table that is not the events, conversations, the LLM-call ledger or
    alembic's, with its indexes (so a table the core adds is counted without a change here).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    say,
    CONVERSATION,
    Figure,
    Session,
    Workload,
    add_arguments,
    build_info,
    database,
    disk_bytes,
    human,
    median,
    print_figures,
    work_copy,
)
from bench.report import table  # noqa: E402
from openhands_memory.conversation import EventStore
from openhands_memory.storage.search import FLUSH_AT  # noqa: E402

TARGET_SINGLE = 5_000  # events/s (the project's design target)
TARGET_BATCHED = 50_000  # events/s (the project's design target)
TARGET_DISK = 2_100  # bytes/event (issue 9, SDK workload)
TARGET_BOOKKEEPING = 64  # bytes/event (issue 9)
BATCH = 1_000
# Tables that are not condensation bookkeeping; everything else (and its indexes) is.
NOT_BOOKKEEPING = {"event", "conversation", "llm_call", "alembic_version", "sqlite_schema", "sqlite_master",
                   "sqlite_sequence", "sqlite_stat1", "sqlite_stat4"}


def is_search(table: str) -> bool:
    """The full-text index's tables (revision 0008, storage/search.py): their own figure."""
    return table.startswith(("event_words", "event_grams", "search_pending"))


def next_events(wl: Workload, seed: int, count: int) -> list:
    out: list = []
    pairs = wl.pairs(seed)
    while len(out) < count:
        out.extend(next(pairs))
    return out[:count]


def single_rate(path: Path, events: list, durability: str) -> float | None:
    """Events over the time of all their appends: the search index takes in a conversation's events every
    ``FLUSH_AT`` events, so a rate over whole multiples of it counts that work, where a
    median of short slices would leave it out."""
    with EventStore(path, create=False, durability=durability) as store:
        conv = store.conversation(CONVERSATION)
        t0 = time.perf_counter()
        for e in events:
            conv.append(e)
        return len(events) / (time.perf_counter() - t0)


def batched_rate(path: Path, events: list) -> float | None:
    rates = []
    with EventStore(path, create=False) as store:
        conv = store.conversation(CONVERSATION)
        for i in range(0, len(events), BATCH):
            part = events[i : i + BATCH]
            t0 = time.perf_counter()
            conv.append_many(part)
            rates.append(len(part) / (time.perf_counter() - t0))
    return median(rates)


def space(path: Path) -> dict[str, tuple[str, int]] | None:
    """{object name: (its table, bytes)} from dbstat, or None where dbstat is missing."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        owner = {name: tbl for name, tbl in db.execute("SELECT name, tbl_name FROM sqlite_schema")}
        rows = db.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
    except sqlite3.Error:
        return None
    finally:
        db.close()
    return {name: (owner.get(name, name), size) for name, size in rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(ap, repeats=5)
    ap.add_argument("--single", type=int, default=4 * FLUSH_AT,
                    help=f"single appends (default {4 * FLUSH_AT:,}: whole flushes of the search index)")
    ap.add_argument("--batched", type=int, default=20_000, help="events appended in batches of 1,000 (default 20,000)")
    args = ap.parse_args()
    s = Session("openhands-memory append and disk bench", args,
                [f"appends go onto a copy of each history: {args.single:,} single appends (full durability: "
                 f"{args.single // 4:,}), their overall rate; {args.batched:,} batched in 1,000s, the median"])
    ok = True
    for wl in s.workloads:
        f = {
            "single": Figure("single appends/s, normal", "{:,.0f}", TARGET_SINGLE, at_most=False),
            "full": Figure("single appends/s, fsync (full)", "{:,.0f}"),
            "batched": Figure("append_many events/s", "{:,.0f}", TARGET_BATCHED, at_most=False),
            "disk": Figure("disk per event, B", "{:,.0f}", TARGET_DISK),
            "json": Figure("mean event JSON, B", "{:,.0f}"),
            "book": Figure("condensation bookkeeping, B/ev", "{:.1f}", TARGET_BOOKKEEPING),
            "search": Figure("search index (recall), B/ev", "{:,.0f}"),
            "mb": Figure("database file, MB", "{:,.0f}"),
        }
        objects: dict[str, dict[int, float]] = {}
        tables: dict[str, str] = {}
        for n in s.sizes:
            path = database(args.dir, wl, n, args.seed)
            single = next_events(wl, args.seed + 7, args.single)
            full = next_events(wl, args.seed + 8, max(args.single // 4, args.repeats))
            batched = next_events(wl, args.seed + 9, args.batched)
            with work_copy(args.dir, path, "append") as copy:
                f["single"].values[n] = single_rate(copy, single, "normal")
                f["full"].values[n] = single_rate(copy, full, "full")
                f["batched"].values[n] = batched_rate(copy, batched)
            size = disk_bytes(path)
            f["disk"].values[n] = size / n
            f["mb"].values[n] = size / 1e6
            info = build_info(args.dir, wl, n, args.seed)
            f["json"].values[n] = info["json_bytes"] / n if "json_bytes" in info else None
            by_object = space(path)
            if by_object is None:
                f["book"].values[n] = None
                continue
            book = index = 0
            for name, (tbl, nbytes) in by_object.items():
                objects.setdefault(name, {})[n] = nbytes / n
                tables[name] = tbl
                if is_search(tbl):
                    index += nbytes
                elif tbl not in NOT_BOOKKEEPING:
                    book += nbytes
            f["book"].values[n] = book / n
            f["search"].values[n] = index / n
            say(f"{wl.name} {human(n)}: {f['single'].cell(n)} single/s, {f['batched'].cell(n)} batched/s, "
                f"{size / n:,.0f} B/event, bookkeeping {book / n:.1f} B/event", "  ")
        if wl.name == "own":  # issue 9's disk target is for the SDK shape
            f["disk"].target = None
        print()
        print_figures(f"{wl.name} workload", s.sizes, list(f.values()))
        ok = ok and all(x.verdict() != "FAIL" for x in f.values())
        if objects:
            rows = []
            for name in sorted(objects, key=lambda k: -max(objects[k].values())):
                mark = " s" if is_search(tables[name]) else "" if tables[name] in NOT_BOOKKEEPING else " *"
                label = name if tables[name] == name else f"{name} ({tables[name]})"
                rows.append([label + mark, *(f"{objects[name][n]:,.1f}" if n in objects[name] else "" for n in s.sizes)])
            print(table([f"{wl.name}: bytes/event (dbstat)", *(human(n) for n in s.sizes)], rows))
            print("(* condensation bookkeeping; s the search index)")
            print()
    say("OpenHands SDK 1.58 (DESIGN.md, same machine kind; not measured here): ~900 events/s append, "
          "4.2 KB of disk per event.")
    s.end()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
