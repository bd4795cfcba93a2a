"""The statements behind inspection (``openhands_memory/inspection/``): sizes, statistics,
history pages and the doctor's checks. A mixin of ``Session``, so both backends share them.

None of these runs on an agent's hot path; each reads what it reports and no more (sizes come
from the ends of the primary key, visible counts from the visible intervals), and whatever
could be large is returned a page at a time.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from ..events import OBSERVATION_KINDS
from ..ranges import Run

# Kinds that answer a tool call.
_RESULT_LIST = ", ".join(f"'{k}'" for k in sorted(OBSERVATION_KINDS))


class InspectionQueries:
    """Statements for inspection; mixed into ``Session`` (``execute``/``all``/``one``)."""

    execute: Any
    all: Any
    one: Any
    over_intervals: Any

    # --- sizes ---------------------------------------------------------------------------

    def event_span(self, cid: str) -> tuple[int, int | None, int | None]:
        """(rows, lowest id, highest id): the count walks the primary key, nothing else."""
        count, low, high = self.execute(
            "SELECT COUNT(*), MIN(id), MAX(id) FROM event WHERE conversation_id = ?", (cid,)
        ).fetchone()
        return count, low, high

    def timestamp_of(self, cid: str, seq: int) -> str | None:
        return self.one("SELECT timestamp FROM event WHERE conversation_id = ? AND id = ?", (cid, seq))

    def condensation_count(self, cid: str) -> int:
        return self.one("SELECT COUNT(*) FROM condensation WHERE conversation_id = ?", (cid,))

    def visible_counts(self, cid: str, intervals: Sequence[Run]) -> tuple[int, int, int]:
        """(LLM-visible rows, their cached tokens, how many are counted) in ``intervals``."""
        visible = tokens = counted = 0
        for n, t, c in self.over_intervals(
            cid, intervals, "COUNT(*), SUM(ev.token_count), COUNT(ev.token_count)", " AND ev.llm_visible",
            ordered=False,
        ):
            visible, tokens, counted = visible + n, tokens + (t or 0), counted + c
        return visible, tokens, counted

    # --- statistics ----------------------------------------------------------------------

    @staticmethod
    def _scope(ids: Sequence[str] | None, column: str = "conversation_id") -> tuple[str, tuple]:
        if ids is None:
            return "", ()
        return f" WHERE {column} IN ({', '.join('?' for _ in ids)})", tuple(ids)

    def condensation_totals(self, ids: Sequence[str] | None) -> list[tuple]:
        """(strategy, reason, count, tokens before, tokens after) by strategy and reason."""
        where, args = self._scope(ids)
        return self.all(
            f"SELECT strategy, reason, COUNT(*), SUM(tokens_before), SUM(tokens_after) FROM condensation"
            f"{where} GROUP BY strategy, reason",
            args,
        )

    def forgotten_totals(self, ids: Sequence[str] | None) -> list[tuple]:
        """(strategy, reason, events forgotten) by strategy and reason."""
        where, args = self._scope(ids, "c.conversation_id")
        return self.all(
            "SELECT c.strategy, c.reason, SUM(f.end_id - f.start_id + 1) FROM forgotten_range f "
            "JOIN condensation c ON c.conversation_id = f.conversation_id AND c.id = f.condensation_id"
            f"{where} GROUP BY c.strategy, c.reason",
            args,
        )

    def llm_call_totals(self, ids: Sequence[str] | None) -> list[tuple]:
        """(model, purpose, outcome, calls, prompt, completion tokens, cost, latency)."""
        where, args = self._scope(ids)
        return self.all(
            "SELECT model, purpose, outcome, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), "
            f"SUM(cost_usd), SUM(latency_s) FROM llm_call{where} GROUP BY model, purpose, outcome",
            args,
        )

    # --- history -------------------------------------------------------------------------

    def condensation_rows(self, cid: str, start: int = 0, stop: int = 2**62) -> list[tuple]:
        """(id, strategy, reason, summary, offset, tokens before, tokens after) in [start, stop)."""
        return self.all(
            "SELECT id, strategy, reason, summary, summary_offset, tokens_before, tokens_after "
            "FROM condensation WHERE conversation_id = ? AND id >= ? AND id < ? ORDER BY id",
            (cid, start, stop),
        )

    # --- the doctor ----------------------------------------------------------------------

    def id_gaps(self, cid: str, limit: int = 20) -> list[tuple[int, int]]:
        """(id, next id) pairs where the next id is not id + 1."""
        return self.all(
            "SELECT id, nxt FROM (SELECT id, LEAD(id) OVER (ORDER BY id) AS nxt FROM event "
            "WHERE conversation_id = ?) gaps WHERE nxt != id + 1 LIMIT ?",
            (cid, limit),
        )

    def unpaired_calls(self, cid: str, after: int = -1) -> list[tuple]:
        """Tool call ids (of events after ``after``) without exactly one action and one result:
        (call id, actions, results, first action id, tool name)."""
        return self.all(
            "SELECT tool_call_id, SUM(CASE WHEN kind = 'ActionEvent' THEN 1 ELSE 0 END), "
            f"SUM(CASE WHEN kind IN ({_RESULT_LIST}) THEN 1 ELSE 0 END), "
            "MIN(CASE WHEN kind = 'ActionEvent' THEN id END), MAX(tool_name) "
            "FROM event WHERE conversation_id = ? AND id > ? AND tool_call_id IS NOT NULL "
            "GROUP BY tool_call_id "
            "HAVING SUM(CASE WHEN kind = 'ActionEvent' THEN 1 ELSE 0 END) != 1 "
            f"OR SUM(CASE WHEN kind IN ({_RESULT_LIST}) THEN 1 ELSE 0 END) != 1 ORDER BY MIN(id)",
            (cid, after),
        )

    def result_ids(self, cid: str, call_id: str) -> list[int]:
        return [r[0] for r in self.all(
            f"SELECT id FROM event WHERE conversation_id = ? AND tool_call_id = ? AND kind IN ({_RESULT_LIST}) "
            "ORDER BY id",
            (cid, call_id),
        )]

    def action_batch(self, cid: str, action_id: int) -> tuple[str | None, str | None, bool]:
        """(LLM response id, timestamp, whether an action of a later response follows) of the
        action ``action_id``: the doctor's test of whether its tool may still be running."""
        response, stamp = self.execute(
            "SELECT llm_response_id, timestamp FROM event WHERE conversation_id = ? AND id = ?", (cid, action_id)
        ).fetchone()
        # An action without a response id is a batch of its own: any later action follows it.
        other, args = ("", ()) if response is None else (" AND (llm_response_id IS NULL OR llm_response_id != ?)",
                                                          (response,))
        later = self.one(
            f"SELECT MIN(id) FROM event WHERE conversation_id = ? AND id > ? AND kind = 'ActionEvent'{other}",
            (cid, action_id, *args),
        )
        return response, stamp, later is not None

    def hold(self, cid: str) -> None:
        """Inside a write begun without a conversation's id: hold ``cid``'s write lock until the
        transaction ends, as ``writing(cid)`` would (SQLite's ``BEGIN IMMEDIATE`` holds the
        whole file already; PostgreSQL overrides this)."""

    def condensation_ids(self, cid: str, after: int = -1) -> set[int]:
        return {r[0] for r in self.all(
            "SELECT id FROM condensation WHERE conversation_id = ? AND id > ?", (cid, after)
        )}

    def kinds_of(self, cid: str, ids: Sequence[int]) -> dict[int, str]:
        out: dict[int, str] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            out.update(self.all(
                f"SELECT id, kind FROM event WHERE conversation_id = ? AND id IN ({', '.join('?' for _ in chunk)})",
                (cid, *chunk),
            ))
        return out

    def condensation_events(self, cid: str, after: int = -1, page: int = 200) -> Iterator[tuple[int, str]]:
        """(id, payload) of every Condensation event after ``after``, a page at a time."""
        cursor = after
        while True:
            rows = self.all(
                "SELECT id, payload FROM event WHERE conversation_id = ? AND kind = 'Condensation' AND id > ? "
                "ORDER BY id LIMIT ?",
                (cid, cursor, page),
            )
            yield from rows
            if len(rows) < page:
                return
            cursor = rows[-1][0]

    def ranges_of(self, cid: str, condensation_id: int) -> list[Run]:
        return [(s, e) for s, e in self.all(
            "SELECT start_id, end_id FROM forgotten_range WHERE conversation_id = ? AND condensation_id = ? "
            "ORDER BY start_id",
            (cid, condensation_id),
        )]

    def range_owners(self, cid: str) -> set[int]:
        """The condensation ids that forgotten ranges point at."""
        return {r[0] for r in self.all(
            "SELECT DISTINCT condensation_id FROM forgotten_range WHERE conversation_id = ?", (cid,)
        )}

    def insert_ranges(self, cid: str, condensation_id: int, runs: Sequence[Run]) -> None:
        self.executemany(  # type: ignore[attr-defined]
            "INSERT INTO forgotten_range (conversation_id, condensation_id, start_id, end_id) VALUES (?, ?, ?, ?)",
            [(cid, condensation_id, s, e) for s, e in runs],
        )

    def delete_ranges(self, cid: str, condensation_id: int) -> None:
        self.execute(
            "DELETE FROM forgotten_range WHERE conversation_id = ? AND condensation_id = ?", (cid, condensation_id)
        )

    def file_problems(self, full: bool) -> list[str]:
        """What the database engine itself finds wrong (an empty list: nothing). SQLite:
        ``quick_check`` or, with ``full``, ``integrity_check`` and ``foreign_key_check``;
        PostgreSQL: with ``full``, the search index's texts."""
        return []
