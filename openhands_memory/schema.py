"""The tables. Alembic's revisions in ``migrations/`` must produce exactly this schema
(``tests/test_migrations.py`` runs ``alembic check`` to prove it).

Change a table here only together with a new revision; never edit an old revision.
"""

from __future__ import annotations

from typing import Any, Optional

from sqlalchemy import JSON, BigInteger, Boolean, Column, ForeignKeyConstraint, Index, Integer, LargeBinary, Text, text
from sqlmodel import Field, SQLModel

from .events import TOOL_KINDS


class ConversationRow(SQLModel, table=True):
    __tablename__ = "conversation"
    __table_args__ = (Index("ux_conversation_search_key", "search_key", unique=True),)

    id: str = Field(primary_key=True)
    created_at: str = Field(description="ISO 8601, UTC")
    meta: dict[str, Any] = Field(
        default_factory=dict, sa_column=Column("metadata", JSON, nullable=False)
    )
    # Bumped by every write transaction on PostgreSQL, so that view caches elsewhere can tell
    # (SQLite uses PRAGMA data_version instead, and leaves this at 0). Revision 0004.
    version: int = Field(
        default=0, sa_column=Column("version", BigInteger, nullable=False, server_default="0")
    )
    # The OpenHands SDK's base_state.json, byte for byte, for a conversation persisted through
    # DatabaseFileStore (revision 0005); NULL otherwise.
    base_state: Optional[str] = Field(default=None, sa_column=Column("base_state", Text, nullable=True))
    # HEAD of the history tree (revision 0006): NULL while it is the newest row (every linear
    # history), -1 when empty (the SDK's navigate_to(None)), else the leaf event's id.
    head: Optional[int] = Field(default=None, sa_column=Column("head", Integer, nullable=True))
    # The conversation's number in the SQLite search index's document ids (revision 0008,
    # storage/search.py); NULL on PostgreSQL, whose search indexes need none.
    search_key: Optional[int] = Field(default=None, sa_column=Column("search_key", Integer, nullable=True))


# A row that is not of a tool loop's kinds (``events.TOOL_KINDS``, sorted: revision 0014 spells
# the predicate so), or a thinking action, ends or starts a loop: the view seeks the nearest
# such row before each visible interval in the partial index ix_event_loop_edge. Comparisons,
# not ``kind NOT IN (...)``: SQLite builds an IN list's table again for each inserted row.
LOOP_EDGE_WHERE = f"({' AND '.join(f'kind <> {k!r}' for k in sorted(TOOL_KINDS))}) OR has_thinking"


class EventRow(SQLModel, table=True):
    """One event. ``id`` is the per-conversation sequence number 0, 1, 2, ... with no gaps."""

    __tablename__ = "event"
    __table_args__ = (
        ForeignKeyConstraint(["conversation_id"], ["conversation.id"], ondelete="CASCADE"),
        # External ids (the SDK's UUIDs) are unique within a conversation.
        Index("ux_event_uid", "conversation_id", "uid", unique=True),
        # Batch atomicity asks how many actions share a response id. Response ids are unique
        # across conversations in practice, so the key leaves the conversation id out: a
        # smaller key makes every action's insert cheaper (queries still filter by it).
        Index(
            "ix_event_response",
            "llm_response_id",
            sqlite_where=text("kind = 'ActionEvent'"),
            postgresql_where=text("kind = 'ActionEvent'"),
        ),
        Index(
            "ix_event_loop_edge",
            "conversation_id",
            "id",
            sqlite_where=text(LOOP_EDGE_WHERE),
            postgresql_where=text(LOOP_EDGE_WHERE),
        ),
        # The rows whose parent is not the row before them (revision 0006): a path to the
        # root is one seek here per branch on it.
        Index(
            "ix_event_jump",
            "conversation_id",
            "id",
            sqlite_where=text("parent_seq IS NOT NULL"),
            postgresql_where=text("parent_seq IS NOT NULL"),
        ),
        # The pins (revision 0007): every view reads them, and there are few or none.
        Index(
            "ix_event_pin",
            "conversation_id",
            "id",
            sqlite_where=text("kind = 'PinEvent'"),
            postgresql_where=text("kind = 'PinEvent'"),
        ),
        # Finding the newest request is a seek, not a scan.
        Index(
            "ix_event_request",
            "conversation_id",
            "id",
            sqlite_where=text("kind = 'CondensationRequest'"),
            postgresql_where=text("kind = 'CondensationRequest'"),
        ),
    )

    conversation_id: str = Field(primary_key=True)
    id: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    kind: str
    source: str
    timestamp: str
    uid: Optional[str] = None
    tool_call_id: Optional[str] = None
    tool_name: Optional[str] = None
    llm_response_id: Optional[str] = None
    has_thinking: bool = False
    llm_visible: bool = False
    token_count: Optional[int] = Field(default=None, description="cached; NULL until counted")
    payload: str = Field(sa_column=Column(Text, nullable=False), description="the event's JSON")
    # The parent's id when it is not the row before (a branch's first event); -1 for a new
    # root; NULL otherwise (revision 0006).
    parent_seq: Optional[int] = Field(default=None, sa_column=Column("parent_seq", Integer, nullable=True))
    # TRUE for a row the SDK never makes a tree node (a state update) that the next event
    # names no descendant of: it is carried inside a path's interval, but is not on the path
    # (a tool loop runs across it). NULL otherwise (revision 0006).
    detached: Optional[bool] = Field(default=None, sa_column=Column("detached", Boolean, nullable=True))


