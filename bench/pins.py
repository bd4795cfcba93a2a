"""What pins cost a view: the first view and the cached step with and without 100 pins.

    python bench/pins.py [--workload own|sdk|both] [--sizes 10k,100k,1M] [--repeats 7] [--steps 100]

On a copy of each cached database (bench/common.py), three variants, measured interleaved
(variant by variant within each repeat, so a change of machine load hits them alike):
  * no pins;
  * 100 pin rows as an agent's rules write them: 96 ``reinject`` pins of a task list in one
    group (each replacing the one before, so one is in force, its event long forgotten and
    shown again) spread over the history, and 4 ``keep`` pins of events in view;
  * 100 pins in force: ``reinject`` pins of 100 forgotten events, each shown again (the view
    grows by 100 events: this is what pinning that much costs, not an overhead).
Figures, medians of CPU time (``time.process_time``) over ``--repeats``: open + first view
(a new ``EventStore`` and ``conv.view()``), and the cached step (append an action/observation
pair in two transactions, ``conv.view()``, ``to_messages()``; bench/view.py) over ``--steps``.
Target (issue 20): with the 100 pin rows, both within 10 % of the same without pins.
"""

from __future__ import annotations

import argparse
import os
import sys
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
VARIANTS = ("none", "rows", "in force")


def add_pins(path: Path, variant: str) -> int:
    """Pin as ``variant`` says; returns how many pinned events the view shows again."""
    if variant == "none":
        return 0
    with EventStore(path, create=False) as store:
        conv = store.conversation(CONVERSATION)
        view = conv.view()
        shown = {e.seq for e in view.events if e.seq is not None}
        hidden = [s for s in range(0, view.upto, max(1, view.upto // 400)) if s not in shown]
        forgotten = [s for s in hidden if conv.get(s).kind == "ObservationEvent"]
        if variant == "rows":
            step = max(1, len(forgotten) // 96)
            plans = [PinRequest(s, "reinject", group="plan") for s in forgotten[::step][:96]]
            keep = [PinRequest(s, "keep") for s in sorted(shown)[-8::2]]
            requests = plans + keep
        else:
            requests = [PinRequest(s, "reinject") for s in forgotten[:100]]
        for k in range(0, len(requests), 10):  # as an agent pins: a few at a time
            conv.pin_many(requests[k : k + 10])
        return conv.view().reinjected


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(ap, repeats=5)
    ap.add_argument("--steps", type=int, default=100, help="cached steps per run (default 100)")
    args = ap.parse_args()
    session = Session("pins: the first view and the cached step, with and without 100 pins", args)
    for wl in session.workloads:
        first = {v: Figure(f"open + first view, ms ({v})") for v in VARIANTS}
        step = {v: Figure(f"cached step, ms ({v})") for v in VARIANTS}
        ratio_first = Figure("first view: rows ÷ none", target=TARGET_RATIO, fmt="{:.3f}")
        ratio_step = Figure("cached step: rows ÷ none", target=TARGET_RATIO, fmt="{:.3f}")
        again = Figure("pinned events shown again (rows / in force)", fmt="{}")
        for n in session.sizes:
            src = database(args.dir, wl, n, args.seed)
            got: dict[str, dict[str, list[float]]] = {v: {"first": [], "step": []} for v in VARIANTS}
            shown: dict[str, int] = {}
            for _ in range(args.repeats):
                for v in VARIANTS:
                    with work_copy(args.dir, src, f"pins-{v.replace(' ', '')}") as path:
                        shown[v] = add_pins(path, v)
                        got[v]["first"].append(first_views(path, 1)["cpu"])
                        got[v]["step"].append(cached_steps(path, wl, args.seed, args.steps)["cpu"])
            for v in VARIANTS:
                first[v].values[n] = median(got[v]["first"])
                step[v].values[n] = median(got[v]["step"])
            ratio_first.values[n] = first["rows"].values[n] / first["none"].values[n]  # type: ignore[operator]
            ratio_step.values[n] = step["rows"].values[n] / step["none"].values[n]  # type: ignore[operator]
            again.values[n] = f"{shown['rows']} / {shown['in force']}"  # type: ignore[assignment]
        again.fmt = "{}"
        print_figures(f"{wl.name}: CPU ms", session.sizes,
                      [*first.values(), ratio_first, *step.values(), ratio_step, again])
    session.end()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
