"""One-line descriptions of events, from their JSON (no model classes needed)."""

from __future__ import annotations

import json
import re
from typing import Any

from .output import one_line

KIND_LABELS = {
    "SystemPromptEvent": "system",
    "MessageEvent": "message",
    "ActionEvent": "action",
    "ObservationEvent": "observation",
    "AgentErrorEvent": "error",
    "UserRejectObservation": "rejected",
    "CondensationSummaryEvent": "summary",
    "Condensation": "condensation",
    "CondensationRequest": "request",
    "PauseEvent": "pause",
    "InterruptEvent": "interrupt",
    "ConversationStateUpdateEvent": "state",
    "ConversationErrorEvent": "conv-error",
    "AgentStateChangedEvent": "agent-state",
    "RecallAction": "recall",
    "RecallObservation": "recalled",
    "NullEvent": "null",
    "PinEvent": "pin",
    "PinnedContextEvent": "pinned",
}
SOURCE_LABELS = {"environment": "env"}
_CD = re.compile(r"^cd \S+ && ")  # the agent's habitual "cd <repo> && " adds nothing to a preview
_SUMMARY_LINE = re.compile(r"(passed|failed|error|Error|Successfully|Found \d|warning|No such|not found)")


def kind_label(kind: str) -> str:
    return KIND_LABELS.get(kind, kind)


def source_label(source: str | None) -> str:
    return SOURCE_LABELS.get(source or "", source or "")


