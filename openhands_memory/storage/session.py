"""A transaction on the database, and every statement the library runs inside one.

``Session`` holds the SQL the two backends share, written once with ``?`` placeholders; a
backend's subclass translates the placeholders and overrides the few statements its SQL
dialect spells differently. Nothing outside ``storage/`` sees a driver connection, and
driver errors leave here as the library's own (``IntegrityViolation`` below, or the errors
in ``errors.py``).

Hot statements carry planner hints, explained in docs/architecture.md ("Stable query
plans") and held by tests/test_query_plans.py.
"""

from __future__ import annotations

from .inspection import InspectionQueries
from .statements.condensations import CondensationStatements
from .statements.conversations import ConversationStatements
from .statements.driver import (
    END,
    INSERT_CONDENSATION,
    INSERT_EVENT,
    INSERT_RANGE,
    LOOP_EDGE,
    NON_NODE_KINDS,
    Driver,
    IntegrityViolation,
    chunks,
)
from .statements.events import EventStatements
from .statements.ingest import IngestStatements
from .statements.inspector import InspectorStatements
from .statements.ledger import LedgerStatements
from .statements.replays import ReplayStatements
from .statements.replies import ReplyStatements
from .statements.sdk_files import SdkFileStatements
from .statements.search import SearchStatements
from .statements.tokens import TokenStatements
from .statements.tree import TreeStatements
from .statements.view import ViewStatements

#: The statement groups ``Session`` is made of, in its bases' order (``contract.py`` reads them).
GROUPS = (
    InspectionQueries,
    ConversationStatements,
    EventStatements,
    CondensationStatements,
    ViewStatements,
    SearchStatements,
    TreeStatements,
    TokenStatements,
    LedgerStatements,
    ReplyStatements,
    SdkFileStatements,
    InspectorStatements,
    ReplayStatements,
    IngestStatements,
)


class Session(*GROUPS):  # type: ignore[misc]
    """One transaction's statements, every group's over one driver. Made by a recorder's
    ``reading()`` or ``writing()``."""


__all__ = [
    "END", "GROUPS", "INSERT_CONDENSATION", "INSERT_EVENT", "INSERT_RANGE", "LOOP_EDGE", "NON_NODE_KINDS",
    "Driver", "IntegrityViolation", "Session", "chunks",
]