class CondensationRow(SQLModel, table=True):
    """What a Condensation event did, and why. Same id as its event row."""

    __tablename__ = "condensation"
    __table_args__ = (
        ForeignKeyConstraint(
            ["conversation_id", "id"], ["event.conversation_id", "event.id"], ondelete="CASCADE"
        ),
        # The view asks for the newest condensation that carries a summary.
        Index(
            "ix_condensation_summary",
            "conversation_id",
            "id",
            sqlite_where=text("summary IS NOT NULL AND summary_offset IS NOT NULL"),
            postgresql_where=text("summary IS NOT NULL AND summary_offset IS NOT NULL"),
        ),
    )

    conversation_id: str = Field(primary_key=True)
    id: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    summary: Optional[str] = None
    summary_offset: Optional[int] = None
    strategy: Optional[str] = None
    reason: Optional[str] = None
    config: Optional[dict[str, Any]] = Field(default=None, sa_column=Column(JSON))
    tokens_before: Optional[int] = None
    tokens_after: Optional[int] = None


class ForgottenRangeRow(SQLModel, table=True):
    """The ids one condensation forgot, as maximal inclusive runs."""

    __tablename__ = "forgotten_range"
    __table_args__ = (
        ForeignKeyConstraint(
            ["conversation_id", "condensation_id"],
            ["condensation.conversation_id", "condensation.id"],
            ondelete="CASCADE",
        ),
    )

    conversation_id: str = Field(primary_key=True)
    condensation_id: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    start_id: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    end_id: int


class HiddenRunRow(SQLModel, table=True):
    """A run of ids hidden from the model, canonical and temporal (revision 0003).

    Written by condensation ``from_id``; ``until_id`` is the condensation that merged it into
    a larger run, NULL while it is live. See ``hidden.py``.
    """

    __tablename__ = "hidden_run"
    __table_args__ = (
        ForeignKeyConstraint(
            ["conversation_id", "from_id"],
            ["condensation.conversation_id", "condensation.id"],
            ondelete="CASCADE",
        ),
        # A view on a branch reads the merged runs of its path's condensations: from this
        # index alone (the live ones come from ix_hidden_run_live).
        Index(
            "ix_hidden_run_path", "conversation_id", "from_id", "until_id", "start_id", "end_id",
            sqlite_where=text("until_id IS NOT NULL"),
            postgresql_where=text("until_id IS NOT NULL"),
        ),
        # The view reads the live runs: one range of this index, whatever the history.
        Index(
            "ix_hidden_run_live",
            "conversation_id",
            "start_id",
            sqlite_where=text("until_id IS NULL"),
            postgresql_where=text("until_id IS NULL"),
        ),
    )

    conversation_id: str = Field(primary_key=True)
    from_id: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    start_id: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    end_id: int
    until_id: Optional[int] = None


