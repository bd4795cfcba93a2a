"""What every bench shares: arguments, the machine and load lines, the two workloads, the
databases built once and cached, working copies, timing, and the figure tables with targets.

Workloads (``--workload own|sdk|both``):
  own  bench/workload.py ``coding_events(n, seed, condense_every=64)``: the project's coding
       mix (1-3 parallel calls, file views and edits, browser pages, errors), a summarizing
       Condensation every ~64 events that forgets id ranges;
  sdk  bench/sdk_workload.py ``sdk_events(n, seed)``: the OpenHands SDK's shape (terminal
       calls, 10 % parallel batches, Condensations of the SDK's LLMSummarizingCondenser(120, 4)
       listing forgotten SDK ids); ``--thinking`` uses its thinking variant (``sdk-thinking``).

Databases: one file per (workload, size, seed) under ``<dir>/db`` (default dir:
``<tmp>/ohm-bench``), built once with ``append_many`` in chunks of 5,000 and kept; a rerun
opens it at once. A build leaves ``<name>.build.json`` beside it (seconds, events/s, JSON
bytes). A file that does not open (say, an older schema after the library changed) is built
again. Benches that write work on a copy under ``<dir>/work`` that is deleted afterwards.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# The benches measure a process set up for long views as the command line sets itself up: it
# lets the library pause the cyclic collector while it builds a view. The library's default
# (the collector left alone) is measured beside it by bench/collector.py, whose children
# choose for themselves.
from openhands_memory.allocation import allow_collector_pauses  # noqa: E402

allow_collector_pauses()

from bench.report import table  # noqa: E402
from openhands_memory.events import (  # noqa: E402
    ActionEvent,
    Event,
    MessageToolCall,
    ObservationEvent,
    TextContent,
)
from openhands_memory.conversation import EventStore  # noqa: E402

CONVERSATION = "bench"
DEFAULT_SIZES = "10000,100000,1000000"
DEFAULT_DIR = Path(tempfile.gettempdir()) / "ohm-bench"
CHUNK = 5_000
OWN_CONDENSE_EVERY = 64


# --- workloads -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    name: str  # own, sdk, sdk-thinking
    title: str
    version: str  # part of the cached files' names: bump when the generator changes
    make: Callable[[int, int], Iterator[Event]]
    make_pairs: Callable[[int], Iterator[list[Event]]]

    def events(self, n: int, seed: int) -> Iterator[Event]:
        return self.make(n, seed)

    def pairs(self, seed: int) -> Iterator[list[Event]]:
        """Endless [action, observation] steps to append to a built history."""
        return self.make_pairs(seed)

    def key(self, n: int, seed: int) -> str:
        return f"{self.name}-{self.version}-{n}-s{seed}"


def _own_events(n: int, seed: int) -> Iterator[Event]:
    from bench.workload import coding_events

    return coding_events(n, seed=seed, condense_every=OWN_CONDENSE_EVERY)


def _own_pairs(seed: int) -> Iterator[list[Event]]:
    """The small terminal step the project's benches have always appended."""
    k = 0
    while True:
        call = f"bench_call_{seed}_{k}"
        action = ActionEvent(
            thought=[TextContent(text="Let me run the tests again.")],
            action={"kind": "TerminalAction", "command": "python -m pytest -x -q", "is_input": False},
            tool_name="terminal",
            tool_call_id=call,
            tool_call=MessageToolCall(id=call, name="terminal", arguments='{"command": "python -m pytest -x -q"}'),
            llm_response_id=f"bench-resp-{call}",
        )
        obs = ObservationEvent(
            tool_name="terminal",
            tool_call_id=call,
            observation={"kind": "TerminalObservation",
                         "content": [{"type": "text", "text": "........ 8 passed in 0.31s"}], "exit_code": 0},
            action_id=action.id,
        )
        k += 1
        yield [action, obs]


def _sdk(thinking: bool) -> Workload:
    from bench import sdk_workload

    return Workload(
        "sdk-thinking" if thinking else "sdk",
        "bench/sdk_workload.py sdk_events(n, seed"
        + (", thinking=True" if thinking else "")
        + "): the SDK's shape, Condensations of LLMSummarizingCondenser(120, 4)",
        "v1",
        lambda n, seed: sdk_workload.sdk_events(n, seed=seed, thinking=thinking),
        lambda seed: sdk_workload.step_pairs(seed, thinking=thinking),
    )


