"""Legacy OpenHands (V0) trajectories mapped onto this library's event kinds.

A V0 trajectory is a JSON list of serialized events, in id order. Actions look like
``{"id": 5, "timestamp": …, "source": "agent", "action": "run", "args": {…},
"tool_call_metadata": {…}}`` and observations like ``{"id": 6, "observation": "run",
"content": "…", "extras": {…}, "cause": 5, "tool_call_metadata": {…}}``.
``tool_call_metadata`` holds ``function_name``, ``tool_call_id`` and the provider's
``model_response`` (whose ``id`` groups parallel calls, and whose message carries the call's
JSON arguments and any reasoning).

What each legacy type becomes, and what is lost or approximated:

=============================== ==================================================================
legacy                          ours
=============================== ==================================================================
action ``system``               ``SystemPromptEvent`` (``args.content``, ``args.tools``)
action ``message``              ``MessageEvent``: role ``user`` for the user, else ``assistant``;
                                ``image_urls`` become image content (``file_urls`` are kept in
                                the payload only)
action with tool_call_metadata  ``ActionEvent``: tool name, call id and the response id from the
(``run``, ``read``, ``edit``,   metadata; the arguments as the model wrote them when the response
``browse``, ``think``, …)       holds them, else the args as JSON; ``args.thought`` becomes the
                                thought; the response's ``reasoning_content`` / ``thinking_blocks``
                                go on the first action of the response, as the SDK does. The
                                ``action`` payload is ``{"kind": <V0 class name>, **args}``.
action ``finish``               ``MessageEvent`` from the agent (thought + final thought): V0 showed
                                the finish call to the model as a plain assistant message too
action ``recall``               ``RecallAction`` (query)
action ``condensation``         ``Condensation``: ``forgotten_event_ids`` or the inclusive
                                ``forgotten_events_start_id``..``end_id`` range, mapped from legacy
                                ids to ours (ids that name no imported event are ignored, as V0
                                ignores them), as ``forgotten_ranges``; summary and offset kept
action ``condensation_request`` ``CondensationRequest``
action ``change_agent_state``,  ``AgentStateChangedEvent`` (never in a view, as V0's history
obs. ``agent_state_changed``    filter left them out)
``null`` action / observation   ``NullEvent`` (likewise)
observation with metadata       ``ObservationEvent``: ``{"kind": <V0 class>, "content": [text],
                                **extras}``; ``error`` becomes ``AgentErrorEvent`` and
                                ``user_rejected`` ``UserRejectObservation``
observation ``recall``          ``RecallObservation``: the repository, runtime and micro-agent
                                knowledge in ``extras`` written out as plain text. V0 rendered it
                                through its prompt templates; the facts are kept, not the wording
observation ``condense``        ``CondensationSummaryEvent`` (a stored summary shown as a user turn,
                                as V0 showed it)
anything without metadata       V0 showed such events to the model as plain turns: an agent
                                action becomes an assistant ``MessageEvent`` (its thought and
                                message), an observation or a user action a user-role
                                ``MessageEvent`` whose text says what was observed
hidden events                   ``NullEvent`` keeping the original under ``legacy_event``: V0 left
                                them out of the model's history
=============================== ==================================================================

Every event keeps its legacy id as its external id (``"57"``), so ``uid`` finds it again and an
observation's ``action_id`` is its ``cause``. Sequence ids are re-assigned 0, 1, 2, … in legacy id
order, so they differ from the legacy ids where the trajectory did not start at 0 or had gaps.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from pydantic import ValidationError

from .. import ranges
from ..events import (
    ActionEvent,
    AgentErrorEvent,
    AgentStateChangedEvent,
    Condensation,
    CondensationRequest,
    CondensationSummaryEvent,
    Event,
    ImageContent,
    Message,
    MessageEvent,
    MessageToolCall,
    NullEvent,
    ObservationEvent,
    RecallAction,
    RecallObservation,
    SystemPromptEvent,
    TextContent,
    UserRejectObservation,
)
from .common import ImportFailed

# V0 class names, kept as the ``kind`` of the action / observation payload.
ACTION_CLASSES = {
    "run": "CmdRunAction",
    "run_ipython": "IPythonRunCellAction",
    "read": "FileReadAction",
    "write": "FileWriteAction",
    "edit": "FileEditAction",
    "browse": "BrowseURLAction",
    "browse_interactive": "BrowseInteractiveAction",
    "think": "AgentThinkAction",
    "finish": "AgentFinishAction",
    "reject": "AgentRejectAction",
    "delegate": "AgentDelegateAction",
    "call_tool_mcp": "MCPAction",
    "task_tracking": "TaskTrackingAction",
    "recall": "RecallAction",
    "message": "MessageAction",
    "system": "SystemMessageAction",
}
OBSERVATION_CLASSES = {
    "run": "CmdOutputObservation",
    "run_ipython": "IPythonRunCellObservation",
    "read": "FileReadObservation",
    "write": "FileWriteObservation",
    "edit": "FileEditObservation",
    "browse": "BrowserOutputObservation",
    "error": "ErrorObservation",
    "think": "AgentThinkObservation",
    "delegate": "AgentDelegateObservation",
    "mcp": "MCPObservation",
    "task_tracking": "TaskTrackingObservation",
    "success": "SuccessObservation",
    "download": "FileDownloadObservation",
    "loop_detection": "LoopDetectionObservation",
    "user_rejected": "UserRejectObservation",
}
_SOURCES = ("agent", "user", "environment")


def looks_legacy(item: Any) -> bool:
    return isinstance(item, dict) and ("action" in item or "observation" in item) and "kind" not in item


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _join(*parts: Any) -> str:
    return "\n\n".join(p for p in (_text(x).strip() for x in parts) if p)


class _Converter:
    def __init__(self, where: str):
        self.where = where
        self.seq_of: dict[int, int] = {}  # legacy id -> our id
        self.legacy_ids: list[int] = []  # in order; our id = position
        self.reasoned: set[str] = set()  # response ids whose first action took the reasoning
        self.events: list[Event] = []

    # --- helpers -------------------------------------------------------------------------

    def _source(self, item: dict, default: str) -> str:
        src = item.get("source")
        return src if src in _SOURCES else default

    def _metadata(self, item: dict, at: str) -> dict | None:
        tcm = item.get("tool_call_metadata")
        if tcm is None:
            return None
        if not isinstance(tcm, dict):
            raise ImportFailed(at, "tool_call_metadata must be an object")
        for key in ("function_name", "tool_call_id"):
            if not isinstance(tcm.get(key), str) or not tcm.get(key):
                raise ImportFailed(at, f"tool_call_metadata.{key} is missing")
        return tcm

    @staticmethod
    def _response_message(tcm: dict) -> dict:
        response = tcm.get("model_response")
        if not isinstance(response, dict):
            return {}
        choices = response.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            message = choices[0].get("message")
            if isinstance(message, dict):
                return message
        return {}

    def _response_id(self, tcm: dict, legacy_id: int) -> str:
        response = tcm.get("model_response")
        rid = response.get("id") if isinstance(response, dict) else None
        # Without a response id each call stands alone (a batch of one).
        return rid if isinstance(rid, str) and rid else f"legacy-response-{legacy_id}"

    # --- one event -----------------------------------------------------------------------

    def add(self, item: Any, index: int) -> None:
        at = f"{self.where}[{index}]"
        if not isinstance(item, dict):
            raise ImportFailed(at, f"a legacy event must be a JSON object, got {type(item).__name__}")
        legacy_id = item.get("id")
        if not isinstance(legacy_id, int) or isinstance(legacy_id, bool):
            raise ImportFailed(at, "field 'id': a legacy event needs an integer id")
        at = f"{at} (legacy id {legacy_id})"
        if legacy_id in self.seq_of:
            raise ImportFailed(at, f"legacy id {legacy_id} appears twice")
        if "action" in item and "observation" not in item:
            if not isinstance(item["action"], str):
                raise ImportFailed(at, "field 'action' must be a string")
            convert = self._action
        elif "observation" in item and "action" not in item:
            if not isinstance(item["observation"], str):
                raise ImportFailed(at, "field 'observation' must be a string")
            convert = self._observation
        else:
            raise ImportFailed(at, "a legacy event has exactly one of 'action' and 'observation'")
        common = {"id": str(legacy_id), "timestamp": _text(item.get("timestamp"))}
        try:
            if self._hidden(item):
                event: Event = NullEvent(**common, source=self._source(item, "environment"), legacy_event=item)
            else:
                event = convert(item, common, at)
        except ValidationError as e:
            first = e.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "(event)"
            raise ImportFailed(at, f"cannot map it: field '{field}': {first['msg']}") from None
        self.seq_of[legacy_id] = len(self.events)
        self.legacy_ids.append(legacy_id)
        self.events.append(event)

    @staticmethod
    def _hidden(item: dict) -> bool:
        for where in (item, item.get("args"), item.get("extras")):
            if isinstance(where, dict) and where.get("hidden") is True:
                return True
        return False

    def _action(self, item: dict, common: dict, at: str) -> Event:
        kind = item["action"]
        args = item.get("args") or {}
        if not isinstance(args, dict):
            raise ImportFailed(at, "field 'args' must be an object")
        tcm = self._metadata(item, at)
        source = self._source(item, "agent")
        if kind == "system":
            return SystemPromptEvent(
                **common, source=source,
                system_prompt=TextContent(text=_text(args.get("content"))),
                tools=[t for t in args.get("tools") or [] if isinstance(t, dict)],
            )
        if kind == "message":
            role = "user" if source == "user" else "assistant"
            content: list[Any] = [TextContent(text=_text(args.get("content")))]
            images = [u for u in args.get("image_urls") or [] if isinstance(u, str)]
            if images:
                content.append(ImageContent(image_urls=images))
            extra = {"file_urls": args["file_urls"]} if args.get("file_urls") else {}
            return MessageEvent(
                **common, source=source, llm_message=Message(role=role, content=content),
                llm_response_id=self._response_id(tcm, int(common["id"])) if tcm else None, **extra,
            )
        if kind == "condensation":
            return self._condensation(args, common, at, source)
        if kind == "condensation_request":
            return CondensationRequest(**common, source=source)
        if kind == "change_agent_state":
            return AgentStateChangedEvent(**common, source=source, agent_state=_text(args.get("agent_state")))
        if kind == "null":
            return NullEvent(**common, source=source)
        if kind == "recall":
            return RecallAction(**common, source=source, query=_text(args.get("query")))
        if kind == "finish":
            text = _join(args.get("thought"), args.get("final_thought")) or "(finished)"
            return MessageEvent(
                **common, source="agent", llm_message=Message(role="assistant", content=[TextContent(text=text)]),
                llm_response_id=self._response_id(tcm, int(common["id"])) if tcm else None,
            )
        if tcm is not None:
            return self._tool_action(kind, args, tcm, common)
        # No tool call: V0 showed the model a plain turn.
        if source == "user":
            what = f"User executed the command:\n{args['command']}" if kind == "run" and args.get("command") else _text(item.get("message"))
            return MessageEvent(**common, source="user", llm_message=Message(role="user", content=[TextContent(text=what or kind)]))
        text = _join(args.get("thought"), item.get("message")) or kind
        return MessageEvent(**common, source="agent", llm_message=Message(role="assistant", content=[TextContent(text=text)]))

    def _tool_action(self, kind: str, args: dict, tcm: dict, common: dict) -> ActionEvent:
        call_id, name = tcm["tool_call_id"], tcm["function_name"]
        rid = self._response_id(tcm, int(common["id"]))
        message = self._response_message(tcm)
        arguments = None
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and call.get("id") == call_id:
                function = call.get("function") or {}
                if isinstance(function.get("arguments"), str):
                    arguments = function["arguments"]
        payload_args = {k: v for k, v in args.items() if k != "thought"}
        if arguments is None:
            arguments = json.dumps(payload_args, ensure_ascii=False)
        reasoning, thinking = None, []
        if rid not in self.reasoned:  # the first action of a response carries its reasoning
            self.reasoned.add(rid)
            if isinstance(message.get("reasoning_content"), str):
                reasoning = message["reasoning_content"]
            thinking = [
                b for b in message.get("thinking_blocks") or []
                if isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking")
            ]
        thought = _text(args.get("thought"))
        return ActionEvent(
            **common,
            source="agent",
            thought=[TextContent(text=thought)] if thought else [],
            reasoning_content=reasoning or None,
            thinking_blocks=thinking,
            action={"kind": ACTION_CLASSES.get(kind, kind), **payload_args},
            tool_name=name,
            tool_call_id=call_id,
            tool_call=MessageToolCall(id=call_id, name=name, arguments=arguments),
            llm_response_id=rid,
        )

    def _condensation(self, args: dict, common: dict, at: str, source: str) -> Condensation:
        ids = args.get("forgotten_event_ids")
        start, end = args.get("forgotten_events_start_id"), args.get("forgotten_events_end_id")
        summary, offset = args.get("summary"), args.get("summary_offset")
        using_ids = ids is not None
        using_range = start is not None and end is not None
        if using_ids == using_range:
            raise ImportFailed(at, "CondensationAction: give either forgotten_event_ids or a start/end id range")
        if (summary is None) != (offset is None):
            raise ImportFailed(at, "CondensationAction: summary and summary_offset go together")
        if using_ids:
            if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
                raise ImportFailed(at, "CondensationAction: forgotten_event_ids must be a list of integers")
            seqs = [self.seq_of[i] for i in ids if i in self.seq_of]
        else:
            if not isinstance(start, int) or not isinstance(end, int):
                raise ImportFailed(at, "CondensationAction: the forgotten id range must be integers")
            seqs = [s for legacy, s in self.seq_of.items() if start <= legacy <= end]
        return Condensation(
            **common, source=source, forgotten_ranges=ranges.runs_of(seqs),
            summary=None if summary is None else _text(summary), summary_offset=offset,
        )

    def _observation(self, item: dict, common: dict, at: str) -> Event:
        kind = item["observation"]
        content = _text(item.get("content"))
        extras = item.get("extras") or {}
        if not isinstance(extras, dict):
            raise ImportFailed(at, "field 'extras' must be an object")
        tcm = self._metadata(item, at)
        cause = item.get("cause")
        action_id = str(cause) if isinstance(cause, int) and not isinstance(cause, bool) else ""
        source = self._source(item, "environment")
        if kind == "agent_state_changed":
            return AgentStateChangedEvent(**common, source=source, agent_state=_text(extras.get("agent_state")))
        if kind == "null":
            return NullEvent(**common, source=source)
        if kind == "recall":
            return RecallObservation(**common, source=source, content=recall_text(extras) or content,
                                     action_id=action_id or None)
        if kind == "condense":
            return CondensationSummaryEvent(**common, source=source, summary=content)
        if tcm is not None:
            call_id, name = tcm["tool_call_id"], tcm["function_name"]
            if kind == "error":
                return AgentErrorEvent(**common, source=source, tool_name=name, tool_call_id=call_id, error=content)
            if kind == "user_rejected":
                return UserRejectObservation(
                    **common, tool_name=name, tool_call_id=call_id, action_id=action_id,
                    rejection_reason=content or "User rejected the action",
                )
            observation = {
                **extras,
                "content": [{"cache_prompt": False, "type": "text", "text": content}],
                "kind": OBSERVATION_CLASSES.get(kind, kind),
            }
            return ObservationEvent(**common, source=source, tool_name=name, tool_call_id=call_id,
                                    observation=observation, action_id=action_id)
        # No tool call to answer: V0 showed the output to the model as a user turn.
        if kind == "run" and extras.get("command"):
            text = f"Observed result of command executed by user:\n{extras['command']}\n{content}"
        elif kind == "error":
            text = f"Error: {content}"
        else:
            text = content or kind
        return MessageEvent(**common, source="environment",
                            llm_message=Message(role="user", content=[TextContent(text=text)]))

    # --- the whole list --------------------------------------------------------------------


def recall_text(extras: dict) -> str:
    """The workspace context and knowledge a V0 recall brought back, as plain text."""
    lines: list[str] = []

    def put(label: str, value: Any) -> None:
        text = _text(value).strip()
        if text:
            lines.append(f"{label}: {text}" if "\n" not in text else f"{label}:\n{text}")

    put("Repository", extras.get("repo_name"))
    put("Repository folder", extras.get("repo_directory"))
    put("Repository instructions", extras.get("repo_instructions"))
    hosts = extras.get("runtime_hosts")
    if isinstance(hosts, dict) and hosts:
        put("Runtime hosts", ", ".join(f"{h} (port {p})" for h, p in hosts.items()))
    put("Working folder", extras.get("working_dir"))
    put("Additional instructions", extras.get("additional_agent_instructions"))
    put("Conversation instructions", extras.get("conversation_instructions"))
    put("Date", extras.get("date"))
    secrets = extras.get("custom_secrets_descriptions")
    if isinstance(secrets, dict) and secrets:
        put("Secrets available", ", ".join(f"{k} ({v})" for k, v in secrets.items()))
    for k in extras.get("microagent_knowledge") or []:
        if isinstance(k, dict):
            head = f"Knowledge '{_text(k.get('name'))}'"
            if k.get("trigger"):
                head += f" (triggered by {_text(k.get('trigger'))!r})"
            put(head, k.get("content"))
    return "\n".join(lines)


def convert(items: Iterable[Any], where: str) -> list[Event]:
    """Map a legacy trajectory (a list of V0 event dicts) onto our events, in legacy id order."""
    keyed: list[tuple[int, int, Any]] = []
    for index, item in enumerate(items):
        legacy_id = item.get("id") if isinstance(item, dict) else None
        order = legacy_id if isinstance(legacy_id, int) and not isinstance(legacy_id, bool) else -1
        keyed.append((order, index, item))
    keyed.sort(key=lambda t: (t[0], t[1]))
    converter = _Converter(where)
    for _, index, item in keyed:
        converter.add(item, index)
    return converter.events
