"""What pausing the cyclic collector buys, with and without the process's owner allowing it.

    python bench/collector.py [--sizes 10k] [--repeats 7] [--dir /tmp/ohm-bench]

A library call leaves Python's collector alone unless the process's owner called
``allocation.allow_collector_pauses()`` (the command line does). For each size, on the SDK
workload with its Condensations (a short view) and without them (every event in the view),
each run a fresh process on a copy of the cached history, the two settings interleaved in
every repeat, medians of CPU time (``time.process_time``):
  * open + view + messages: ``EventStore(path)``, ``conv.view()``, ``view.to_messages()``;
  * a step: append an action and its observation (two commits), ``conv.view().to_messages()``
    (20 steps, their mean);
  * rebuild: the cached view dropped, ``conv.view()`` again.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    DEFAULT_DIR,
    child_env,
    database,
    human,
    load,
    machine,
    median,
    parse_size,
    work_copy,
    workloads,
)
from bench.peers import no_condenser  # noqa: E402

CHILD = r"""
import json, sys, time
from openhands_memory import allocation
from openhands_memory.conversation import EventStore
from bench.common import CONVERSATION, workloads
path, allowed = sys.argv[1], sys.argv[2] == "allowed"
allocation.allow_collector_pauses(allowed)
c0 = time.process_time()
store = EventStore(path, create=False)
conv = store.conversation(CONVERSATION)
view = conv.view()
view.to_messages()
c1 = time.process_time()
pairs = workloads("sdk")[0].pairs(123)
for _ in range(20):
    action, observation = next(pairs)
    conv.append(action)
    conv.append(observation)
    conv.view().to_messages()
c2 = time.process_time()
conv.views.clear()
conv.view()
c3 = time.process_time()
store.close()
print(json.dumps({"resume": (c1 - c0) * 1000, "step": (c2 - c1) * 1000 / 20, "rebuild": (c3 - c2) * 1000,
                  "view_events": len(view)}))
"""
SETTINGS = ("allowed", "left alone")
FIGURES = (("resume", "open + view + messages"), ("step", "a step (append 2, view, messages)"),
           ("rebuild", "rebuild"))


def run(path: Path, setting: str) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), "allowed" if setting == "allowed" else "no"],
                          capture_output=True, text=True, env={**child_env(), "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10k")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    args = ap.parse_args()
    print(f"{machine()}; load average {load()}")
    for n in sorted({parse_size(s) for s in args.sizes.split(",") if s.strip()}):
        for wl in (workloads("sdk")[0], no_condenser()):
            src = database(args.dir, wl, n, 0)
            results: dict[str, list[dict]] = {s: [] for s in SETTINGS}
            for k in range(args.repeats):
                for setting in SETTINGS if k % 2 == 0 else reversed(SETTINGS):
                    with work_copy(args.dir, src, "collector") as copy:
                        results[setting].append(run(copy, setting))
            events = results[SETTINGS[0]][0]["view_events"]
            print(f"\n{wl.title}, {human(n)} events ({events:,} in the view); CPU ms, median of {args.repeats}")
            print(f"  {'':36} {'allowed':>10} {'left alone':>11} {'ratio':>7}")
            for key, label in FIGURES:
                a, b = (median([r[key] for r in results[s]]) for s in SETTINGS)
                print(f"  {label:36} {a:10.2f} {b:11.2f} {b / a:6.2f}x")
    print(f"\nload average at the end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