OWN = Workload(
    "own",
    f"bench/workload.py coding_events(n, seed, condense_every={OWN_CONDENSE_EVERY}): the project's coding mix",
    "v1",
    _own_events,
    _own_pairs,
)


def workloads(choice: str, thinking: bool = False) -> list[Workload]:
    sdk = _sdk(thinking)
    return {"own": [OWN], "sdk": [sdk], "both": [OWN, sdk]}[choice]


# --- arguments, machine, load ------------------------------------------------------------


def parse_size(text: str) -> int:
    text = text.strip().lower().replace("_", "")
    scale = 1
    if text.endswith("k"):
        text, scale = text[:-1], 1_000
    elif text.endswith("m"):
        text, scale = text[:-1], 1_000_000
    return int(float(text) * scale)


def add_arguments(ap: argparse.ArgumentParser, repeats: int) -> None:
    ap.add_argument("--workload", choices=("own", "sdk", "both"), default="both",
                    help="which event mix (default: both)")
    ap.add_argument("--sizes", default=DEFAULT_SIZES,
                    help=f"comma-separated event counts; 10k and 1M work too (default: {DEFAULT_SIZES})")
    ap.add_argument("--repeats", type=int, default=repeats, help=f"runs per figure, median reported (default: {repeats})")
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"cached databases and copies (default: {DEFAULT_DIR})")
    ap.add_argument("--seed", type=int, default=0, help="workload seed (default: 0)")
    ap.add_argument("--thinking", action="store_true", help="the sdk workload's thinking variant")


def sizes_of(args: argparse.Namespace) -> list[int]:
    return sorted({parse_size(s) for s in args.sizes.split(",") if s.strip()})


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> str:
    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    return (f"{cpu_model()}, {cores} cores ({usable} usable); {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()}; SQLite {sqlite3.sqlite_version}")


def load() -> str:
    if not hasattr(os, "getloadavg"):
        return "n/a"
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def say(text: str, indent: str = "") -> None:
    """Print a line wrapped to the tables' 80 columns (continuations indented)."""
    print(textwrap.fill(text, 80, initial_indent=indent, subsequent_indent=indent + "    ",
                        break_on_hyphens=False, break_long_words=False), flush=True)


class Session:
    """The lines every bench prints before and after its tables."""

    def __init__(self, title: str, args: argparse.Namespace, notes: list[str] = ()):
        self.args = args
        self.workloads = workloads(args.workload, args.thinking)
        self.sizes = sizes_of(args)
        self.started = time.perf_counter()
        say(title)
        say(f"machine: {machine()}")
        say(f"load average at start (1/5/15 min): {load()}")
        say(f"sizes: {', '.join(human(n) for n in self.sizes)}; repeats: {args.repeats} "
            f"(medians reported); seed {args.seed}; files under {args.dir}")
        for w in self.workloads:
            say(f"workload {w.name}: {w.title}")
        for note in notes:
            say(note)
        print(flush=True)

    def end(self) -> None:
        print()
        say(f"load average at end (1/5/15 min): {load()}; "
            f"this bench took {time.perf_counter() - self.started:.0f} s")


