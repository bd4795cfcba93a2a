"""Every bench table, one after another, on the same workloads and sizes.

    python bench/run_all.py [--workload own|sdk|both] [--sizes 10000,100000,1000000]
                            [--dir DIR] [--seed S] [--thinking] [--only append,view,...]

Runs bench/append.py, view.py, step.py, import.py and cli.py, each in its own process (so
that one bench's memory and caches do not colour the next), with the arguments given here
passed through and each bench's own defaults otherwise; their output is printed as it comes,
ready to paste. The databases are built once, by whichever bench needs them first, and
cached under --dir. Exit status: 0 when every target passed, else 1.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = ["append", "view", "step", "import", "cli"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", choices=("own", "sdk", "both"), default="both")
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--seed", default=None)
    ap.add_argument("--thinking", action="store_true")
    ap.add_argument("--only", default=",".join(BENCHES), help="comma-separated subset of " + ", ".join(BENCHES))
    args = ap.parse_args()
    chosen = [b for b in args.only.split(",") if b]
    unknown = set(chosen) - set(BENCHES)
    if unknown:
        ap.error(f"unknown bench(es): {', '.join(sorted(unknown))}")
    common = ["--workload", args.workload, "--sizes", args.sizes]
    if args.dir:
        common += ["--dir", args.dir]
    if args.seed is not None:
        common += ["--seed", args.seed]
    if args.thinking:
        common.append("--thinking")
    failed = []
    started = time.perf_counter()
    for name in chosen:
        argv = [sys.executable, str(HERE / f"{name}.py"), *common]
        print("=" * 80)
        print("$ python bench/" + " ".join([f"{name}.py", *common]))
        print("=" * 80, flush=True)
        if subprocess.run(argv).returncode != 0:
            failed.append(name)
        print(flush=True)
    print(f"all benches: {time.perf_counter() - started:.0f} s; "
          + (f"targets missed in: {', '.join(failed)}" if failed else "every target passed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
