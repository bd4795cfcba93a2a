"""``recall_search`` and ``recall_read`` as OpenHands SDK tools: the agent searches what its
condensations hid, and reads an event back, in its own conversation only.

Give them to an agent by name, as the SDK's own tools are given (importing this package
registers them)::

    from openhands.sdk import Agent, LocalConversation, Tool
    from openhands_memory.integrations.openhands_sdk import DatabaseFileStore, SDKCondenser

    agent = Agent(llm=llm, tools=[Tool(name="recall_search"), Tool(name="recall_read")],
                  condenser=SDKCondenser.from_toml(...))
    LocalConversation(agent=agent, file_store=DatabaseFileStore(db, cid), conversation_id=cid, ...)

How a tool finds its conversation: the SDK resolves an agent's tools with the state of the
conversation they serve (``ToolDefinition.create(conv_state, **params)``). The conversation
is that state's, always: its id is ``conv_state.id``, never anything the model says. Its rows
are read through the ``DatabaseFileStore`` the state persists through (the SDK keeps it as
the state's file store, ``conv_state._fs``; 1.58 has no public accessor), sharing its
connection and its lock. A conversation persisted elsewhere can name the database instead:
``Tool(name="recall_search", params={"database": path_or_url})`` (the tool then opens a store
of its own; the URL is saved with the agent in ``base_state.json``, so prefer a URL without a
password). Neither: the agent refuses to start, saying so.

The tools' text is ``conversation.recall_tools``' (``run_recall_tool``), the same a litellm
agent gets from ``call_recall_tool``; a bad call (an unknown event, a bad scope, an id past
what storage holds, text that is not UTF-8) or a database's fault comes back as an
observation with ``is_error``, which the agent reads and corrects. (Arguments a tool does not
take the SDK itself refuses, before the tool runs: its actions forbid extra fields.)
Each tool brings ``RECALL_PROMPT`` as its ``prompt_guidance``, which the SDK adds to the
system prompt once.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, ClassVar, Self

from openhands.sdk.tool import (
    Action,
    Observation,
    Tool,
    ToolAnnotations,
    ToolDefinition,
    ToolExecutor,
    register_tool,
)
from pydantic import Field

from ...conversation import Conversation, EventStore
from ...conversation.recall import SCOPES
from ...conversation.recall_tools import (
    DEFAULT_LIMIT,
    DEFAULT_WINDOW,
    READ,
    READ_DESCRIPTION,
    RECALL_PROMPT,
    SEARCH,
    SEARCH_DESCRIPTION,
    run_recall_tool,
)
from .file_store import DatabaseFileStore

if TYPE_CHECKING:
    from openhands.sdk.conversation import LocalConversation
    from openhands.sdk.conversation.state import ConversationState

DATABASE_PARAM = "database"

ANNOTATIONS = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)


class RecallSearchAction(Action):
    """Search this conversation's events (by default those condensed out of the context)."""

    query: str = Field(
        description='Words, a "quoted phrase", or a fragment (3+ characters) of an identifier, path or error message.'
    )
    scope: str = Field(
        default="forgotten",
        description="forgotten: events condensed out of your context (default); visible: events you see now; all: both.",
        json_schema_extra={"enum": list(SCOPES)},
    )
    limit: int = Field(default=DEFAULT_LIMIT, description="How many events at most (up to 20).")
    tool: str | None = Field(default=None, description="Only calls to and results of this tool (e.g. terminal).")


class RecallSearchObservation(Observation):
    """The events found, one line each, tagged ``[event N]``."""


class RecallReadAction(Action):
    """Read one event of this conversation by its id."""

    event_id: int = Field(description="The event's id: the N of an [event N] tag.")
    window: int = Field(default=DEFAULT_WINDOW, description="How many neighbour ids to list on each side (up to 10).")


class RecallReadObservation(Observation):
    """The event's text, its tool call or result, and its neighbours' ids."""


