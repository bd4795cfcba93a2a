"""OpenAI Agents SDK sessions: ``SQLiteSession`` and ``SQLAlchemySession`` (sqlite+aiosqlite).

Items are Responses API items as the SDK stores a run's output (responses_items.py).
Build: ``add_items`` in chunks of 5,000. Step: ``add_items([message, function_call])`` then
``add_items([function_call_output])``, one commit each. Resume: ``get_items()`` (what the
runner sends as the conversation's input items). Durability: the session's own (WAL; the
connection's default ``synchronous``) and ``synchronous=FULL`` set on every connection the
session opens.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import child  # noqa: E402
from agents import SQLiteSession  # noqa: E402
from agents.extensions.memory import SQLAlchemySession  # noqa: E402
from responses_items import to_items  # noqa: E402
from sqlalchemy.ext.asyncio import create_async_engine  # noqa: E402

SESSION = "bench"
CHUNK = 5_000


# --- the two sessions ----------------------------------------------------------------------


class FullSQLiteSession(SQLiteSession):
    """SQLiteSession with synchronous=FULL on each connection it opens."""

    @staticmethod
    def _configure_connection(conn) -> None:
        SQLiteSession._configure_connection(conn)
        conn.execute("PRAGMA synchronous=FULL")


def sqlite_session(path: str, full: bool):
    session = (FullSQLiteSession if full else SQLiteSession)(SESSION, db_path=path)
    conn = session._get_connection()
    durability = child.sqlite_durability(lambda sql: conn.execute(sql).fetchone()[0])
    return session, durability


def sqlalchemy_session(path: str, full: bool):
    engine = create_async_engine(f"sqlite+aiosqlite:///{path}")
    seen = child.watch_connections(engine.sync_engine, full)
    session = SQLAlchemySession(SESSION, engine=engine, create_tables=True)
    return session, seen


SESSIONS = {"openai-sqlite": sqlite_session, "openai-sqlalchemy": sqlalchemy_session}


def durability_of(info) -> str:
    return info if isinstance(info, str) else (info[-1] if info else "?")


# --- operations ----------------------------------------------------------------------------


def build(args: dict[str, Any]) -> dict[str, Any]:
    async def go() -> int:
        session, _ = SESSIONS[args["store"]](args["path"], False)
        batch: list[dict[str, Any]] = []
        count = 0
        for kind, value in child.units(child.records(args["items"])):
            batch += to_items(kind, value)
            if len(batch) >= CHUNK:
                await session.add_items(batch)
                count, batch = count + len(batch), []
        if batch:
            await session.add_items(batch)
        return count + len(batch)

    return {"stored": asyncio.run(go())}


def append(args: dict[str, Any]) -> dict[str, Any]:
    async def go():
        session, info = SESSIONS[args["store"]](args["path"], args["durability"] == "full")
        await session.get_items(limit=1)  # opened and connected before the clock starts
        laps = []
        clock = child.Clock()
        for call, result in child.steps(args):
            await session.add_items(to_items("calls", [call]))
            await session.add_items(to_items("result", result))
            laps.append(clock.lap())
        return child.append_result(laps, durability_of(info))

    return asyncio.run(go())


def resume(args: dict[str, Any]) -> dict[str, Any]:
    async def go():
        clock = child.Clock()
        session, _ = SESSIONS[args["store"]](args["path"], False)
        items = await session.get_items()
        return child.resume_result(clock, len(items))

    return asyncio.run(go())


def window(args: dict[str, Any]) -> dict[str, Any]:
    """``get_items(limit=...)``, as the Agents SDK asks at each turn with ``SessionSettings(limit)``:
    open the store and produce the newest ``limit`` items."""
    async def go():
        clock = child.Clock()
        session, _ = SESSIONS[args["store"]](args["path"], False)
        items = await session.get_items(limit=args["limit"])
        result = child.resume_result(clock, len(items))
        return result

    return asyncio.run(go())


if __name__ == "__main__":
    child.run({"build": build, "append": append, "resume": resume, "window": window})
