"""openhands-memory: events as rows (run with the project's own interpreter).

The histories are bench/common.py's cached databases (``append_many`` in chunks of 5,000),
built by the parent: the SDK workload with the Condensations of
``LLMSummarizingCondenser(max_size=120, keep_first=4)`` (store ``ohm-condenser``), and the
same stream without them (``ohm-no-condenser``). Step: ``conv.append(action)`` then
``conv.append(observation)``, one commit each (the next steps of
``sdk_workload.step_pairs``). Resume: ``EventStore(path)``, ``conv.view()``,
``view.to_messages()``. Durability: the store's default (``normal``: WAL,
synchronous=NORMAL) and ``durability="full"`` (synchronous=FULL). The process lets the
library pause the cyclic collector while it builds a view (``allocation.allow_collector_pauses``),
as an agent process that resumes long views would, and as the command line does.
"""

from __future__ import annotations

import sys
from itertools import islice
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import child  # noqa: E402
from bench.sdk_workload import step_pairs  # noqa: E402
from openhands_memory import EventStore  # noqa: E402
from openhands_memory.allocation import allow_collector_pauses  # noqa: E402

allow_collector_pauses()

CONVERSATION = "bench"  # bench/common.py's


def append(args: dict[str, Any]) -> dict[str, Any]:
    durability = "full" if args["durability"] == "full" else "normal"
    pairs = list(islice(step_pairs(args["seed"]), args["offset"], args["offset"] + args["count"]))
    with EventStore(args["path"], create=False, durability=durability) as store:
        conv = store.conversation(CONVERSATION)
        len(conv)  # opened before the clock starts

        def step(pair) -> None:
            for event in pair:
                conv.append(event)

        laps = child.timed_each(pairs, step)
        info = child.sqlite_durability(lambda sql: store.db.execute(sql).fetchone()[0])
    return child.append_result(laps, info)


def resume(args: dict[str, Any]) -> dict[str, Any]:
    clock = child.Clock()
    store = EventStore(args["path"], create=False)
    view = store.conversation(CONVERSATION).view()
    messages = view.to_messages()
    result = child.resume_result(clock, len(messages))
    result["view_events"] = len(view)
    store.close()
    return result


if __name__ == "__main__":
    child.run({"append": append, "resume": resume})
