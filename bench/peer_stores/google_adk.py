"""Google ADK: ``DatabaseSessionService`` on SQLite (``sqlite+aiosqlite``).

Events: ``Event(author="user")`` with a text part; the agent's ``Event`` with a response's
text and its ``function_call`` parts (role ``model``); a ``function_response`` part per
result (role ``user``, ``{"result": output}``). Build: ``append_event`` one event at a time
(the service has no bulk append). Step: ``append_event`` of the call's event, then of the
result's, one commit each, on a session opened with ``GetSessionConfig(num_recent_events=1)``.
Resume: ``get_session`` and the request contents the LLM flow builds from the session's
events (``flows.llm_flows.contents._get_contents``). Durability: the engine's default
(rollback journal, the connection's default ``synchronous``) and ``synchronous=FULL`` set
on every connection.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import child  # noqa: E402
from google.adk.events import Event  # noqa: E402
from google.adk.flows.llm_flows.contents import _get_contents  # noqa: E402
from google.adk.sessions import DatabaseSessionService  # noqa: E402
from google.adk.sessions.base_session_service import GetSessionConfig  # noqa: E402
from google.genai import types  # noqa: E402

APP, USER, SESSION, AGENT = "bench", "user", "bench", "agent"


def to_event(kind: str, value: Any):
    if kind in ("user", "agent"):
        role, author = ("user", "user") if kind == "user" else ("model", AGENT)
        return Event(invocation_id="inv", author=author,
                     content=types.Content(role=role, parts=[types.Part(text=value)]))
    if kind == "result":
        part = types.Part(function_response=types.FunctionResponse(
            id=value["id"], name=value["name"], response={"result": value["output"]}))
        return Event(invocation_id="inv", author=AGENT, content=types.Content(role="user", parts=[part]))
    parts = [types.Part(text=value[0]["thought"])] if value[0]["thought"] else []
    parts += [types.Part(function_call=types.FunctionCall(id=c["id"], name=c["name"], args=json.loads(c["arguments"])))
              for c in value]
    return Event(invocation_id="inv", author=AGENT, content=types.Content(role="model", parts=parts))


def service(path: str, full: bool):
    svc = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{path}")
    return svc, child.watch_connections(svc.db_engine.sync_engine, full)


async def open_session(svc, recent: int | None):
    config = GetSessionConfig(num_recent_events=recent) if recent is not None else None
    return await svc.get_session(app_name=APP, user_id=USER, session_id=SESSION, config=config)


def build(args: dict[str, Any]) -> dict[str, Any]:
    async def go() -> int:
        svc, _ = service(args["path"], False)
        session = await svc.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        count = 0
        for kind, value in child.units(child.records(args["items"])):
            await svc.append_event(session, to_event(kind, value))
            session.events.clear()  # the service appends to it; a builder need not keep them
            count += 1
        return count

    return {"stored": asyncio.run(go())}


def append(args: dict[str, Any]) -> dict[str, Any]:
    async def go():
        svc, seen = service(args["path"], args["durability"] == "full")
        session = await open_session(svc, 1)
        laps = []
        clock = child.Clock()
        for call, result in child.steps(args):
            await svc.append_event(session, to_event("calls", [call]))
            await svc.append_event(session, to_event("result", result))
            laps.append(clock.lap())
        return child.append_result(laps, seen[-1] if seen else "?")

    return asyncio.run(go())


def resume(args: dict[str, Any]) -> dict[str, Any]:
    async def go():
        clock = child.Clock()
        svc, _ = service(args["path"], False)
        session = await open_session(svc, None)
        contents = _get_contents(None, session.events, AGENT)
        return child.resume_result(clock, len(contents))

    return asyncio.run(go())


if __name__ == "__main__":
    child.run({"build": build, "append": append, "resume": resume})
