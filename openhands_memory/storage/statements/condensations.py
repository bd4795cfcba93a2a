"""Condensations and the hidden runs they leave (``storage/condensations.py``,
``storage/hidden.py``)."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from ... import ranges
from ...ranges import Run
from .driver import END, HIDDEN_LIVE, INSERT_CONDENSATION, INSERT_HIDDEN, INSERT_RANGE, Driver


class CondensationStatements(Driver):
    """Condensations and the hidden runs they leave: statements over the shared driver."""

    def insert_condensation(self, cid: str, seq: int, values: Sequence[Any], runs: Sequence[Run]) -> None:
        """The condensation row (``values``: summary, offset, strategy, reason, config JSON,
        tokens before, tokens after) and its forgotten ranges."""
        self.execute(INSERT_CONDENSATION, (cid, seq, *values))
        self.executemany(INSERT_RANGE, [(cid, seq, s, e) for s, e in runs])

    def latest_condensation(self, cid: str, upto: int = END) -> int | None:
        return self.one(
            "SELECT MAX(id) FROM condensation WHERE conversation_id = ? AND id <= ?", (cid, upto)
        )

    def forgotten_ranges(self, cid: str) -> list[tuple[int, int, int]]:
        """(condensation, start, end) of every forgotten range, by condensation then start."""
        return self.all(
            "SELECT condensation_id, start_id, end_id FROM forgotten_range WHERE conversation_id = ? "
            "ORDER BY condensation_id, start_id",
            (cid,),
        )

    def condensations_with_ranges(self, cid: str) -> list[tuple[int, int | None, int | None]]:
        """(condensation, start, end) rows, a condensation without ranges once with NULLs."""
        return self.all(
            "SELECT c.id, r.start_id, r.end_id FROM condensation c LEFT JOIN forgotten_range r "
            "ON r.conversation_id = c.conversation_id AND r.condensation_id = c.id "
            "WHERE c.conversation_id = ? ORDER BY c.id, r.start_id",
            (cid,),
        )

    def hidden_live(self, cid: str) -> list[Run]:
        return [(s, e) for s, e in self.all(HIDDEN_LIVE, (cid,))]

    def hidden_at(self, cid: str, condensation_id: int) -> list[Run]:
        return [(s, e) for s, e in self.all(
            "SELECT start_id, end_id FROM hidden_run WHERE conversation_id = ? AND from_id <= ? "
            "AND (until_id IS NULL OR until_id > ?) ORDER BY start_id",
            (cid, condensation_id, condensation_id),
        )]

    def any_visible(self, cid: str, lo: int, hi: int) -> bool:
        return self.one(
            "SELECT 1 FROM event WHERE conversation_id = ? AND id BETWEEN ? AND ? AND llm_visible LIMIT 1",
            (cid, lo, hi),
        ) is not None

    def close_hidden(self, cid: str, until: int, starts: Iterable[int]) -> None:
        self.executemany(
            "UPDATE hidden_run SET until_id = ? WHERE conversation_id = ? AND until_id IS NULL AND start_id = ?",
            [(until, cid, s) for s in starts],
        )

    def open_hidden(self, cid: str, since: int, runs: Iterable[Run]) -> None:
        self.executemany(INSERT_HIDDEN, [(cid, since, s, e, None) for s, e in runs])

    def hidden_rows(self, cid: str) -> list[tuple[int, int, int, int | None]]:
        """(from, start, end, until) of every hidden run row, sorted."""
        return sorted(self.all(
            "SELECT from_id, start_id, end_id, until_id FROM hidden_run WHERE conversation_id = ?", (cid,)
        ))

    def replace_hidden(self, cid: str, rows: Iterable[tuple[int, int, int, int | None]]) -> None:
        self.execute("DELETE FROM hidden_run WHERE conversation_id = ?", (cid,))
        self.executemany(INSERT_HIDDEN, [(cid, *r) for r in rows])
