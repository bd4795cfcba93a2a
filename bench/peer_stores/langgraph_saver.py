"""LangGraph: ``SqliteSaver`` checkpointing a graph whose state is the message list
(``MessagesState``): ``START -> model -> tools -> model ... -> END``.

Messages: ``HumanMessage``, ``AIMessage`` (a response's text and its ``tool_calls``, args
as a dict), ``ToolMessage``. Build: one ``graph.update_state`` with the whole history (one
checkpoint; a real run writes a checkpoint per superstep, each holding the whole list, so a
real thread's file is far larger than this one). Step: one superstep of a scripted model
node (returns the next ``AIMessage``) and one of the tools node (its ``ToolMessage``), each
checkpointed with the graph's default durability; a step is the time from one model call
to the next (the run's start-up, which loads the latest checkpoint, is not counted).
Resume: ``graph.get_state(config)`` and ``convert_to_openai_messages`` (what a chat model
integration sends). Durability: the connection's default ``synchronous`` (``setup()`` sets
WAL) and ``synchronous=FULL``.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import child  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, convert_to_openai_messages  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402

CONFIG = {"configurable": {"thread_id": "bench"}}


def to_messages(kind: str, value: Any) -> list:
    if kind == "user":
        return [HumanMessage(value)]
    if kind == "agent":
        return [AIMessage(value)]
    if kind == "result":
        return [ToolMessage(value["output"], tool_call_id=value["id"], name=value["name"])]
    calls = [{"id": c["id"], "name": c["name"], "args": json.loads(c["arguments"]), "type": "tool_call"}
             for c in value]
    return [AIMessage(value[0]["thought"], tool_calls=calls, id=value[0]["turn"])]


def graph(path: str, full: bool, script: list | None = None, marks: list | None = None):
    """The compiled graph on ``path``; its model node plays ``script`` (AIMessage, ToolMessage)
    pairs, noting a clock lap in ``marks`` each time it is called."""
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    if full:
        conn.execute("PRAGMA synchronous=FULL")
    pending: list = []
    clock = child.Clock()

    def model(state: MessagesState) -> dict:
        if marks is not None:
            marks.append(clock.lap())
        if not script:
            return {"messages": []}
        ai, tool = script.pop(0)
        pending.append(tool)
        return {"messages": [ai]}

    def tools(state: MessagesState) -> dict:
        return {"messages": [pending.pop(0)]}

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("tools", tools)
    g.add_edge(START, "model")
    g.add_conditional_edges("model", lambda s: "tools" if pending else END, ["tools", END])
    g.add_edge("tools", "model")
    durability = child.sqlite_durability(lambda sql: conn.execute(sql).fetchone()[0])
    return g.compile(checkpointer=saver), durability


def build(args: dict[str, Any]) -> dict[str, Any]:
    messages: list = []
    for kind, value in child.units(child.records(args["items"])):
        messages += to_messages(kind, value)
    app, _ = graph(args["path"], False)
    app.update_state(CONFIG, {"messages": messages}, as_node="tools")
    return {"stored": len(messages)}


def append(args: dict[str, Any]) -> dict[str, Any]:
    script = [(to_messages("calls", [call])[0], to_messages("result", result)[0])
              for call, result in child.steps(args)]
    marks: list = []
    app, durability = graph(args["path"], args["durability"] == "full", script, marks)
    app.invoke({"messages": []}, {**CONFIG, "recursion_limit": 2 * len(script) + 10})
    return child.append_result(marks[1:], durability)


def resume(args: dict[str, Any]) -> dict[str, Any]:
    clock = child.Clock()
    app, _ = graph(args["path"], False)
    messages = app.get_state(CONFIG).values["messages"]
    sent = convert_to_openai_messages(messages)
    return child.resume_result(clock, len(sent))


if __name__ == "__main__":
    child.run({"build": build, "append": append, "resume": resume})
