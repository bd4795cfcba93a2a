"""One agent of the fleet load test (tests/test_fleet_load.py), in a process of its own,
forked from a server process that imported this module (``multiprocessing``'s forkserver,
with this module preloaded: a fleet of dozens starts without each importing the library), or
run by hand:

    python -m tests.fleet_agent URL CONVERSATION AGENT STEPS

Each step is what an agent loop does each turn: append a tool call and its result, then
``conv.step(LLMSummarizingCondenser(max_size=30, keep_first=1))`` (the offline summarizer)
for the view to send. Every 10th result carries a planted token (``planted-<agent>-<step>``)
for search to find afterwards; every 25th call is pinned (reinject). A command that fails
is reported in one line and the agent goes on, as a fleet's agents do.

What it reports (a dict; by hand, the last line printed, as JSON): the agent, the steps
whose append was acknowledged, those whose append may or may not have landed (``committed``
unknown), every failure's message and the kind of error it was, and each completed step's
latency.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

# What the loop uses, imported once in the forkserver (the library imports some on first use).
import psycopg  # noqa: F401

import openhands_memory.storage.postgres.connection  # noqa: F401
import openhands_memory.summarizers.offline  # noqa: F401
from openhands_memory.condensers import LLMSummarizingCondenser
from openhands_memory.conversation import EventStore
from openhands_memory.errors import OpenHandsMemoryError

from tests import factories as f


def planted(agent: int, step: int) -> str:
    return f"planted{agent}x{step}"


def call_id(agent: int, step: int) -> str:
    return f"a{agent}s{step}"


def main(url: str, cid: str, agent: int, steps: int) -> dict[str, Any]:
    acknowledged: list[int] = []
    uncertain: list[int] = []
    errors: list[str] = []
    kinds: list[str] = []
    latencies: list[float] = []
    condenser = LLMSummarizingCondenser(max_size=30, keep_first=1)
    store = None
    for attempt in range(20):  # the store itself may meet a fault while opening
        try:
            store = EventStore(url)
            break
        except OpenHandsMemoryError as e:
            errors.append(str(e))
            kinds.append(type(e).__name__)
            time.sleep(0.5)
    if store is None:
        return {"agent": agent, "acknowledged": [], "uncertain": [], "errors": errors, "kinds": kinds,
                "latencies": []}
    with store:
        conv = store.conversation(cid)
        for step in range(steps):
            started = time.perf_counter()
            token = f" {planted(agent, step)}" if step % 10 == 0 else ""
            events = [f.action(f"r{agent}s{step}", call_id(agent, step)),
                      f.observation(call_id(agent, step), f"step {step} of agent {agent}: exit 0{token}")]
            try:
                first, _ = conv.append_many(events)
            except OpenHandsMemoryError as e:
                errors.append(str(e))
                kinds.append(type(e).__name__)
                if getattr(e, "committed", False) is None:
                    uncertain.append(step)
                continue
            acknowledged.append(step)
            try:
                if step % 25 == 24:
                    conv.pin(first, "reinject", label=f"agent {agent} step {step}")
                conv.step(condenser)
            except OpenHandsMemoryError as e:
                errors.append(str(e))
                kinds.append(type(e).__name__)
                continue
            latencies.append(time.perf_counter() - started)
    return {"agent": agent, "acknowledged": acknowledged, "uncertain": uncertain, "errors": errors,
            "kinds": kinds, "latencies": latencies}


def run(url: str, cid: str, agent: int, steps: int, out: Any) -> None:
    """``main``, its report put on the queue ``out`` (a process's target)."""
    out.put(main(url, cid, agent, steps))


if __name__ == "__main__":
    url, cid, agent, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    print(json.dumps(main(url, cid, agent, steps)), flush=True)
