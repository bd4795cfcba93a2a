"""Reading a tool call: which tool it is, its arguments, the pages it visits."""

from __future__ import annotations

import json
import re
from typing import Any

from ...events import ActionEvent

# Tool names. OpenHands' SDK uses ``terminal`` and ``file_editor``. Its legacy CodeAct agent
# used ``execute_bash`` and ``str_replace_editor``.
TERMINAL_TOOLS = frozenset({"terminal", "execute_bash", "bash"})
EDITOR_TOOLS = frozenset({"file_editor", "str_replace_editor"})
EDITOR_READS = frozenset({"view"})
EDITOR_WRITES = frozenset({"create", "str_replace", "insert", "undo_edit"})


def tool_arguments(e: ActionEvent) -> dict[str, Any]:
    """The call's arguments. Bad or partial JSON is expected, so it never raises.

    The model's JSON comes first. Keys it lacks are filled from the parsed ``action``, both
    at the top level and under ``data``, which is where MCP actions keep them. If the JSON
    is unreadable, the ``action`` alone is used.
    """
    args: dict[str, Any] = {}
    try:
        parsed = json.loads(e.tool_call.arguments)
    except (ValueError, TypeError):
        parsed = None
    if isinstance(parsed, dict):
        args.update(parsed)
    action = e.action if isinstance(e.action, dict) else {}
    data = action.get("data")
    for source in (action, data if isinstance(data, dict) else {}):
        for k, v in source.items():
            if k != "kind":
                args.setdefault(k, v)
    return args


def arg(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    return value if isinstance(value, str) else ""


def tool_of(e: ActionEvent) -> str:
    return (e.tool_name or e.tool_call.name or "").strip().lower()


def is_browser(tool: str) -> bool:
    return tool.startswith("browser")


_GOTO = re.compile(r"""goto\(\s*['"]([^'"]+)['"]""")


def urls(args: dict[str, Any]) -> list[str]:
    url = arg(args, "url").strip()
    if url:
        return [url]
    # The legacy ``browser`` tool took BrowserGym code such as goto("https://…").
    return _GOTO.findall(arg(args, "code"))
