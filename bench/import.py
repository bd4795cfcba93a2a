"""Import rate of ``openhands-memory import``, for an OpenHands SDK conversation folder and for
JSON Lines, at each size, with the search index built during the import (the default) and
without it (``--no-search-index``): does it hold 50,000 events/s, and does it fall as N grows?

    python bench/import.py [--workload own|sdk|both] [--sizes 10000,100000,1000000] [--repeats 3]
                           [--index on,off]

The inputs are written once per (workload, size, seed) under ``<dir>/import`` and kept:
  * an SDK folder as the SDK's EventLog writes it (what ``openhands_memory/io/sdk.py``
    reads): ``events/event-NNNNN-<uuid>.json`` holding ``model_dump_json(exclude_none)`` with
    the ``kind`` key last, the ``.eventlog-len-N.marker`` and ``.eventlog.lock`` files, and
    ``base_state.json``. Condensations carry ``forgotten_event_ids`` (the own workload's
    ranges become the ids of the events they newly forget, as the SDK would list them);
  * a JSONL file: one event's JSON per line, as ``export --file-format jsonl`` writes it.
Before a (workload, size)'s runs its inputs are read once, untimed, so that every run finds
them in the page cache (as an import of a folder an agent has just written does); after them
they are dropped from the cache (``POSIX_FADV_DONTNEED``), so that the later runs find it as
free as the first ones did. Each run is a whole process, ``python -m openhands_memory.cli import DB PATH -c bench
[--no-search-index]`` into a new database file (deleted afterwards), timed by a launcher
(wall, CPU of the process and its children: a large input is parsed in child processes,
``io/parallel.py``). Rates are given for the whole command and net of the command's start
(the median wall of ``python -m openhands_memory.cli import --help``), which is what a large
import amortizes; the target (issue 23: 50,000 events/s at the largest size, at most a 10 %
fall from the smallest size to it) is judged on the net rate without the index. With the index
the rows carry no target: filling its two FTS5 tables costs 60-80 us an event here (the
import with the index against the one without, at 100k), whenever they are built
(``search-index DB on`` after an import without it costs about the same), which caps an
import that builds them near 15,000 events/s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    say,
    CONVERSATION,
    Figure,
    Session,
    Workload,
    add_arguments,
    child_env,
    cli,
    human,
    measure_process,
    median,
    print_figures,
    ratio_figure,
    remove_db,
)
from openhands_memory.events import Condensation  # noqa: E402
from openhands_memory.conversation import EventStore  # noqa: E402

TARGET = 50_000  # events/s without the search index (issue 23)
TARGET_NOT_FALLING = 0.9
INDEX_LABEL = {"off": "no index", "on": "index"}


def _sdk_dict(event, uids: list[str], gone: set[int]) -> dict:
    data = event.to_json_dict()
    if isinstance(event, Condensation) and event.forgotten_ranges:
        # The SDK lists only events that were still in the view: not those already forgotten.
        newly = [i for s, e in event.forgotten_ranges for i in range(s, e + 1) if i not in gone]
        gone.update(newly)
        ids = list(data.get("forgotten_event_ids", [])) + [uids[i] for i in newly]
        data.pop("forgotten_ranges", None)
        data["forgotten_event_ids"] = ids
        data.setdefault("llm_response_id", f"bench-summary-{len(uids)}")
    if isinstance(event, Condensation):
        gone.add(len(uids))  # a Condensation is never in a view, so never listed as forgotten
    data["kind"] = data.pop("kind")  # the SDK's serializer writes the discriminator last
    return data


def inputs(work: Path, wl: Workload, n: int, seed: int) -> tuple[Path, Path]:
    """(SDK folder, JSONL file) of the workload's ``n`` events, written once."""
    root = work / "import"
    folder = root / wl.key(n, seed)
    jsonl = root / f"{wl.key(n, seed)}.jsonl"
    if (folder / ".complete").exists() and jsonl.exists():
        return folder, jsonl
    shutil.rmtree(folder, ignore_errors=True)
    events_dir = folder / "events"
    events_dir.mkdir(parents=True)
    print(f"  writing {n:,} events as an SDK folder and JSONL...", end="", flush=True)
    t0 = time.perf_counter()
    uids: list[str] = []
    gone: set[int] = set()
    partial = jsonl.with_suffix(".partial")
    with open(partial, "w", encoding="utf-8") as lines:
        for index, event in enumerate(wl.events(n, seed)):
            lines.write(event.to_json() + "\n")
            data = _sdk_dict(event, uids, gone)
            uids.append(event.id)
            (events_dir / f"event-{index:05d}-{event.id}.json").write_text(
                json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    partial.replace(jsonl)
    (events_dir / f".eventlog-len-{n}.marker").touch()
    (events_dir / ".eventlog.lock").touch()
    (folder / "base_state.json").write_text(json.dumps({"id": f"bench-{wl.name}-{n}", "execution_status": "finished"}))
    (folder / ".complete").touch()
    print(f" {time.perf_counter() - t0:.0f} s", flush=True)
    return folder, jsonl


def _files(folder: Path, jsonl: Path) -> Iterator[Path]:
    yield jsonl
    with os.scandir(folder / "events") as entries:
        for entry in entries:
            yield Path(entry.path)


def cache(folder: Path, jsonl: Path, keep: bool) -> None:
    """Read an input into the page cache before its runs (``keep``: each run finds it there,
    as an import of what an agent has just written does), or drop it from the cache after
    them: the inputs of every size and workload together (some 12 GB of cache pages at 1M,
    each small file a whole page) would otherwise crowd the runs that come later, which then
    read part of their input from the disk (the SDK workload's folder at 1M took 23 s after
    the own workload's runs, 19.6 s alone)."""
    for path in _files(folder, jsonl):
        fd = os.open(path, os.O_RDONLY)
        try:
            if keep:
                while os.read(fd, 1 << 20):
                    pass
            else:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def import_once(work: Path, source: Path, n: int, index: str = "on") -> dict:
    db = work / "work" / "import-run.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    remove_db(db)
    try:
        flags = ("--no-search-index",) if index == "off" else ()
        result, _ = measure_process(cli("import", str(db), str(source), "--as", CONVERSATION, *flags),
                                    timeout=3600, env=child_env())
        if result["timed_out"]:
            raise RuntimeError(f"import of {source} timed out")
        with EventStore(db, create=False) as store:
            got = len(store.conversation(CONVERSATION))
        if got != n:
            raise RuntimeError(f"import of {source} stored {got} events, not {n}")
        return result
    finally:
        remove_db(db)


def at_largest(label: str, source: Figure, sizes: list[int], target: float) -> Figure:
    """``source`` at the largest size alone, judged against ``target`` (a lower bound)."""
    large = sizes[-1]
    f = Figure(f"{label} {human(large)}", "{:,.0f}", target, at_most=False)
    f.values = {large: source.values.get(large)}
    return f


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(ap, repeats=3)
    ap.add_argument("--index", default="off,on",
                    help="with the search index built during the import (on), without it (off), or both "
                         "(default: off,on)")
    args = ap.parse_args()
    indexes = [i.strip() for i in args.index.split(",") if i.strip()]
    if not indexes or any(i not in INDEX_LABEL for i in indexes):
        ap.error("--index takes on, off or on,off")
    s = Session("openhands-memory import bench (the import command as a whole process)", args)
    env = child_env()
    starts = [measure_process(cli("import", "--help"), env=env)[0]["wall"] for _ in range(max(3, args.repeats))]
    start = median(starts) or 0.0
    say(f"command start (python -m openhands_memory.cli import --help): {start:.3f} s wall, median of {len(starts)}")
    print()
    ok = True
    runs_of = [(kind, label, index) for kind, label in (("sdk", "SDK folder"), ("jsonl", "JSONL")) for index in indexes]
    for wl in s.workloads:
        f: dict[str, Figure] = {}
        for kind, label, index in runs_of:
            key, name = f"{kind}_{index}", f"{label}, {INDEX_LABEL[index]}"
            f[f"{key}_cmd"] = Figure(f"{name}: events/s", "{:,.0f}")
            f[f"{key}_net"] = Figure(f"{name}: events/s net of start", "{:,.0f}", optional=True)
            f[f"{key}_cpu"] = Figure(f"{name}: events per CPU-s", "{:,.0f}")
            f[f"{key}_wall"] = Figure(f"{name}: wall s", "{:.2f}")
        for n in s.sizes:
            folder, jsonl = inputs(args.dir, wl, n, args.seed)
            cache(folder, jsonl, keep=True)
            for kind, _label, index in runs_of:
                source = folder if kind == "sdk" else jsonl
                key = f"{kind}_{index}"
                runs = [import_once(args.dir, source, n, index) for _ in range(args.repeats)]
                wall = median([r["wall"] for r in runs])
                cpu = median([r["cpu"] for r in runs])
                f[f"{key}_cmd"].values[n] = n / wall
                f[f"{key}_net"].values[n] = n / (wall - start) if wall > start else None
                f[f"{key}_cpu"].values[n] = n / cpu
                f[f"{key}_wall"].values[n] = wall
                walls = ", ".join(f"{r['wall']:.2f}" for r in runs)
                say(f"{wl.name} {human(n)} {kind} {INDEX_LABEL[index]}: {wall:.2f} s wall, {n / wall:,.0f} events/s, "
                    f"{n / cpu:,.0f} per CPU-s (runs: {walls} s)", "  ")
            cache(folder, jsonl, keep=False)
        figures = list(f.values())
        for kind, label, index in runs_of:
            if index == "off":  # the target is the rate at the largest size (smaller ones pay the start)
                figures.append(at_largest(f"{label}, {INDEX_LABEL[index]}: net rate at", f[f"{kind}_{index}_net"],
                                          s.sizes, TARGET))
            r = ratio_figure(f"{label}, {INDEX_LABEL[index]}: net rate", f[f"{kind}_{index}_net"], s.sizes,
                             TARGET_NOT_FALLING if index == "off" else None, at_most=False)
            if r is not None:
                figures.append(r)
        print()
        print_figures(f"{wl.name} workload", s.sizes, figures)
        ok = ok and all(x.verdict() != "FAIL" for x in figures)
    s.end()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
