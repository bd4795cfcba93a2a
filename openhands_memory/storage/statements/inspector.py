"""What the web inspector reads beyond the library's own answers: conversations a page at a
time by key, the columns of each event a timeline needs (never its payload unless a count is
missing), the condensations with their sizes, and a condensation's summarizer calls.

Every statement is read-only and bounded: pages by key (``id > ?``, never OFFSET), and the
timeline reads only rows above what it has already seen.
"""

from __future__ import annotations

from typing import Any, Sequence

from .driver import Driver, _json

#: How far from an event its tool call's other half is looked for (ids either side).
TOOL_REACH = 2_000


class InspectorStatements(Driver):
    """The inspector's statements over the shared driver."""

    def conversation_page(self, after: str, limit: int, like: str | None = None) -> list[tuple]:
        """(id, created_at, metadata, head, events, last id) of up to ``limit`` conversations
        with ids after ``after``, in id order; ``like``: only ids containing it."""
        where, args = "c.id > ?", [after]
        if like:
            where += " AND c.id LIKE ? ESCAPE '\\'"
            args.append("%" + like.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
        rows = self.all(
            "SELECT c.id, c.created_at, c.metadata, c.head, "
            "(SELECT MAX(e.id) FROM event e WHERE e.conversation_id = c.id) "
            f"FROM conversation c WHERE {where} ORDER BY c.id LIMIT {int(limit)}",
            args,
        )
        return [(i, created, _json(meta), head, last) for i, created, meta, head, last in rows]

    def conversation_counts(self, cid: str) -> tuple[int, int, int]:
        """(condensations, events with a parent jump (branch points), pin events)."""
        conds = self.one("SELECT COUNT(*) FROM condensation WHERE conversation_id = ?", (cid,))
        jumps = self.one("SELECT COUNT(*) FROM event WHERE conversation_id = ? AND parent_seq IS NOT NULL", (cid,))
        pins = self.one("SELECT COUNT(*) FROM event WHERE conversation_id = ? AND kind = 'PinEvent'", (cid,))
        return conds, jumps, pins

    def timeline_rows(self, cid: str, after: int, limit: int) -> list[tuple]:
        """(id, kind, source, llm_response_id, llm_visible, token_count, payload bytes when
        no count is cached) of the rows after ``after``, oldest first, at most ``limit``."""
        return self.all(
            "SELECT id, kind, source, llm_response_id, llm_visible, token_count, "
            f"CASE WHEN token_count IS NULL AND llm_visible THEN {self.byte_length('payload')} END "
            f"FROM event WHERE conversation_id = ? AND id > ? ORDER BY id LIMIT {int(limit)}",
            (cid, after),
        )

    def view_item_rows(self, cid: str, intervals: Sequence[tuple[int, int]]) -> list[tuple]:
        """(id, kind, tool_name, cached token count, payload bytes when there is no count) of
        the LLM-visible rows in ``intervals``: a view's items without their JSON."""
        return [tuple(r) for r in self.over_intervals(  # type: ignore[attr-defined]
            cid, intervals, "ev.id, ev.kind, ev.tool_name, ev.token_count, "
            f"CASE WHEN ev.token_count IS NULL THEN {self.byte_length('ev.payload')} END",
            " AND ev.llm_visible", ordered=False,
        )]

    def condensation_sizes(self, cid: str, after: int = -1, limit: int | None = None) -> list[tuple]:
        """(id, strategy, reason, LENGTH(summary), summary_offset, tokens before, tokens after)
        of the condensations after ``after``, oldest first (at most ``limit``)."""
        return self.all(
            "SELECT id, strategy, reason, LENGTH(summary), summary_offset, tokens_before, tokens_after "
            "FROM condensation WHERE conversation_id = ? AND id > ? ORDER BY id"
            + ("" if limit is None else f" LIMIT {int(limit)}"),
            (cid, after),
        )

    def condensation_detail(self, cid: str, seq: int) -> tuple | None:
        """(strategy, reason, summary, summary_offset, config, tokens before, tokens after)."""
        row = self.execute(
            "SELECT strategy, reason, summary, summary_offset, config, tokens_before, tokens_after "
            "FROM condensation WHERE conversation_id = ? AND id = ?",
            (cid, seq),
        ).fetchone()
        if row is None:
            return None
        row = tuple(row)
        return (*row[:4], _json(row[4]) if row[4] is not None else None, *row[5:])

    def ranges_after(self, cid: str, after: int) -> list[tuple[int, int, int]]:
        """(condensation, start, end) of the forgotten ranges of condensations after ``after``."""
        return self.all(
            "SELECT condensation_id, start_id, end_id FROM forgotten_range "
            "WHERE conversation_id = ? AND condensation_id > ? ORDER BY condensation_id, start_id",
            (cid, after),
        )

    def llm_calls_of(self, cid: str, condensation_ids: Sequence[int]) -> list[tuple[Any, ...]]:
        """The ledger's rows for those condensations: (condensation id, strategy, purpose,
        model, prompt tokens, completion tokens, cost, latency, outcome, error, attempts)."""
        if not condensation_ids:
            return []
        marks = ", ".join("?" for _ in condensation_ids)
        return self.all(
            "SELECT condensation_id, strategy, purpose, model, prompt_tokens, completion_tokens, cost_usd, "
            "latency_s, outcome, error, attempts FROM llm_call "
            f"WHERE conversation_id = ? AND condensation_id IN ({marks}) ORDER BY id",
            (cid, *condensation_ids),
        )

    def summarizer_cost(self, cid: str, before: int | None = None) -> float:
        """What the conversation's summarizer and ranking calls cost, in all, or for the
        condensations before event ``before`` (the ledger's rows are one per condensation
        attempt: they grow with condensations, not with events)."""
        if before is None:
            return self.one("SELECT COALESCE(SUM(cost_usd), 0) FROM llm_call WHERE conversation_id = ?", (cid,)) or 0.0
        return self.one(
            "SELECT COALESCE(SUM(cost_usd), 0) FROM llm_call WHERE conversation_id = ? AND condensation_id < ?",
            (cid, before),
        ) or 0.0

    def condensations_before(self, cid: str, before: int, limit: int) -> list[int]:
        """The ids of up to ``limit`` condensations before event ``before``, newest first."""
        return [r[0] for r in self.all(
            "SELECT id FROM condensation WHERE conversation_id = ? AND id < ? ORDER BY id DESC "
            f"LIMIT {int(limit)}",
            (cid, before),
        )]

    def condensations_upto(self, cid: str, at: int) -> int:
        """How many condensations were written at or before event ``at``."""
        return self.one("SELECT COUNT(*) FROM condensation WHERE conversation_id = ? AND id <= ?", (cid, at))

    def event_list(self, cid: str, after: int, limit: int, kinds: Sequence[str] = ()) -> list[tuple]:
        """(id, kind, source, timestamp, tool_name, llm_visible, token_count, payload) of up to
        ``limit`` rows after ``after``, oldest first; ``kinds``: only those."""
        where = "conversation_id = ? AND id > ?"
        if kinds:
            where += f" AND kind IN ({', '.join('?' for _ in kinds)})"
        return self.all(
            "SELECT id, kind, source, timestamp, tool_name, llm_visible, token_count, payload "
            f"FROM event WHERE {where} ORDER BY id LIMIT {int(limit)}",
            (cid, after, *kinds),
        )

    def tool_partner(self, cid: str, seq: int, tool_call_id: str) -> int | None:
        """The other half of a tool call (the result of an action, the action of a result),
        looked for within ``TOOL_REACH`` ids of it: tool_call_id has no index of its own, and a
        call's result follows it closely (a runtime answers a batch before the next call)."""
        return self.one(
            "SELECT MIN(id) FROM event WHERE conversation_id = ? AND id BETWEEN ? AND ? "
            "AND tool_call_id = ? AND id <> ?",
            (cid, seq - TOOL_REACH, seq + TOOL_REACH, tool_call_id, seq),
        )
