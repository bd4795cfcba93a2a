"""openhands-memory: a durable, queryable, condensable event history for LLM agents, in an
SQLite file or a PostgreSQL database.

    from openhands_memory import ChatHistory, EventStore
    h = ChatHistory("agent.db", "run-1", condenser="llm_summarizing")   # any agent loop:
    h.append({"role": "user", "content": "..."})                         # chat messages or
    h.messages()                                                         # Responses items

    store = EventStore("agent.db")                                       # or events
    conv = store.create_conversation()
    conv.append(event)          # -> its id: 0, 1, 2, ...
    view = conv.step(condenser) # condense if needed, then the view to send
    view.to_messages()          # the list litellm takes

Importing this package is cheap: the names below are imported when first used, and litellm
only when a model is called.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Each public name and the module that defines it. They are imported on first use
# (``__getattr__`` below): a command line's ``--version`` or ``--help`` needs none of them,
# and building the event models and the store's modules is most of this package's import.
_EXPORTS: dict[str, str] = {
    **dict.fromkeys((
        "ConcurrentCondensation", "ConfigError", "ConversationExists", "ConversationNotFound",
        "DuplicateEventId", "EventNotFound", "MalformedEvent", "NoCondensationAvailable",
        "NotOurDatabase", "OpenHandsMemoryError", "SchemaError", "SchemaTooNew", "SchemaTooOld",
        "UnknownEventKind",
    ), ".errors"),
    **dict.fromkeys((
        "ActionEvent", "AgentErrorEvent", "Condensation", "CondensationRequest",
        "CondensationSummaryEvent", "Event", "Message", "MessageEvent", "MessageToolCall",
        "ObservationEvent", "SystemPromptEvent", "TextContent", "ThinkingBlock",
        "UserRejectObservation", "event_from_dict", "event_from_json",
    ), ".events"),
    **dict.fromkeys(("CondenseOutcome", "Conversation", "ConversationInfo", "EventStore"), ".conversation"),
    "View": ".view",
    "ChatHistory": ".chat",
}

if TYPE_CHECKING:  # what a type checker and an IDE see: the same names, imported eagerly
    from .chat import ChatHistory
    from .conversation import CondenseOutcome, Conversation, ConversationInfo, EventStore
    from .errors import (
        ConcurrentCondensation,
        ConfigError,
        ConversationExists,
        ConversationNotFound,
        DuplicateEventId,
        EventNotFound,
        MalformedEvent,
        NoCondensationAvailable,
        NotOurDatabase,
        OpenHandsMemoryError,
        SchemaError,
        SchemaTooNew,
        SchemaTooOld,
        UnknownEventKind,
    )
    from .events import (
        ActionEvent,
        AgentErrorEvent,
        Condensation,
        CondensationRequest,
        CondensationSummaryEvent,
        Event,
        Message,
        MessageEvent,
        MessageToolCall,
        ObservationEvent,
        SystemPromptEvent,
        TextContent,
        ThinkingBlock,
        UserRejectObservation,
        event_from_dict,
        event_from_json,
    )
    from .view import View


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__version__ = "0.1.0"

__all__ = [
    "ActionEvent",
    "AgentErrorEvent",
    "ChatHistory",
    "ConcurrentCondensation",
    "CondenseOutcome",
    "Condensation",
    "CondensationRequest",
    "CondensationSummaryEvent",
    "ConfigError",
    "Conversation",
    "ConversationExists",
    "ConversationInfo",
    "ConversationNotFound",
    "DuplicateEventId",
    "Event",
    "EventNotFound",
    "EventStore",
    "MalformedEvent",
    "Message",
    "MessageEvent",
    "MessageToolCall",
    "NoCondensationAvailable",
    "NotOurDatabase",
    "ObservationEvent",
    "OpenHandsMemoryError",
    "SchemaError",
    "SchemaTooNew",
    "SchemaTooOld",
    "SystemPromptEvent",
    "TextContent",
    "ThinkingBlock",
    "UnknownEventKind",
    "UserRejectObservation",
    "View",
    "event_from_dict",
    "event_from_json",
]