class RecallExecutor(ToolExecutor):
    """Runs one recall tool on one conversation, the one it was made for."""

    def __init__(self, name: str, conversation: Conversation, *, guard: threading.RLock | None = None,
                 owned: EventStore | None = None):
        self.name = name
        self.conversation = conversation
        self._guard = guard  # the file store's lock, when reading through its connection
        self._owned = owned  # a store this executor opened, closed with it

    def _locked(self) -> AbstractContextManager[Any]:
        return self._guard if self._guard is not None else nullcontext()

    def __call__(self, action: Action, conversation: "LocalConversation | None" = None) -> Observation:
        result_type = RecallSearchObservation if self.name == SEARCH else RecallReadObservation
        if conversation is not None and str(conversation.state.id) != self.conversation.id:
            return result_type.from_text(
                f"Error: this {self.name} tool serves conversation {self.conversation.id}, "
                f"not {conversation.state.id}", is_error=True,
            )
        arguments = action.model_dump(include=set(type(action).model_fields) - {"kind"})
        # run_recall_tool checks every argument the model made (the SDK checked only their
        # types) and says a database's fault as an error text; anything else is a bug, and
        # raises to the SDK.
        with self._locked():
            result = run_recall_tool(self.conversation, self.name, arguments)
        return result_type.from_text(result.text, is_error=result.is_error)

    def close(self) -> None:
        if self._owned is not None:
            self._owned.close()
            self._owned = None


def executor_for(name: str, conv_state: "ConversationState | None", params: dict[str, Any]) -> RecallExecutor:
    """The executor of tool ``name`` for the conversation ``conv_state`` is the state of."""
    unknown = set(params) - {DATABASE_PARAM}
    if unknown:
        raise ValueError(f"{name} takes only the parameter {DATABASE_PARAM!r}, not {sorted(unknown)}")
    if conv_state is None:
        raise ValueError(f"{name} needs the state of the conversation it serves")
    cid = str(conv_state.id)
    database = params.get(DATABASE_PARAM)
    if database is not None:
        store = EventStore(database, readonly=True)  # recall only reads
        return RecallExecutor(name, Conversation(store, cid), owned=store)
    fs = getattr(conv_state, "_fs", None)
    if isinstance(fs, DatabaseFileStore) and fs.conversation_id == cid:
        return RecallExecutor(name, fs.conversation, guard=fs._guard)
    raise ValueError(
        f"{name} reads the conversation's rows: persist the conversation through "
        f"DatabaseFileStore (LocalConversation(file_store=...)), or name its database with "
        f"Tool(name={name!r}, params={{{DATABASE_PARAM!r}: path_or_url}})"
    )


class RecallSearchTool(ToolDefinition[RecallSearchAction, RecallSearchObservation]):
    """``recall_search``: search the conversation's events, by default the forgotten ones."""

    conversation_local: ClassVar[bool] = True

    @classmethod
    def create(cls, conv_state: "ConversationState | None" = None, **params: Any) -> Sequence[Self]:
        return [cls(
            description=SEARCH_DESCRIPTION,
            action_type=RecallSearchAction,
            observation_type=RecallSearchObservation,
            executor=executor_for(SEARCH, conv_state, params),
            annotations=ANNOTATIONS,
            prompt_guidance=RECALL_PROMPT,
        )]


class RecallReadTool(ToolDefinition[RecallReadAction, RecallReadObservation]):
    """``recall_read``: read one event of the conversation by its id."""

    conversation_local: ClassVar[bool] = True

    @classmethod
    def create(cls, conv_state: "ConversationState | None" = None, **params: Any) -> Sequence[Self]:
        return [cls(
            description=READ_DESCRIPTION,
            action_type=RecallReadAction,
            observation_type=RecallReadObservation,
            executor=executor_for(READ, conv_state, params),
            annotations=ANNOTATIONS,
            prompt_guidance=RECALL_PROMPT,
        )]


assert RecallSearchTool.name == SEARCH and RecallReadTool.name == READ
register_tool(RecallSearchTool.name, RecallSearchTool)
register_tool(RecallReadTool.name, RecallReadTool)


def recall_agent_tools(database: str | None = None) -> list[Tool]:
    """The two tools for ``Agent(tools=[..., *recall_agent_tools()])``. ``database``: the path or URL
    of the conversation's database, only for a conversation not persisted through
    ``DatabaseFileStore``."""
    params = {DATABASE_PARAM: str(database)} if database is not None else {}
    return [Tool(name=SEARCH, params=params), Tool(name=READ, params=params)]
