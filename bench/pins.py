"""What pins cost a view: the first view and the cached step with and without 100 pins.

    python bench/pins.py [--workload own|sdk|both] [--sizes 10k,100k,1M] [--repeats 7] [--steps 100]

On a copy of each cached database (bench/common.py), four variants, measured interleaved
(variant by variant within each repeat, so a change of machine load hits them alike):
  * ``none``: no pins;
  * ``keep``: 100 ``keep`` pins of events in view (of all of them when the view is shorter);
  * ``group``: 100 pin rows as a rule writes them: 96 ``reinject`` pins of results in one
    group (each replacing the one before, so one is in force, its event long forgotten and
    shown again) spread over the history, and 4 ``keep`` pins of events in view;
  * ``reinject``: ``reinject`` pins of 100 forgotten events, all shown again (the view grows
    by 100 events: what pinning that much costs, not an overhead).
Figures, medians of CPU time (``time.process_time``) over ``--repeats`` (each variant's
copy made and pinned once): open + first view (a new ``EventStore`` and ``conv.view()``,
median of five each repeat, all before any step), and the cached step (append an action/observation
pair in two transactions, ``conv.view()``, ``to_messages()``; bench/view.py) over ``--steps``.
Target (issue 20): with ``keep`` and ``group``, both within 10 % of the same without pins.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from contextlib import ExitStack
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    CONVERSATION,
    Figure,
    Session,
    add_arguments,
    database,
    median,
    print_figures,
    work_copy,
)
from bench.view import cached_steps, first_views  # noqa: E402
from openhands_memory.conversation import EventStore  # noqa: E402
from openhands_memory.conversation.pinning import PinRequest  # noqa: E402

TARGET_RATIO = 1.10
VARIANTS = ("none", "keep", "group", "reinject")


def add_pins(path: Path, variant: str) -> tuple[int, int]:
    """Pin as ``variant`` says; returns (pins in force, pinned events the view shows again).
    The file is checkpointed afterwards, as every variant's is: a first view read through
    a WAL costs more, which is no cost of pins."""
    try:
        return _add_pins(path, variant)
    finally:
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _add_pins(path: Path, variant: str) -> tuple[int, int]:
    if variant == "none":
        return 0, 0
    with EventStore(path, create=False) as store:
        conv = store.conversation(CONVERSATION)
        view = conv.view()
        shown = {e.seq for e in view.events if e.seq is not None}
        hidden = [s for s in range(0, view.upto, max(1, view.upto // 400)) if s not in shown]
        forgotten = [s for s in hidden if conv.get(s).kind == "ObservationEvent"]
        if variant == "keep":
            requests = [PinRequest(s, "keep") for s in sorted(shown)[-100:]]
        elif variant == "group":
            step = max(1, len(forgotten) // 96)
            plans = [PinRequest(s, "reinject", group="plan") for s in forgotten[::step][:96]]
            requests = plans + [PinRequest(s, "keep") for s in sorted(shown)[-8::2]]
        else:
            requests = [PinRequest(s, "reinject") for s in forgotten[:100]]
        for k in range(0, len(requests), 10):  # as an agent pins: a few at a time
            conv.pin_many(requests[k : k + 10])
        view = conv.view()
        return len(view.pins), view.reinjected


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(ap, repeats=5)
    ap.add_argument("--steps", type=int, default=100, help="cached steps per run (default 100)")
    args = ap.parse_args()
    session = Session("pins: the first view and the cached step, with and without 100 pins", args)
    for wl in session.workloads:
        first = {v: Figure(f"open + first view, ms ({v})") for v in VARIANTS}
        step = {v: Figure(f"cached step, ms ({v})") for v in VARIANTS}
        ratios = {(v, what): Figure(f"{what}: {v} ÷ none", target=TARGET_RATIO, fmt="{:.3f}")
                  for what in ("first view", "cached step") for v in ("keep", "group")}
        pinned = Figure("pins in force (keep/group/reinject)", fmt="{}")
        again = Figure("shown again (keep/group/reinject)", fmt="{}")
        for n in session.sizes:
            src = database(args.dir, wl, n, args.seed)
            got: dict[str, dict[str, list[float]]] = {v: {"first": [], "step": []} for v in VARIANTS}
            counts: dict[str, tuple[int, int]] = {}
            with ExitStack() as stack:  # one copy per variant, pinned once
                paths = {v: stack.enter_context(work_copy(args.dir, src, f"pins-{v}")) for v in VARIANTS}
                for v in VARIANTS:
                    counts[v] = add_pins(paths[v], v)
                for _ in range(args.repeats):  # first views before the steps grow the files
                    for v in VARIANTS:
                        got[v]["first"].append(first_views(paths[v], 5)["cpu"])
                for r in range(args.repeats):
                    for v in VARIANTS:
                        seed = args.seed + 1000 * (r + 1)  # new events each repeat
                        got[v]["step"].append(cached_steps(paths[v], wl, seed, args.steps)["cpu"])
            for v in VARIANTS:
                first[v].values[n] = median(got[v]["first"])
                step[v].values[n] = median(got[v]["step"])
            for (v, what), fig in ratios.items():
                mine, base = (first, step)[what == "cached step"][v], (first, step)[what == "cached step"]["none"]
                fig.values[n] = mine.values[n] / base.values[n]  # type: ignore[operator]
            pinned.values[n] = "/".join(str(counts[v][0]) for v in VARIANTS[1:])  # type: ignore[assignment]
            again.values[n] = "/".join(str(counts[v][1]) for v in VARIANTS[1:])  # type: ignore[assignment]
        print_figures(f"{wl.name}: CPU ms", session.sizes,
                      [*first.values(), *step.values(), *ratios.values(), pinned, again])
    session.end()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
