"""Start-up of every command: what the command line costs before it does any work.

    PYTHONPATH=. python bench/startup.py [--repeats 7] [--dir DIR] [--no-demo]

Each row is a whole process (``python -m openhands_memory.cli ...``, this worktree's
package) run through bench/common.py's launcher, its output sent to /dev/null; the figure is
the median wall time of ``--repeats`` runs. The rows run interleaved, one run of each per
round, so that the machine's load (two cores shared with whatever else runs) falls on all of
them alike. The yardstick is ``python -c "import click, pydantic"``: the interpreter and the
two libraries every command is built on.

Rows and targets (issue 38):
  * ``import openhands_memory``, ``--version``, ``--help`` and every command's ``--help``:
    at most 1.5 x the yardstick;
  * on the demo database (``openhands-memory demo``, built once under ``--dir``): ``view``,
    ``replay``, ``replay --model gpt-4o`` (tokens by gpt-4o's tokenizer, priced as gpt-4o):
    at most 3 x the replay without ``--model``; and ``condense`` with a model-summarizing
    condenser whose server is not listening (a closed port on 127.0.0.1), which fails
    (exit status 1, ``connection_error``): at most 3 x ``view``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import DEFAULT_DIR, LAUNCHER, child_env, cli, load, machine, say  # noqa: E402
from bench.report import table  # noqa: E402
from openhands_memory.cli import COMMANDS  # noqa: E402

HELP_TARGET = 1.5  # x the yardstick
MODEL_TARGET = 3.0  # replay --model, x the replay without
REFUSED_TARGET = 3.0  # condense to a server not listening, x view
YARDSTICK = "import click, pydantic"


def run_once(argv: list[str], timeout: float) -> tuple[float, int, str]:
    """(wall s, exit status, the end of its stderr) of one run of ``argv`` through the launcher."""
    fd, out = tempfile.mkstemp(prefix="ohm-startup-", suffix=".json")
    os.close(fd)
    try:
        done = subprocess.run([sys.executable, "-c", LAUNCHER, out, str(timeout), *argv],
                              env={**os.environ, **child_env(), "OHM_BENCH_QUIET": "1"},
                              stderr=subprocess.PIPE, text=True, check=False)
        result = json.loads(Path(out).read_text())
    finally:
        Path(out).unlink(missing_ok=True)
    return result["wall"], -1 if result["timed_out"] else result["status"], done.stderr[-400:]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def demo_rows(folder: Path) -> list[tuple[str, list[str], int]]:
    """(label, argv, expected exit status) of the rows on the demo database."""
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "demo.db"
    if not db.exists():
        say(f"building {db} (openhands-memory demo)...")
        subprocess.run(cli("demo", str(db), "--json"), env={**os.environ, **child_env()}, check=True,
                       stdout=subprocess.DEVNULL)
    config = folder / "refused.toml"
    config.write_text(f"""\
[condenser]
type = "llm"
llm_config = "summarizer"
max_size = 20
keep_first = 2

[llm.summarizer]
model = "openai/test-model"
api_base = "http://127.0.0.1:{closed_port()}/v1"
api_key = "sk-test"
timeout = 10
num_retries = 1
retry_min_wait = 0.01
retry_max_wait = 0.05
""")
    return [
        ("view DEMO demo", cli("view", str(db), "demo"), 0),
        ("replay DEMO demo", cli("replay", str(db), "demo"), 0),
        ("replay DEMO demo --model gpt-4o", cli("replay", str(db), "demo", "--model", "gpt-4o"), 0),
        # A dry run that asks the model for its summary: the file is only read, so every run
        # starts from the same one.
        ("condense, server not listening",
         cli("condense", str(db), "demo", "--config", str(config), "--dry-run", "--with-summary"), 1),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=7, help="runs per row, median reported (default: 7)")
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"the demo database's folder (default: {DEFAULT_DIR})")
    ap.add_argument("--no-demo", action="store_true", help="only the start-up rows, not the demo database's")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds before a run is abandoned")
    args = ap.parse_args()

    started = time.perf_counter()
    say("openhands-memory start-up bench (whole processes: python -m openhands_memory.cli ...)")
    say(f"machine: {machine()}")
    say(f"load average at start (1/5/15 min): {load()}")
    say(f"repeats: {args.repeats}, interleaved (medians reported); yardstick: python -c \"{YARDSTICK}\"")
    rows: list[tuple[str, list[str], int]] = [
        ("yardstick (click, pydantic)", [sys.executable, "-c", YARDSTICK], 0),
        ("python -c pass", [sys.executable, "-c", "pass"], 0),
        ("import openhands_memory", [sys.executable, "-c", "import openhands_memory"], 0),
        ("--version", cli("--version"), 0),
        ("--help", cli("--help"), 0),
        *[(f"{name} --help", cli(name, "--help"), 0) for name in COMMANDS],
    ]
    if not args.no_demo:
        rows += demo_rows(args.dir / "startup")
    print(flush=True)

    walls: dict[str, list[float]] = {label: [] for label, _, _ in rows}
    for k in range(args.repeats):
        for label, argv, expected in rows:
            wall, status, stderr = run_once(argv, args.timeout)
            if status != expected:
                raise SystemExit(f"{label}: exit status {status}, expected {expected}: {stderr.strip()}")
            walls[label].append(wall)
        say(f"round {k + 1} of {args.repeats} done (load {load()})", "  ")

    ms = {label: statistics.median(values) * 1000 for label, values in walls.items()}
    base = ms[rows[0][0]]
    verdicts: list[bool] = []
    table_rows = []
    for label, _, _ in rows:
        target, against, what = None, base, ""
        if label == "import openhands_memory" or label.startswith("--") or label.endswith(" --help"):
            target, what = HELP_TARGET, "yardstick"
        elif label.startswith("replay DEMO demo --model"):
            target, against, what = MODEL_TARGET, ms["replay DEMO demo"], "replay"
        elif label.startswith("condense, server"):
            target, against, what = REFUSED_TARGET, ms["view DEMO demo"], "view"
        ratio = ms[label] / base
        cells = [label, f"{ms[label]:,.0f}", f"{ratio:.2f}"]
        if target is None:
            cells += ["", ""]
        else:
            ok = ms[label] <= target * against
            verdicts.append(ok)
            cells += [f"≤ {target:g} × {what}", "PASS" if ok else "FAIL"]
        table_rows.append(cells)
    print()
    print(table(["command", "wall ms", "× yardstick", "target", "result"], table_rows))
    print()
    say(f"load average at end (1/5/15 min): {load()}; this bench took {time.perf_counter() - started:.0f} s")
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
