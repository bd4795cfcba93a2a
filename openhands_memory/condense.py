"""Running a condenser against a stored conversation and writing what it decides.

A Condensation's event row, condensation row, forgotten ranges and the ledger rows of the
LLM calls that produced it are written in one ``BEGIN IMMEDIATE`` transaction, which
refuses, writing nothing, if another condensation landed after the view was read.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Sequence

from .errors import ConcurrentCondensation
from .events import Condensation
from .view import View

if TYPE_CHECKING:
    from .storage import Session

    from .condensers.base import Condenser
    from .store import Conversation

def record_calls(
    db: "Session", conversation_id: str, calls: Sequence[Any], condensation_id: int | None
) -> None:
    """Ledger rows for LLM calls (``condensers.llm_base.LedgerEntry``).

    ``condensation_id`` goes on the calls whose reply went into that condensation (``produced``,
    which a reply flagged ``bad_response`` can still be when its text was used); None elsewhere.
    """
    now = datetime.now(timezone.utc).isoformat()
    db.insert_llm_calls(
        [
            (
                conversation_id,
                condensation_id if c.produced else None,
                now,
                c.strategy,
                c.purpose,
                c.call.model,
                c.call.prompt_tokens,
                c.call.completion_tokens,
                c.call.cost_usd,
                c.call.latency_s,
                c.call.outcome,
                c.call.error,
                c.call.response_id,
                c.call.attempts,
            )
            for c in calls
        ],
    )


def write_condensation(
    conversation: "Conversation", cond: Condensation, view: View, calls: Sequence[Any] = ()
) -> int:
    """Store ``cond`` (made from ``view``) and its ledger rows; returns its id."""
    with conversation.store.writing(conversation.id) as db:
        latest = db.latest_condensation(conversation.id)
        if latest != view.last_condensation:
            raise ConcurrentCondensation(
                f"condensation {latest} landed in conversation {conversation.id!r} after the view "
                f"(up to event {view.upto}) was read; nothing was written: condense again from a "
                "fresh view"
            )
        (seq,) = conversation.insert(db, [cond])
        record_calls(db, conversation.id, calls, seq)
    conversation.committed([cond], [seq])
    return seq


def condense(
    conversation: "Conversation", condenser: "Condenser", *, dry_run: bool = False
) -> View | Condensation:
    """Condense the conversation's current view; store the result unless ``dry_run``.

    Every LLM call is recorded in the ledger, even when nothing else is written: failed
    calls, and calls whose reply ended up in no stored condensation, with condensation_id NULL.
    """
    view = conversation.view()
    result: View | Condensation | None = None
    try:
        if dry_run:
            with conversation.holding_writes():
                result = condenser.condense(view)
        else:
            result = condenser.condense(view)
    finally:
        calls = condenser.take_calls()
        if calls and not dry_run:
            stored = isinstance(result, Condensation)
            loose = [c for c in calls if not (stored and c.produced)]
            if loose:
                with conversation.store.writing() as db:
                    record_calls(db, conversation.id, loose, None)
            calls = [c for c in calls if stored and c.produced]
    if isinstance(result, Condensation) and not dry_run:
        write_condensation(conversation, result, view, calls)
    return result


def step(conversation: "Conversation", condenser: "Condenser") -> View:
    """The agent-loop helper: condense if needed, store it, and return the view to send."""
    result = condense(conversation, condenser)
    if isinstance(result, Condensation):
        return conversation.view()
    return result
