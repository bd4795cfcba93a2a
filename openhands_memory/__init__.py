"""openhands-memory: a durable, queryable, condensable event history for LLM agents, in an
SQLite file or a PostgreSQL database.

    from openhands_memory import EventStore
    store = EventStore("agent.db")
    conv = store.create_conversation()
    conv.append(event)          # -> its id: 0, 1, 2, ...
    view = conv.step(condenser) # condense if needed, then the view to send
    view.to_messages()          # the list litellm takes

Importing this package does not import litellm; it is loaded when a token count or a model
call first needs it.
"""

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
from .conversation import CondenseOutcome, Conversation, ConversationInfo, EventStore
from .view import View

__version__ = "0.1.0"

__all__ = [
    "ActionEvent",
    "AgentErrorEvent",
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
