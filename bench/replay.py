"""Replay at scale: a recorded history under three strategies, and how its cost grows (issue 22).

    PYTHONPATH=. python bench/replay.py [--workload sdk|own|both] [--sizes 10k,20k,40k] [--repeats 3]

On the cached databases (bench/common.py), per size: ``conv.replay`` of the bench
conversation under none (noop), observation masking (its default window) and a rolling
summary by the offline summarizer (``llm``, max_size 120, keep_first 4: the SDK's
settings), plus the recorded run (the baseline row), in a throwaway scratch database;
chars/4 tokens. Figures: median wall seconds of ``--repeats`` replays; microseconds per
event of the history (flat if the cost grows linearly); and the model calls replayed. A
replay's output is the same every run: the bench checks that each repeat's JSON is equal.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import CONVERSATION, Figure, Session, add_arguments, database, print_figures  # noqa: E402
from openhands_memory.condensers import (  # noqa: E402
    LLMSummarizingCondenser,
    NoOpCondenser,
    ObservationMaskingCondenser,
)
from openhands_memory.conversation import EventStore  # noqa: E402

TARGET_SECONDS_10K = 10.0


def strategies() -> list[tuple[str, object]]:
    return [("none", NoOpCondenser()), ("masking", ObservationMaskingCondenser()),
            ("summary", LLMSummarizingCondenser(max_size=120, keep_first=4))]


def replay_once(path: Path) -> tuple[float, int, str]:
    """(wall s, model calls, the JSON) of one replay of the bench conversation."""
    with EventStore(path, create=False, readonly=True) as store:
        conv = store.conversation(CONVERSATION)
        started = time.perf_counter()
        result = conv.replay(strategies())
        return time.perf_counter() - started, result.calls, result.model_dump_json()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(ap, repeats=3)
    ap.set_defaults(workload="sdk", sizes="10000,20000,40000")
    args = ap.parse_args()
    session = Session("replay: three strategies and the recorded run over one history", args,
                      ["strategies: none, observation masking (window 100), rolling summary (offline, "
                       "max_size 120, keep_first 4); chars/4 tokens; a throwaway scratch database"])
    for wl in session.workloads:
        seconds = Figure("replay, wall s (median)", "{:.2f}")
        per_event = Figure("µs per event of the history", "{:.0f}")
        calls = Figure("model calls replayed", "{:,.0f}")
        same = Figure("equal JSON on every repeat", "{:.0f}", 1, at_most=False, target_text="1 (yes)")
        for n in session.sizes:
            path = database(args.dir, wl, n, args.seed)
            runs = [replay_once(path) for _ in range(args.repeats)]
            wall = statistics.median(r[0] for r in runs)
            seconds.values[n] = wall
            per_event.values[n] = wall / n * 1e6
            calls.values[n] = runs[0][1]
            same.values[n] = float(len({r[2] for r in runs}) == 1)
        shown = [seconds, per_event, calls, same]
        if 10_000 in seconds.values:  # the target is the 10k history's
            ten = Figure("replay of 10k events, wall s", "{:.2f}", TARGET_SECONDS_10K)
            ten.values = {10_000: seconds.values[10_000]}
            shown.insert(0, ten)
        print_figures(f"{wl.name}", session.sizes, shown)
    session.end()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
