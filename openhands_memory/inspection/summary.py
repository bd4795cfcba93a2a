"""Sizes of conversations and statistics of their condensations and summarizer calls.

Every figure is read from the ends of an index or from the visible tail, so listing a
conversation of a million events costs what listing a short one does.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from ..storage import tree

if TYPE_CHECKING:
    from ..conversation import EventStore


@dataclass
class ConversationSummary:
    """One conversation's size. ``visible``: LLM-visible events no condensation has
    forgotten (the view before its well-formedness checks, without the summary);
    ``tokens``: their cached counts (None until a token-counting condenser counted them)."""

    id: str
    created_at: str
    events: int
    visible: int
    tokens: int | None
    tokens_counted_events: int
    condensations: int
    last_activity: str | None
    # What an OpenHands agent server said of it (``io/agent_server.py``): title, status,
    # agent, model, cost and tokens; None for a conversation that did not come from one.
    agent_server: dict[str, Any] | None = None
    # Events it sent that wait for a parent not delivered: the history has a gap.
    waiting: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def summaries(store: "EventStore", ids: Sequence[str] | None = None) -> list[ConversationSummary]:
    """Every conversation (or those in ``ids``), oldest first."""
    out = []
    with store.reading() as db:
        waiting = db.pending_counts()
        for cid, created, meta in db.conversations():
            if ids is not None and cid not in ids:
                continue
            last = db.last_seq(cid)
            visible, tokens, counted = db.visible_counts(cid, tree.visible_now(db, cid))
            out.append(ConversationSummary(
                id=cid, created_at=created, events=last + 1, visible=visible,
                tokens=tokens if counted else None, tokens_counted_events=counted,
                condensations=db.condensation_count(cid),
                last_activity=db.timestamp_of(cid, last) if last >= 0 else None,
                agent_server=meta.get("agent_server") if isinstance(meta.get("agent_server"), dict) else None,
                waiting=waiting.get(cid, 0),
            ))
    return out


@dataclass
class Stats:
    """Totals over some conversations: their sizes, condensations by strategy and reason,
    and the summarizer calls of the ledger by model and purpose."""

    conversations: int
    events: int
    visible: int
    tokens: int | None
    condensations: int
    condensations_by_strategy: list[dict[str, Any]] = field(default_factory=list)
    llm_calls: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def stats(store: "EventStore", ids: Sequence[str] | None = None) -> Stats:
    """Statistics of the conversations in ``ids``, or of every conversation."""
    convs = summaries(store, ids)
    with store.reading() as db:
        forgotten = {(s, r): n for s, r, n in db.forgotten_totals(ids)}
        strategies = sorted(
            ({"strategy": s or "", "reason": r or "", "count": n, "forgotten": forgotten.get((s, r)) or 0,
              "tokens_before": tb, "tokens_after": ta}
             for s, r, n, tb, ta in db.condensation_totals(ids)),
            key=lambda row: -row["count"],
        )
        by_model: dict[tuple[str, str], dict[str, Any]] = {}
        for model, purpose, outcome, n, p, c, cost, latency in db.llm_call_totals(ids):
            row = by_model.setdefault((model, purpose), {
                "model": model, "purpose": purpose, "calls": 0, "prompt_tokens": None,
                "completion_tokens": None, "cost_usd": None, "latency_s": 0.0, "outcomes": {},
            })
            row["calls"] += n
            row["outcomes"][outcome] = n
            row["latency_s"] += latency or 0.0
            for key, value in (("prompt_tokens", p), ("completion_tokens", c), ("cost_usd", cost)):
                if value is not None:
                    row[key] = (row[key] or 0) + value
    calls = [by_model[k] for k in sorted(by_model)]
    for row in calls:
        row["outcomes"] = dict(sorted(row["outcomes"].items(), key=lambda kv: -kv[1]))
    tokens = [r.tokens for r in convs if r.tokens is not None]
    return Stats(
        conversations=len(convs),
        events=sum(r.events for r in convs),
        visible=sum(r.visible for r in convs),
        tokens=sum(tokens) if tokens else None,
        condensations=sum(r.condensations for r in convs),
        condensations_by_strategy=strategies,
        llm_calls={
            "calls": sum(c["calls"] for c in calls),
            "prompt_tokens": sum(c["prompt_tokens"] or 0 for c in calls),
            "completion_tokens": sum(c["completion_tokens"] or 0 for c in calls),
            "cost_usd": sum(c["cost_usd"] or 0 for c in calls) if any(c["cost_usd"] is not None for c in calls) else None,
            "by_model": calls,
        },
    )
