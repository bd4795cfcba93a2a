"""This project's ``MemorySession`` (the OpenAI Agents SDK's ``Session``), run with the
project's own interpreter: the SDK is not imported, as ``MemorySession`` does not need it.

The same Responses items as the SDK's sessions get (responses_items.py), through the same
calls. Build: with a condenser (store ``ohm-session-condenser``: the offline
``LLMSummarizingCondenser(max_size=120, keep_first=4)``, run at the end of each
``add_items`` as the session does by default), one ``add_items`` per unit, as an agent's runs
add them, so that the condensations happen as the history grows; without one
(``ohm-session``), ``add_items`` in chunks of 5,000, as the peers are built. Step:
``add_items([message, function_call])`` then ``add_items([function_call_output])``, one
commit each (and the condenser's check, with one). Resume: ``MemorySession(...)`` and
``get_items()``. Durability: the store's default (``normal``: WAL, synchronous=NORMAL) and
``durability="full"`` (synchronous=FULL).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import child  # noqa: E402
from responses_items import to_items  # noqa: E402

import openhands_memory.condensers  # noqa: E402,F401  (imported before the clock, as the peers import theirs)
from openhands_memory.allocation import allow_collector_pauses  # noqa: E402
from openhands_memory.conversation import EventStore  # noqa: E402
from openhands_memory.integrations.openai_agents import MemorySession  # noqa: E402

allow_collector_pauses()  # as this_project.py: an agent process resuming long views would

SESSION = "bench"
CHUNK = 5_000
CONDENSER = {"type": "llm", "max_size": 120, "keep_first": 4}


def session(store: str, location: Any) -> MemorySession:
    return MemorySession(SESSION, location, CONDENSER if store == "ohm-session-condenser" else None)


def build(args: dict[str, Any]) -> dict[str, Any]:
    async def go() -> int:
        s = session(args["store"], args["path"])
        count = 0
        batch: list[dict[str, Any]] = []
        for kind, value in child.units(child.records(args["items"])):
            items = to_items(kind, value)
            count += len(items)
            if s.history.condenser is not None:
                await s.add_items(items)
                continue
            batch += items
            if len(batch) >= CHUNK:
                await s.add_items(batch)
                batch = []
        if batch:
            await s.add_items(batch)
        s.close()
        return count

    return {"stored": asyncio.run(go())}


def append(args: dict[str, Any]) -> dict[str, Any]:
    async def go():
        durability = "full" if args["durability"] == "full" else "normal"
        store = EventStore(args["path"], create=False, durability=durability)
        s = session(args["store"], store)
        await s.get_items(limit=1)  # opened, and its view read, before the clock starts
        laps = []
        clock = child.Clock()
        for call, result in child.steps(args):
            await s.add_items(to_items("calls", [call]))
            await s.add_items(to_items("result", result))
            laps.append(clock.lap())
        info = child.sqlite_durability(lambda sql: store.db.execute(sql).fetchone()[0])
        store.close()
        return child.append_result(laps, info)

    return asyncio.run(go())


def resume(args: dict[str, Any]) -> dict[str, Any]:
    async def go():
        clock = child.Clock()
        s = session(args["store"], args["path"])
        items = await s.get_items()
        result = child.resume_result(clock, len(items))
        s.close()
        return result

    return asyncio.run(go())


def window(args: dict[str, Any]) -> dict[str, Any]:
    """``get_items(limit=...)``, as the Agents SDK asks at each turn with ``SessionSettings(limit)``:
    open the store and produce the newest ``limit`` items."""
    async def go():
        clock = child.Clock()
        s = session(args["store"], args["path"])
        items = await s.get_items(limit=args["limit"])
        result = child.resume_result(clock, len(items))
        s.close()
        return result

    return asyncio.run(go())


if __name__ == "__main__":
    child.run({"build": build, "append": append, "resume": resume, "window": window})
