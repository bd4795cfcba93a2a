"""Run conformance cases through the real OpenHands SDK (run with the SDK's Python >= 3.12).

Reads one JSON document on stdin::

    {"configs": {"name": {LLM keyword arguments}, ...},
     "cases": [{"id": "...", "events": [<SDK event JSON>, ...],
                "resume": {"folder": ..., "tools": [...]},   # instead of events: an exported
                                                             # folder, resumed by the SDK
                "configs": ["name", ...],                 # messages formatted for these LLMs
                "condense": {"max_size": N, "keep_first": K},   # optional
                "navigations": [[i, uid | None], ...], "leaf": uid | None,   # a branched history:
                "head_is_empty": bool, "other_leaves": [uid, ...]}         # see below
              ]}

and prints one JSON document: for every config, the switches the SDK resolved for it; for
every case, the ids of ``View.from_events(events)``, its ``unhandled_condensation_request``,
the messages ``LLM.format_messages_for_llm`` gives for each config, and (with ``condense``)
what the SDK's LLMSummarizingCondenser decides, its summary call stubbed (the decision is the
SDK's; only the model call is replaced). A case the SDK cannot load reports ``"error"``.

A branched history (a case with ``leaf``) is replayed on the SDK's own ``ConversationState``
(in memory): each event is appended without its ``parent_id`` by ``append_event``, after the
``navigate_to`` moves the case names (``navigations``: before event ``i``, HEAD to ``uid``),
and the parent the SDK stamps must be the one the case carries. The view is then
``View.from_events(state.active_branch())`` (``path_to_root`` of the resolved HEAD, which must
be the case's ``leaf`` / ``head_is_empty``), and under ``"others"`` the same for
``path_to_root`` of each of ``other_leaves``.

Nothing leaves the machine: name resolution outside loopback is refused.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import traceback

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")

_real_getaddrinfo = socket.getaddrinfo


def _loopback_only(host, *args, **kwargs):  # type: ignore[no-untyped-def]
    if host not in ("localhost", "127.0.0.1", "::1", None):
        raise OSError(f"conformance runner: no network access ({host})")
    return _real_getaddrinfo(host, *args, **kwargs)


socket.getaddrinfo = _loopback_only  # type: ignore[assignment]

import logging  # noqa: E402

logging.disable(logging.CRITICAL)

# Every tool whose observations the cases carry must be registered before events load.
import openhands.sdk.mcp.definition  # noqa: E402,F401
import openhands.sdk.tool.builtins  # noqa: E402,F401
import openhands.tools.apply_patch.definition  # noqa: E402,F401
import openhands.tools.browser_use.definition  # noqa: E402,F401
import openhands.tools.file_editor.definition  # noqa: E402,F401
import openhands.tools.glob.definition  # noqa: E402,F401
import openhands.tools.grep.definition  # noqa: E402,F401
import openhands.tools.task.definition  # noqa: E402,F401
import openhands.tools.task_tracker.definition  # noqa: E402,F401
import openhands.tools.terminal.definition  # noqa: E402,F401
from openhands.sdk import LLM  # noqa: E402
from openhands.sdk.context.condenser import LLMSummarizingCondenser  # noqa: E402
from openhands.sdk.context.view import View  # noqa: E402
from openhands.sdk.event import Condensation, Event, LLMConvertibleEvent  # noqa: E402


def _stub_summary(self, forgotten_events, summary_offset, max_event_str_length=None):  # type: ignore[no-untyped-def]
    return Condensation(
        forgotten_event_ids={e.id for e in forgotten_events},
        summary="SUMMARY",
        summary_offset=summary_offset,
        llm_response_id="stub",
    )


LLMSummarizingCondenser._generate_condensation = _stub_summary  # type: ignore[method-assign]


def switches(llm: LLM) -> dict:
    features = llm._model_features()
    forced = llm.force_string_serializer
    return {
        "vision": llm.vision_is_active(),
        "cache_prompt": llm.is_caching_prompt_active(),
        "reasoning_content": bool(features.send_reasoning_content),
        "string_content": bool(forced if forced is not None else features.force_string_serializer),
        "native_tool_calling": bool(llm.native_tool_calling),
    }


def condense(view: View, settings: dict, llm: LLM) -> dict:
    condenser = LLMSummarizingCondenser(llm=llm, **settings)
    try:
        out = condenser.condense(view)
    except Exception as e:  # NoCondensationAvailableException and friends
        return {"outcome": "raised", "error": type(e).__name__}
    if isinstance(out, View):
        return {"outcome": "view"}
    return {
        "outcome": "condensation",
        "forgotten": sorted(out.forgotten_event_ids),
        "summary_offset": out.summary_offset,
    }


def resume(spec: dict) -> list:
    """Resume an exported conversation folder as the SDK does, with the caller's Agent."""
    from uuid import UUID

    from openhands.sdk import Agent
    from openhands.sdk.conversation.state import ConversationState
    from openhands.sdk.tool import Tool
    from openhands.sdk.workspace import LocalWorkspace

    with open(os.path.join(spec["folder"], "base_state.json")) as f:
        conversation_id = UUID(json.load(f)["id"])
    agent = Agent(llm=LLM(model="gpt-4o", api_key="none", usage_id="agent"),
                  tools=[Tool(name=t) for t in spec["tools"]])
    state = ConversationState.create(id=conversation_id, agent=agent, workspace=LocalWorkspace(working_dir="."),
                                     persistence_dir=spec["folder"])
    return list(state.events)