metadata = SQLModel.metadata
event_table = EventRow.__table__
conversation_table = ConversationRow.__table__
condensation_table = CondensationRow.__table__
forgotten_range_table = ForgottenRangeRow.__table__
hidden_run_table = HiddenRunRow.__table__


class LLMCallRow(SQLModel, table=True):
    """The ledger: one row per summarizer / ranking call, successful or not (revision 0002)."""

    __tablename__ = "llm_call"
    __table_args__ = (
        ForeignKeyConstraint(["conversation_id"], ["conversation.id"], ondelete="CASCADE"),
        Index("ix_llm_call_conversation", "conversation_id", "id"),
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    conversation_id: str
    condensation_id: Optional[int] = Field(default=None, description="the condensation it produced")
    created_at: str
    strategy: str
    purpose: str = Field(description="summary, structured_summary or attention")
    model: str
    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None
    cost_usd: Optional[float] = None
    latency_s: float
    outcome: str
    error: Optional[str] = None
    response_id: Optional[str] = None
    attempts: int = 1


llm_call_table = LLMCallRow.__table__


class LLMReplyRow(SQLModel, table=True):
    """Model replies kept for reuse, by a hash of the request (revision 0009): a replay that
    summarizes with a real model asks it once per distinct input (``llm/cache.py``)."""

    __tablename__ = "llm_reply"

    key: str = Field(primary_key=True, description="sha256 of the request: model, messages, tools")
    model: str
    reply: str = Field(description="the reply as JSON: text, tool calls, ids, and its call's cost")
    created_at: str


llm_reply_table = LLMReplyRow.__table__


class ConversationFileRow(SQLModel, table=True):
    """A file an OpenHands SDK conversation wrote through DatabaseFileStore that is neither an
    event nor base_state.json (revision 0005). ``path`` is relative to the conversation."""

    __tablename__ = "conversation_file"
    __table_args__ = (
        ForeignKeyConstraint(["conversation_id"], ["conversation.id"], ondelete="CASCADE"),
    )

    conversation_id: str = Field(primary_key=True)
    path: str = Field(primary_key=True)
    content: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    updated_at: str = Field(description="ISO 8601, UTC")


conversation_file_table = ConversationFileRow.__table__


class ReplayRunRow(SQLModel, table=True):
    """A replay saved by ``replay --save`` (revision 0016): what other strategies would have
    sent and cost at each recorded model call, as the report's JSON, for the web inspector to
    draw without calling a model."""

    __tablename__ = "replay_run"
    __table_args__ = (
        ForeignKeyConstraint(["conversation_id"], ["conversation.id"], ondelete="CASCADE"),
        Index("ix_replay_run_conversation", "conversation_id", "id"),
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    conversation_id: str
    created_at: str = Field(description="ISO 8601, UTC")
    strategies: str = Field(description="the strategies' labels, one a line")
    report: str = Field(sa_column=Column(Text, nullable=False), description="the replay.report.Replay as JSON")


replay_run_table = ReplayRunRow.__table__


class IngestPendingRow(SQLModel, table=True):
    """An event an OpenHands agent server sent before the event its ``parent_id`` names
    (revision 0017): kept as it came until that parent is stored (``io/agent_server.py``).
    ``position``: the order it came in, which is the order it is stored in."""

    __tablename__ = "ingest_pending"
    __table_args__ = (
        ForeignKeyConstraint(["conversation_id"], ["conversation.id"], ondelete="CASCADE"),
    )

    conversation_id: str = Field(primary_key=True)
    uid: str = Field(primary_key=True)
    position: int = Field(sa_column=Column(BigInteger, nullable=False))
    parent_uid: str
    received_at: str = Field(description="ISO 8601, UTC")
    payload: str = Field(sa_column=Column(Text, nullable=False))


ingest_pending_table = IngestPendingRow.__table__
