"""Saved replays (``replay --save``): a report's JSON per run, listed newest first."""

from __future__ import annotations

from .driver import Driver


class ReplayStatements(Driver):
    """Saved replays: statements over the shared driver."""

    def insert_replay_run(self, cid: str, created_at: str, strategies: str, report: str) -> None:
        self.execute(
            "INSERT INTO replay_run (conversation_id, created_at, strategies, report) VALUES (?, ?, ?, ?)",
            (cid, created_at, strategies, report),
        )

    def replay_runs(self, cid: str, before: int, limit: int) -> list[tuple[int, str, str]]:
        """(id, created_at, strategies) of up to ``limit`` runs with ids below ``before``,
        newest first."""
        return self.all(
            "SELECT id, created_at, strategies FROM replay_run WHERE conversation_id = ? AND id < ? "
            f"ORDER BY id DESC LIMIT {int(limit)}",
            (cid, before),
        )

    def replay_run(self, cid: str, run: int) -> tuple[str, str] | None:
        """(created_at, report JSON) of one run."""
        row = self.execute(
            "SELECT created_at, report FROM replay_run WHERE conversation_id = ? AND id = ?", (cid, run)
        ).fetchone()
        return None if row is None else (row[0], row[1])
