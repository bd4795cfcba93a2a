"""Token counts kept on events (``conversation/tokens.py``)."""

from __future__ import annotations

from typing import Iterable, Sequence

from ...ranges import Run
from .driver import Driver


class TokenStatements(Driver):
    """Token counts kept on events: statements over the shared driver."""

    def token_counts(self, cid: str, intervals: Sequence[Run]) -> dict[int, int | None]:
        """Every LLM-visible row's cached token count (None: not counted yet)."""
        return dict(self.over_intervals(cid, intervals, "ev.id, ev.token_count", " AND ev.llm_visible"))

    def set_token_counts(self, cid: str, counts: Iterable[tuple[int, int]]) -> None:
        self.executemany(
            "UPDATE event SET token_count = ? WHERE conversation_id = ? AND id = ?",
            [(n, cid, seq) for seq, n in counts],
        )

    def clear_token_counts(self, cid: str) -> None:
        self.execute(
            "UPDATE event SET token_count = NULL WHERE conversation_id = ? AND token_count IS NOT NULL",
            (cid,),
        )