def human(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


# --- databases -----------------------------------------------------------------------------


def remove_db(path: Path) -> None:
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        p.unlink(missing_ok=True)


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def complete(location: str | Path, n: int, name: str) -> bool:
    """Whether the cached history at ``location`` (a file or a URL) opens with its ``n``
    events. One built before a new schema revision is upgraded in place (alembic), not built
    again; one that does not open at all is said and built again."""
    from openhands_memory.errors import SchemaTooOld
    from openhands_memory.location import Location
    from openhands_memory.migrate import HEAD, apply

    try:
        try:
            with EventStore(location, create=False) as store:
                return len(store.conversation(CONVERSATION)) == n
        except SchemaTooOld:
            print(f"  upgrading {name} to revision {HEAD}", flush=True)
            apply(Location.parse(location), HEAD)
            with EventStore(location, create=False) as store:
                return len(store.conversation(CONVERSATION)) == n
    except Exception as e:  # noqa: BLE001  (an unknown schema, a half-written file, ...)
        print(f"  {name} does not open as a complete database ({type(e).__name__}: {e}); building it again",
              flush=True)
        return False


def database(work: Path, wl: Workload, n: int, seed: int) -> Path:
    """The cached database of ``n`` events of ``wl``: built unless a complete one is there."""
    folder = work / "db"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{wl.key(n, seed)}.db"
    with _locked(folder / f"{wl.key(n, seed)}.lock"):
        if path.exists() and complete(path, n, path.name):
            return path
        remove_db(path)
        partial = folder / f"{wl.key(n, seed)}.partial.db"
        remove_db(partial)
        print(f"  building {path.name} ({n:,} events)...", end="", flush=True)
        wall, cpu = time.perf_counter(), time.process_time()
        json_bytes = 0
        with EventStore(partial) as store:
            conv = store.create_conversation(CONVERSATION, metadata={"workload": wl.name, "n": n, "seed": seed})
            chunk: list[Event] = []
            for e in wl.events(n, seed):
                chunk.append(e)
                if len(chunk) == CHUNK:
                    json_bytes += sum(len(x.to_json().encode()) for x in chunk)
                    conv.append_many(chunk)
                    chunk = []
            if chunk:
                json_bytes += sum(len(x.to_json().encode()) for x in chunk)
                conv.append_many(chunk)
            assert len(conv) == n, (len(conv), n)
            store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        remove_db(path)
        os.replace(partial, path)
        remove_db(partial)
        info = {"events": n, "seconds": wall, "cpu_seconds": cpu, "events_per_s": n / wall,
                "json_bytes": json_bytes, "built_at": time.strftime("%Y-%m-%d %H:%M:%S")}
        (folder / f"{wl.key(n, seed)}.build.json").write_text(json.dumps(info))
        print(f" {wall:.1f} s ({n / wall:,.0f} events/s, generation included)", flush=True)
    return path


def build_info(work: Path, wl: Workload, n: int, seed: int) -> dict[str, Any]:
    p = work / "db" / f"{wl.key(n, seed)}.build.json"
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return {}


@contextmanager
def work_copy(work: Path, src: Path, tag: str = "copy") -> Iterator[Path]:
    """A private copy of a cached database, deleted afterwards."""
    folder = work / "work"
    folder.mkdir(parents=True, exist_ok=True)
    dst = folder / f"{src.stem}.{tag}.{os.getpid()}.db"
    remove_db(dst)
    try:
        shutil.copyfile(src, dst)
        wal = Path(f"{src}-wal")
        if wal.exists() and wal.stat().st_size:
            shutil.copyfile(wal, Path(f"{dst}-wal"))
        # Written back later, the copy (3.4 GB at 1M) would share the disk and the two cores
        # with what is timed on it (bench/view.py at 1M: 7.9 s of system time, 4.3 s after).
        os.sync()
        yield dst
    finally:
        remove_db(dst)


# --- timing --------------------------------------------------------------------------------


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(wall s, CPU s of this process, result)."""
    w, c = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - w, time.process_time() - c, result


class StatementCounter:
    """Counts the SQL statements a connection runs (``set_trace_callback``) while active."""

    def __init__(self, db: sqlite3.Connection, keep: bool = False):
        self.db, self.keep = db, keep
        self.count = 0
        self.statements: list[str] = []

    def _trace(self, sql: str) -> None:
        self.count += 1
        if self.keep:
            self.statements.append(sql)

    def __enter__(self) -> "StatementCounter":
        self.db.set_trace_callback(self._trace)
        return self

    def __exit__(self, *exc: object) -> None:
        self.db.set_trace_callback(None)


# A process's RSS high-water mark survives exec on Linux, and Python starts children with
# vfork, so a child of a large bench process would report the bench's peak as its own. A
# small launcher in between starts the measured process from a fresh, small address space,
# and reports the child's wall time, CPU time and peak RSS (os.wait4) to a file.
LAUNCHER = """\
import json, os, subprocess, sys, threading, time
out, timeout, argv = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
t0 = time.perf_counter()
p = subprocess.Popen(argv, stdout=subprocess.DEVNULL if os.environ.get("OHM_BENCH_QUIET") else None)
timer = threading.Timer(timeout, p.kill)
timer.start()
_, status, ru = os.wait4(p.pid, 0)
wall = time.perf_counter() - t0
timer.cancel()
p.returncode = os.waitstatus_to_exitcode(status)
with open(out, "w") as f:
    json.dump({"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "maxrss_mb": ru.ru_maxrss / 1024,
               "status": p.returncode, "timed_out": wall >= timeout}, f)
"""


def measure_process(argv: list[str], timeout: float = 300.0, quiet: bool = True,
                    env: dict[str, str] | None = None) -> tuple[dict[str, Any], str]:
    """Run ``argv`` through the launcher: (wall/cpu/maxrss/status, its stdout if not quiet)."""
    fd, out = tempfile.mkstemp(prefix="ohm-bench-", suffix=".json")
    os.close(fd)
    full_env = {**os.environ, **(env or {})}
    if quiet:
        full_env["OHM_BENCH_QUIET"] = "1"
    try:
        proc = subprocess.run([sys.executable, "-c", LAUNCHER, out, str(timeout), *argv],
                              capture_output=True, text=True, env=full_env)
        result = json.loads(Path(out).read_text())
        if result["status"] != 0 and not result["timed_out"]:
            raise RuntimeError(f"{' '.join(argv)} exited with {result['status']}: {proc.stderr[-2000:]}")
        return result, proc.stdout
    finally:
        Path(out).unlink(missing_ok=True)


def cli(*args: str) -> list[str]:
    """argv of the openhands-memory command run from this worktree's package."""
    return [sys.executable, "-m", "openhands_memory.cli", *args]


def child_env() -> dict[str, str]:
    """PYTHONPATH so that children import the same library as this process."""
    root = str(Path(__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": root + (os.pathsep + path if path else "")}


# --- figure tables with targets ------------------------------------------------------------


@dataclass
class Figure:
    """One row of a bench table: a figure at each size, and the target it must meet."""

    label: str
    fmt: str = "{:.2f}"
    target: float | None = None
    at_most: bool = True  # the target is an upper bound (else a lower bound)
    target_text: str | None = None
    values: dict[int, float | None] = field(default_factory=dict)
    missing: str = "-"
    optional: bool = False  # None means "nothing to measure" (shown n/a), not a failure

    def __post_init__(self) -> None:
        if self.optional:
            self.missing = "n/a"

    def cell(self, n: int) -> str:
        if n not in self.values:
            return ""
        v = self.values[n]
        return self.missing if v is None else self.fmt.format(v)

    def verdict(self) -> str:
        if self.target is None:
            return ""
        got = [v for v in self.values.values() if not (v is None and self.optional)]
        if not got:
            return ""
        if any(v is None for v in got):
            return "FAIL"  # timed out, or could not be measured
        ok = all(v <= self.target if self.at_most else v >= self.target for v in got)  # type: ignore[operator]
        return "PASS" if ok else "FAIL"

    def target_cell(self) -> str:
        if self.target_text is not None:
            return self.target_text
        if self.target is None:
            return ""
        t = f"{self.target:,g}"
        return f"≤ {t}" if self.at_most else f"≥ {t}"


def print_figures(title: str, sizes: list[int], figures: list[Figure]) -> None:
    """A table: one row per figure, a column per size, then the target and PASS/FAIL."""
    header = [title, *(human(n) for n in sizes), "target", "result"]
    rows = [[f.label, *(f.cell(n) for n in sizes), f.target_cell(), f.verdict()] for f in figures]
    print(table(header, rows))
    print(flush=True)


def ratio_figure(label: str, source: Figure, sizes: list[int], target: float | None, at_most: bool = True) -> Figure | None:
    """``source`` at the largest size divided by it at the smallest, in the largest's column."""
    if len(sizes) < 2:
        return None
    small, large = sizes[0], sizes[-1]
    a, b = source.values.get(small), source.values.get(large)
    f = Figure(f"{label} {human(large)} ÷ {human(small)}", "{:.2f}", target, at_most)
    f.values = {n: None for n in sizes}
    for n in sizes[:-1]:
        del f.values[n]
    f.values[large] = (b / a) if a and b is not None else None
    return f
