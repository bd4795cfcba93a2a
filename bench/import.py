"""Import rate of a 100k-event OpenHands SDK conversation folder, through the code path of the
``import`` command (``openhands_memory.io.importer.import_path``).

    python bench/import.py                 # 100,000 events, 3 runs
    python bench/import.py --events 20000 --runs 1

The folder is generated once into a cache folder (``$XDG_CACHE_HOME`` or ``~/.cache``,
``openhands-memory/bench``) from ``bench/workload.py``'s realistic coding-agent events, written
as the SDK writes them: ``events/event-NNNNN-<uuid>.json`` (``model_dump_json(exclude_none)``),
``base_state.json``, and Condensations carrying ``forgotten_event_ids`` (the events each one
newly forgets) rather than our id ranges. Each run imports it into a new database file in a
temporary folder and reports events per second, wall clock, including reading and parsing
every file and writing every row in one transaction. The target is 20,000 events/s on the
median run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workload import coding_events  # noqa: E402
from openhands_memory.events import Condensation  # noqa: E402

TARGET = 20_000


def cache_root() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "openhands-memory" / "bench"


def make_folder(folder: Path, n: int, seed: int = 0, condense_every: int = 2_000) -> None:
    """Write ``n`` events as an SDK conversation folder (once; later runs reuse it)."""
    if (folder / ".complete").exists():
        return
    shutil.rmtree(folder, ignore_errors=True)
    events_dir = folder / "events"
    events_dir.mkdir(parents=True)
    uids: list[str] = []
    forgotten: set[int] = set()
    started = time.perf_counter()
    for index, event in enumerate(coding_events(n, seed=seed, condense_every=condense_every)):
        data = event.to_json_dict()
        data["kind"] = data.pop("kind")  # the SDK's serializer writes the discriminator last
        if isinstance(event, Condensation):
            # The SDK lists the ids a condensation forgets; only the ones not already gone.
            newly = [i for s, e in event.forgotten_ranges or [] for i in range(s, e + 1) if i not in forgotten]
            forgotten.update(newly)
            data.pop("forgotten_ranges", None)
            data["forgotten_event_ids"] = [uids[i] for i in newly]
        uids.append(event.id)
        (events_dir / f"event-{index:05d}-{event.id}.json").write_text(
            json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8"
        )
    (events_dir / f".eventlog-len-{n}.marker").touch()
    (events_dir / ".eventlog.lock").touch()
    (folder / "base_state.json").write_text(json.dumps({"id": f"bench-{n}", "execution_status": "finished"}))
    (folder / ".complete").touch()
    print(f"generated {n:,} event files in {folder} ({time.perf_counter() - started:.1f} s)")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ""
    if hasattr(os, "getloadavg"):
        load = f", load {os.getloadavg()[0]:.2f}"
    return (f"{cpu}, {os.cpu_count()} CPUs{load}; {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()}; SQLite {sqlite3.sqlite_version}")


def run_once(folder: Path) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of this process, events) of one import."""
    from openhands_memory.io.importer import import_path
    from openhands_memory.store import EventStore

    with tempfile.TemporaryDirectory() as tmp:
        store = EventStore(Path(tmp) / "bench.db")
        try:
            started, cpu = time.perf_counter(), time.process_time()
            result = import_path(store, folder)
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        finally:
            store.close()
    return elapsed, cpu, result.events


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="profile one run with cProfile")
    args = parser.parse_args()
    folder = cache_root() / f"sdk-folder-v2-{args.events}"
    make_folder(folder, args.events)
    print(f"machine: {machine()}")
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.runcall(run_once, folder)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
        return 0
    rates, cpu_rates = [], []
    for i in range(args.runs):
        elapsed, cpu, n = run_once(folder)
        rates.append(n / elapsed)
        cpu_rates.append(n / cpu)
        print(f"run {i + 1}: {n:,} events in {elapsed:.2f} s = {n / elapsed:,.0f} events/s "
              f"({cpu:.2f} CPU-s: {n / cpu:,.0f} events per CPU-second)")
    median = statistics.median(rates)
    verdict = "PASS" if median >= TARGET else "FAIL"
    print(f"import: median {median:,.0f} events/s, best {max(rates):,.0f}, "
          f"{statistics.median(cpu_rates):,.0f} per CPU-second (target {TARGET:,} events/s): {verdict}")
    if hasattr(os, "getloadavg") and os.getloadavg()[0] > 0.5 * (os.cpu_count() or 1):
        print("note: other processes were busy on this machine; wall-clock rates understate the import")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
