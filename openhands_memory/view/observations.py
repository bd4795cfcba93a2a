"""Tool observations rendered as the OpenHands SDK shows them to the model.

An ``ObservationEvent`` stores its tool's observation as JSON (``{"kind": "TerminalObservation",
"content": [...], "is_error": false, ...}``). The SDK does not send that ``content`` as it is:
each observation class renders itself (``Observation.to_llm_content``). This module does the
same from the stored JSON, one renderer per observation kind, for the tools that ship with
openhands-sdk / openhands-tools 1.58:

* every kind: ``[An error occurred during execution.]\\n`` first when ``is_error`` is set, then
  the content (the SDK's default, which the file editor, task tracker, glob, grep, think,
  finish, apply_patch, MCP and the other tools use: their text is written into ``content``
  when the tool runs);
* ``TerminalObservation``: prefix + output + suffix, then the working directory, the Python
  interpreter and the exit code when known, cut at 30,000 characters;
* ``BrowserObservation``: the page text cut at 50,000 characters, then the screenshot;
* ``TaskObservation``, ``ConsultTomObservation``, ``SleeptimeComputeObservation``: their own
  headers.

Renderers return content parts (:class:`Text`, :class:`Image`); the 50,000-character cap on
every tool text is applied later, when a message is serialised (as the SDK does).

Where the SDK would save a long output (or a screenshot) to ``full_output_save_dir`` and name
the file in its notice, we name the same file (the SDK's hash-based name) but write nothing:
the SDK wrote it in the agent's workspace when it first rendered the observation.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ERROR_HEADER = "[An error occurred during execution.]\n"

TEXT_LIMIT = 50_000  # the SDK's DEFAULT_TEXT_CONTENT_LIMIT: every tool text sent
TERMINAL_LIMIT = 30_000  # openhands-tools' MAX_CMD_OUTPUT_SIZE

TRUNCATE_NOTICE = (
    "<response clipped><NOTE>Due to the max output limit, only part of the full "
    "response has been shown to you.</NOTE>"
)
TRUNCATE_NOTICE_SAVED = (
    "<response clipped><NOTE>Due to the max output limit, only part of the full "
    "response has been shown to you. The complete output has been saved to "
    "{file_path} - you can use other tools to view the full content (truncated "
    "part starts around line {line_num}).</NOTE>"
)


@dataclass(slots=True)
class Text:
    text: str
    cache: bool = False


@dataclass(slots=True)
class Image:
    urls: list[str]
    cache: bool = False


Part = Text | Image


def truncate(text: str, limit: int, save_dir: str | None = None, prefix: str = "output") -> str:
    """Keep the head and the tail of ``text`` around a notice, ``limit`` characters in all.

    The SDK's rule: the head gets the odd character; a notice that does not fit is itself cut;
    with ``save_dir`` the notice names the file the full text was saved to and the line where
    the cut starts.
    """
    if not limit or limit < 0 or len(text) <= limit:
        return text
    if len(TRUNCATE_NOTICE) >= limit:
        return TRUNCATE_NOTICE[:limit]
    room = limit - len(TRUNCATE_NOTICE)
    head = (room + 1) // 2
    notice = TRUNCATE_NOTICE
    if save_dir:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]
        path = Path(save_dir) / f"{prefix}_output_{digest}.txt"
        line = len(text[:head].splitlines()) + 1
        notice = TRUNCATE_NOTICE_SAVED.format(file_path=path, line_num=line)
    if len(notice) >= limit:
        return notice[:limit]
    left = limit - len(notice)
    head = min(head, left)
    tail = left - head
    return text[:head] + notice + (text[-tail:] if tail > 0 else "")


def content_parts(items: Any) -> list[Part]:
    """The stored ``content`` list as parts (unknown item types are skipped, as the SDK
    cannot load them either)."""
    parts: list[Part] = []
    if isinstance(items, str):
        return [Text(items)]
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "text")
        if kind == "text":
            parts.append(Text(str(item.get("text", "")), bool(item.get("cache_prompt", False))))
        elif kind == "image":
            parts.append(Image([str(u) for u in item.get("image_urls") or []], bool(item.get("cache_prompt", False))))
    return parts


def plain_text(obs: dict[str, Any]) -> str:
    """``Observation.text``: the content's texts joined with nothing between them (the texts
    of ``content_parts``, without making its parts: a long view renders tens of thousands)."""
    items = obs.get("content")
    if isinstance(items, str):
        return items
    if not isinstance(items, list):
        return ""
    if len(items) == 1 and type(items[0]) is dict and items[0].get("type", "text") == "text":
        return str(items[0].get("text", ""))  # (most outputs: one text)
    return "".join([str(item.get("text", "")) for item in items
                    if isinstance(item, dict) and item.get("type", "text") == "text"])


def _error_first(obs: dict[str, Any]) -> list[Part]:
    return [Text(ERROR_HEADER)] if obs.get("is_error") else []


def render_default(obs: dict[str, Any]) -> list[Part]:
    return _error_first(obs) + content_parts(obs.get("content"))


def render_terminal(obs: dict[str, Any]) -> list[Part]:
    meta = obs.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return terminal_parts(plain_text(obs), meta.get("prefix"), meta.get("suffix"), meta.get("working_dir"),
                          meta.get("py_interpreter_path"), meta.get("exit_code", -1),
                          obs.get("full_output_save_dir"), obs.get("is_error"))


def terminal_parts(output: str, prefix: Any, suffix: Any, working_dir: Any, py_interpreter_path: Any,
                   exit_code: Any, save_dir: Any, is_error: Any) -> list[Part]:
    """A terminal observation's parts from its fields (its stored dict's, or those of its
    ``records.TerminalRecord``)."""
    # Joined once: the output is most of the text, and each ``+=`` would copy it again.
    pieces = [prefix or "", output, suffix or ""]
    if working_dir:
        pieces.append(f"\n[Current working directory: {working_dir}]")
    if py_interpreter_path:
        pieces.append(f"\n[Python interpreter: {py_interpreter_path}]")
    if exit_code != -1:
        pieces.append(f"\n[Command finished with exit code {exit_code}]")
    text = "".join(pieces)
    cut = text if len(text) <= TERMINAL_LIMIT else truncate(text, TERMINAL_LIMIT, save_dir, "terminal")
    return [Text(ERROR_HEADER), Text(cut)] if is_error else [Text(cut)]


_IMAGE_PREFIXES = {"/9j/": "image/jpeg", "iVBORw0KGgo": "image/png", "R0lGODlh": "image/gif", "UklGR": "image/webp"}


def _image_type(data: str) -> str:
    for prefix, mime in _IMAGE_PREFIXES.items():
        if data.startswith(prefix):
            return mime
    return "image/png"


def _screenshot_path(data: str, save_dir: str) -> str | None:
    """Where the SDK saves a screenshot; None where its save would fail (not base64)."""
    try:
        base64.b64decode(data)
    except (binascii.Error, ValueError):
        return None
    ext = _image_type(data).split("/")[-1]
    ext = "jpg" if ext == "jpeg" else ext
    digest = hashlib.sha256(data.encode("utf-8")).hexdigest()[:8]
    return str(Path(save_dir) / f"browser_screenshot_{digest}.{ext}")


def render_browser(obs: dict[str, Any]) -> list[Part]:
    parts = _error_first(obs)
    save_dir = obs.get("full_output_save_dir")
    text = plain_text(obs)
    if text:
        parts.append(Text(truncate(text, TEXT_LIMIT, save_dir, "browser")))
    shot = obs.get("screenshot_data")
    if shot:
        if save_dir:
            path = _screenshot_path(shot, save_dir)
            if path:
                parts.append(Text(f"Screenshot saved to: {path}"))
        parts.append(Image([f"data:{_image_type(shot)};base64,{shot}"]))
    return parts


def render_task(obs: dict[str, Any]) -> list[Part]:
    info = f"Task ID: {obs.get('task_id')}\nSubagent: {obs.get('subagent')}\nStatus: {obs.get('status')}"
    return [Text(info)] + _error_first(obs) + content_parts(obs.get("content"))


def render_consult_tom(obs: dict[str, Any]) -> list[Part]:
    suggestions = obs.get("suggestions") or ""
    if not suggestions:
        return [Text("Tom agent did not provide suggestions.")]
    lines = [f"Tom agent's guidance:\n{suggestions}"]
    if obs.get("reasoning"):
        lines.append(f"\nReasoning: {obs['reasoning']}")
    if obs.get("confidence") is not None:
        lines.append(f"\nConfidence: {float(obs['confidence']):.0%}")
    return [Text("\n".join(lines))]


def render_sleeptime(obs: dict[str, Any]) -> list[Part]:
    n = obs.get("sessions_processed") or 0
    message = obs.get("message") or ""
    if n > 0:
        return [Text(f"Successfully indexed {n} conversation(s) for user modeling.\n{message}")]
    return [Text(f"Sleeptime compute completed.\n{message}")]


Renderer = Callable[[dict[str, Any]], list[Part]]

# Kinds with their own ``to_llm_content`` in SDK 1.58. The tools listed after them use the
# default; they are named here so that the table documents every tool that ships with the SDK.
RENDERERS: dict[str, Renderer] = {
    "TerminalObservation": render_terminal,
    "BrowserObservation": render_browser,
    "TaskObservation": render_task,
    "ConsultTomObservation": render_consult_tom,
    "SleeptimeComputeObservation": render_sleeptime,
    **{
        kind: render_default
        for kind in (
            "FileEditorObservation",
            "PlanningFileEditorObservation",
            "TaskTrackerObservation",
            "GlobObservation",
            "GrepObservation",
            "ThinkObservation",
            "FinishObservation",
            "ApplyPatchObservation",
            "MCPToolObservation",
            "DelegateObservation",
            "ClientToolObservation",
            "InvokeSkillObservation",
            "VisionInspectObservation",
            "SwitchLLMObservation",
            "ClassifyAndSwitchLLMObservation",
            "WorkflowObservation",
            "AskOracleObservation",
            "StartChildConversationObservation",
            "EditObservation",
            "WriteFileObservation",
            "ReadFileObservation",
            "ListDirectoryObservation",
        )
    },
}


def render(obs: dict[str, Any]) -> list[Part]:
    """The parts the SDK's ``to_llm_content`` gives for a stored observation.

    An unknown kind gets the SDK's default. An observation without any ``content`` key was not
    written by the SDK (whose observations always carry one); it is shown as its JSON fields,
    so that a legacy import loses nothing.
    """
    if "content" not in obs:
        import json

        shown = {k: v for k, v in obs.items() if k != "kind"}
        return _error_first(obs) + [Text(json.dumps(shown, ensure_ascii=False))]
    return RENDERERS.get(str(obs.get("kind", "")), render_default)(obs)
