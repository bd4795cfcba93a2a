"""The command line as a whole process: start-up, ``view`` and friends, on each history.

    python bench/cli.py [--workload own|sdk|both] [--sizes 10000,100000,1000000] [--repeats 5]
                        [--timeout 120]

Each command runs as ``python -m openhands_memory.cli ...`` (this worktree's package) through
a small launcher that reports the process's wall time, CPU time (user + system) and peak RSS
(``os.wait4``); output goes to /dev/null. Medians over ``--repeats`` runs, on the cached
databases (bench/common.py), which these commands only read:
  * ``--help``: the interpreter and the click app starting, nothing else;
  * ``view DB CONV`` (the table), ``view --format messages``;
  * ``conversations DB``, ``stats DB CONV``, ``history DB CONV --from N-50``: commands that
    summarise or page through a history; a run past ``--timeout`` seconds is shown as "-".
Targets (issue 9): ``view`` <= 0.3 s wall; its peak RSS <= 60 MB.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    say,
    CONVERSATION,
    Figure,
    Session,
    add_arguments,
    child_env,
    cli,
    database,
    human,
    measure_process,
    median,
    print_figures,
)

TARGET_VIEW_S = 0.3
TARGET_PEAK_MB = 60.0


def commands(db: str, n: int) -> list[tuple[str, list[str]]]:
    return [
        ("--help", ["--help"]),
        ("view", ["view", db, CONVERSATION]),
        ("view --format messages", ["view", db, CONVERSATION, "--format", "messages"]),
        ("conversations", ["conversations", db]),
        ("stats CONV", ["stats", db, CONVERSATION]),
        ("history --from N-50", ["history", db, CONVERSATION, "--from", str(max(0, n - 50))]),
    ]


def run(argv: list[str], repeats: int, timeout: float) -> dict:
    walls, cpus, peaks = [], [], []
    env = child_env()
    for _ in range(repeats):
        r, _ = measure_process(cli(*argv), timeout=timeout, env=env)
        if r["timed_out"]:
            return {"wall": None, "cpu": None, "peak": None}
        walls.append(r["wall"])
        cpus.append(r["cpu"])
        peaks.append(r["maxrss_mb"])
    return {"wall": median(walls), "cpu": median(cpus), "peak": max(peaks)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(ap, repeats=5)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds before a command run is abandoned")
    args = ap.parse_args()
    s = Session("openhands-memory command-line bench (whole processes: python -m openhands_memory.cli ...)", args,
                [f"wall and CPU: medians; peak RSS: the largest of the runs; timeout {args.timeout:.0f} s"])
    ok = True
    for wl in s.workloads:
        walls: dict[str, Figure] = {}
        others: list[Figure] = []
        view_cpu = Figure("view: CPU s", "{:.3f}")
        view_peak = Figure("view: peak RSS, MB", "{:.0f}", TARGET_PEAK_MB)
        messages_peak = Figure("view --format messages: peak MB", "{:.0f}", TARGET_PEAK_MB)
        help_peak = Figure("--help: peak RSS, MB", "{:.0f}")
        for n in s.sizes:
            db = str(database(args.dir, wl, n, args.seed))
            for name, argv in commands(db, n):
                r = run(argv, args.repeats, args.timeout)
                target = TARGET_VIEW_S if name == "view" else None
                fig = walls.setdefault(name, Figure(f"{name}: wall s", "{:.3f}", target))
                fig.values[n] = r["wall"]
                if name == "view":
                    view_cpu.values[n] = r["cpu"]
                    view_peak.values[n] = r["peak"]
                elif name == "view --format messages":
                    messages_peak.values[n] = r["peak"]
                elif name == "--help":
                    help_peak.values[n] = r["peak"]
                shown = "timed out" if r["wall"] is None else f"{r['wall']:.3f} s, {r['peak']:.0f} MB"
                say(f"{wl.name} {human(n)} {name}: {shown}", "  ")
        others = [view_cpu, view_peak, messages_peak, help_peak]
        figures = [walls["--help"], walls["view"], *others[:1], *[walls[k] for k in walls if k not in ("--help", "view")],
                   *others[1:]]
        print()
        print_figures(f"{wl.name} workload", s.sizes, figures)
        ok = ok and all(x.verdict() != "FAIL" for x in figures)
    s.end()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