class TreeMismatch(AssertionError):
    """The case's tree is not the one the SDK's ConversationState writes for it."""


def tree_state(case: dict):  # type: ignore[no-untyped-def]
    """The case's events appended to an in-memory ``ConversationState`` as the SDK appends them,
    HEAD moved as ``LocalConversation.navigate_to`` moves it; every stamped parent checked."""
    from uuid import uuid4

    from openhands.sdk import Agent
    from openhands.sdk.conversation.state import ConversationState
    from openhands.sdk.io import InMemoryFileStore
    from openhands.sdk.workspace import LocalWorkspace

    global _AGENT
    if _AGENT is None:
        _AGENT = Agent(llm=LLM(model="gpt-4o", api_key="none", usage_id="agent"), tools=[])
    state = ConversationState.create(id=uuid4(), agent=_AGENT, workspace=LocalWorkspace(working_dir="."),
                                     file_store=InMemoryFileStore())
    state._autosave_enabled = False  # nothing to persist; HEAD moves are plain field writes

    def navigate_to(uid: str | None) -> None:  # LocalConversation.navigate_to, minus the lock and rebuild
        if uid is not None and uid not in state.events:
            raise ValueError(f"Unknown event_id: {uid}")
        state.leaf_event_id = uid
        state.head_is_empty = uid is None

    moves: dict[int, list] = {}
    for i, uid in case.get("navigations", []):
        moves.setdefault(i, []).append(uid)
    for i, raw in enumerate(case["events"]):
        for uid in moves.get(i, []):
            navigate_to(uid)
        state.append_event(Event.model_validate({k: v for k, v in raw.items() if k != "parent_id"}))
        stamped = state.events[i].parent_id
        if stamped != raw.get("parent_id"):
            raise TreeMismatch(f"event {i} ({raw['kind']}): the SDK stamps parent {stamped}, the case says {raw.get('parent_id')}")
    for uid in moves.get(len(case["events"]), []):
        navigate_to(uid)
    if (state._resolve_active_leaf(), state.head_is_empty) != (case["leaf"], case["head_is_empty"]):
        raise TreeMismatch(f"the SDK's HEAD is {state._resolve_active_leaf()} (empty: {state.head_is_empty}), "
                           f"the case says {case['leaf']} (empty: {case['head_is_empty']})")
    return state


_AGENT = None


def run_case(case: dict, llms: dict[str, LLM]) -> dict:
    if case.get("resume"):
        events = resume(case["resume"])
    elif "leaf" in case:
        state = tree_state(case)
        result = view_result(state.active_branch(), case, llms)
        result["others"] = {uid: view_result(state.events.path_to_root(uid), case, llms) for uid in case["other_leaves"]}
        return result
    else:
        events = [Event.model_validate(e) for e in case["events"]]
    return view_result(events, case, llms)


def view_result(events: list, case: dict, llms: dict[str, LLM]) -> dict:
    """``View.from_events(events)``: its ids, request flag, messages and condenser decision."""
    view = View.from_events(events)
    result: dict = {
        "view": [e.id for e in view.events],
        "unhandled_condensation_request": view.unhandled_condensation_request,
        "messages": {},
    }
    if case.get("configs"):
        turns = LLMConvertibleEvent.events_to_messages(list(view.events))
        for name in case["configs"]:
            result["messages"][name] = llms[name].format_messages_for_llm(turns)
    if case.get("condense"):
        result["condense"] = condense(view, case["condense"], llms["condenser"])
    return result


def main() -> None:
    request = json.load(sys.stdin)
    llms = {name: LLM(usage_id=name, api_key="none", **kw) for name, kw in request["configs"].items()}
    llms["condenser"] = LLM(usage_id="condenser", model="gpt-4o", api_key="none")
    out: dict = {
        "sdk_version": _version(),
        "switches": {name: switches(llm) for name, llm in llms.items() if name != "condenser"},
        "cases": {},
    }
    for case in request["cases"]:
        try:
            out["cases"][case["id"]] = run_case(case, llms)
        except Exception as e:
            out["cases"][case["id"]] = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc(limit=3)}
    json.dump(out, sys.stdout)


def _version() -> str:
    from importlib.metadata import version

    return version("openhands-sdk")


if __name__ == "__main__":
    main()
