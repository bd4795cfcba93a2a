"""openhands-memory as the storage and the condenser of an OpenHands SDK agent.

Install with ``pip install "openhands-memory[openhands]"`` (Python >= 3.12, as the SDK needs).

* ``DatabaseFileStore(path_or_url, conversation_id)``: the SDK's ``FileStore`` over this
  library's tables. Pass it as ``LocalConversation(..., file_store=...)``: every SDK event
  becomes an event row (its JSON the payload, its UUID the uid), ``base_state.json`` is kept
  with the conversation, and an SDK resume reads them back.
* ``SDKCondenser``: an SDK condenser that runs any of this library's strategies, built from
  OpenHands TOML (``SDKCondenser.from_toml``) or from a condenser object.
* ``recall_search`` / ``recall_read``: SDK tools (registered on import) with which the agent
  searches what its condensations hid and reads an event back, in its own conversation:
  ``Agent(tools=[Tool(name="recall_search"), Tool(name="recall_read")])``, or
  ``recall_agent_tools()``; ``RECALL_PROMPT`` says when to use them (see ``recall_tools.py``).
"""

from __future__ import annotations

import sys

if sys.version_info < (3, 12):  # the SDK's own floor; say so before its import fails obscurely
    raise ImportError(
        "openhands_memory.integrations.openhands_sdk needs Python >= 3.12 (the OpenHands SDK's "
        f"minimum); this is Python {sys.version_info.major}.{sys.version_info.minor}"
    )
try:
    import openhands.sdk  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "openhands_memory.integrations.openhands_sdk needs the OpenHands SDK: "
        'pip install "openhands-memory[openhands]"'
    ) from e

from .condenser import SDKCondenser
from .file_store import DatabaseFileStore
from .recall_tools import (
    RECALL_PROMPT,
    RecallReadAction,
    RecallReadObservation,
    RecallReadTool,
    RecallSearchAction,
    RecallSearchObservation,
    RecallSearchTool,
    recall_agent_tools,
)

__all__ = [
    "RECALL_PROMPT", "DatabaseFileStore", "RecallReadAction", "RecallReadObservation", "RecallReadTool",
    "RecallSearchAction", "RecallSearchObservation", "RecallSearchTool", "SDKCondenser", "recall_agent_tools",
]