def _texts(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for c in content or []:
        if isinstance(c, dict):
            if c.get("type", "text") == "text":
                parts.append(str(c.get("text", "")))
            elif c.get("type") == "image":
                parts.append("[image]")
    return " ".join(parts)


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _args(d: dict) -> dict:
    call = d.get("tool_call") or {}
    try:
        args = json.loads(call.get("arguments") or "{}")
    except (TypeError, json.JSONDecodeError):
        return {"(invalid arguments)": call.get("arguments")}
    return args if isinstance(args, dict) else {"args": args}


def action_text(d: dict) -> str:
    tool = d.get("tool_name") or "?"
    args = _args(d)
    if "command" in args and tool in ("terminal", "execute_bash", "bash"):
        text = f"$ {_CD.sub('', str(args['command']))}"
    elif isinstance(args.get("task_list"), list):
        tasks = args["task_list"]
        done = sum(1 for t in tasks if isinstance(t, dict) and t.get("status") == "done")
        text = f"plan: {len(tasks)} tasks, {done} done"
    elif "path" in args and "command" in args:
        text = f"{args['command']} {args['path']}"
        if args.get("view_range"):
            text += f" {args['view_range']}"
    elif "url" in args:
        text = str(args["url"])
    elif "code" in args:
        text = f">>> {args['code']}"
    elif len(args) == 1:
        text = str(next(iter(args.values())))
    else:
        text = json.dumps(args, ensure_ascii=False)
    prefix = "(invalid call) " if d.get("action") is None else ""
    think = " [thinking]" if d.get("thinking_blocks") else ""
    return f"{tool}: {prefix}{text}{think}"


def observation_text(d: dict) -> str:
    obs = d.get("observation") or {}
    text = _texts(obs.get("content")) if isinstance(obs, dict) else ""
    lines = _lines(text)
    kind = str(obs.get("kind", "")) if isinstance(obs, dict) else ""
    exit_code = obs.get("exit_code") if isinstance(obs, dict) else None
    if exit_code is None and isinstance(obs, dict) and isinstance(obs.get("metadata"), dict):
        exit_code = obs["metadata"].get("exit_code")
    if "Terminal" in kind or "CmdOutput" in kind:
        # A failing command, or one whose last line sums up (pytest, pip, a linter), shows its
        # last line; other output its first.
        if not lines:
            return f"[exit {exit_code}] (no output)"
        last = lines[-1]
        shown = last if exit_code not in (0, None) or _SUMMARY_LINE.search(last) else lines[0]
        return f"[exit {exit_code}] {shown}"
    if not isinstance(obs, dict):
        return lines[0] if lines else "(empty)"
    error = "error: " if obs.get("is_error") else ""
    if obs.get("url"):
        return f"{error}{obs['url']}: {obs.get('title') or (lines[0] if lines else '')}"
    if obs.get("path") and not error:
        if obs.get("command") == "view":
            numbered = [ln for ln in text.splitlines() if re.match(r"^\s*\d+\t", ln)]
            if numbered:
                first = numbered[0].split("\t", 1)[0].strip()
                last = numbered[-1].split("\t", 1)[0].strip()
                return f"{obs['path']}: lines {first}-{last}"
        elif obs.get("command") in ("str_replace", "insert", "create", "undo_edit"):
            return f"{obs['command']} done: {obs['path']}"
    return error + (lines[0] if lines else "(empty)")


def pin_text(d: dict, seq: int | None = None) -> str:
    """A PinEvent: ``pin #12 keep 'plan'`` or ``unpin #12``. ``seq``: the id of the event it
    names, when known (the JSON holds its external id, which is shown otherwise)."""
    target = f"#{seq}" if seq is not None else str(d.get("event_id", "?"))
    if d.get("mode") is None:
        return f"unpin {target}"
    text = f"pin {target} {d['mode']}"
    if d.get("label"):
        text += f" {d['label']!r}"
    extra = [f"group {d['group']}"] if d.get("group") else []
    extra += [f"rule {d['rule']}"] if d.get("rule") else []
    return text + (f" ({', '.join(extra)})" if extra else "")


def preview(d: dict) -> str:
    """The gist of one event JSON object, on one line."""
    kind = d.get("kind", "")
    if kind == "SystemPromptEvent":
        prompt = _lines(str((d.get("system_prompt") or {}).get("text", "")))
        tools = d.get("tools") or []
        return f"{prompt[0] if prompt else ''} ({len(tools)} tools)"
    if kind == "MessageEvent":
        message = d.get("llm_message") or {}
        text = _texts(message.get("content")) + " " + _texts(d.get("extended_content"))
        return text
    if kind == "ActionEvent":
        return action_text(d)
    if kind == "ObservationEvent":
        return observation_text(d)
    if kind == "AgentErrorEvent":
        return f"{d.get('tool_name', '')}: {d.get('error', '')}"
    if kind == "UserRejectObservation":
        return f"{d.get('tool_name', '')}: {d.get('rejection_reason', '')}"
    if kind == "CondensationSummaryEvent":
        text = str(d.get("summary", ""))
        first, _, rest = text.partition("\n")
        # A bracketed first line is a format marker (the offline digest's), not content.
        return rest if first.startswith("[") and first.endswith("]") and rest else text
    if kind == "Condensation":
        ids = d.get("forgotten_event_ids") or []
        runs = d.get("forgotten_ranges") or []
        n = len(ids) + sum(max(0, e - s + 1) for s, e in runs)
        text = f"forgets {n} id(s)"
        if d.get("summary") is not None:
            text += f"; summary at {d.get('summary_offset')}: {d['summary']}"
        return text
    if kind == "CondensationRequest":
        return "condensation requested"
    if kind == "PinEvent":
        return pin_text(d)
    if kind == "PinnedContextEvent":
        # The framing line ("[Pinned at event N ...]") says what the kind already does.
        head, _, body = str(d.get("text", "")).partition("\n")
        return body or head
    if kind == "ConversationStateUpdateEvent":
        return f"{d.get('key')} = {json.dumps(d.get('value'), ensure_ascii=False)}"
    if kind == "ConversationErrorEvent":
        return f"{d.get('code')}: {d.get('detail')}"
    if kind == "AgentStateChangedEvent":
        return f"agent state: {d.get('agent_state')}"
    if kind == "RecallAction":
        return f"recall: {d.get('query', '')}"
    if kind == "RecallObservation":
        return str(d.get("content", ""))
    rest = {k: v for k, v in d.items() if k not in ("id", "timestamp", "source", "kind", "parent_id")}
    return json.dumps(rest, ensure_ascii=False) if rest else ""


def one(d: dict) -> str:
    return one_line(preview(d))
