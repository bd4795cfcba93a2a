"""Events an OpenHands agent server sent before their parents (revision 0017): the rows of
``ingest_pending``, which ``io/agent_server.py`` writes and drains inside its transactions."""

from __future__ import annotations

from typing import Sequence

from .driver import Driver, chunks


class IngestStatements(Driver):
    """The agent server's early events: statements over the shared driver."""

    def put_pending(self, cid: str, rows: Sequence[tuple[str, str, str, str]]) -> None:
        """Keep ``(uid, parent_uid, received_at, payload)`` rows after those kept already, in
        this order; a uid kept already stays as it was (a second delivery)."""
        start = self.one("SELECT COALESCE(MAX(position), 0) FROM ingest_pending WHERE conversation_id = ?", (cid,))
        self.executemany(
            "INSERT INTO ingest_pending (conversation_id, uid, position, parent_uid, received_at, payload) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (conversation_id, uid) DO NOTHING",
            [(cid, uid, start + k + 1, parent, at, payload) for k, (uid, parent, at, payload) in enumerate(rows)],
        )

    def pending(self, cid: str) -> list[tuple[str, str]]:
        """``(uid, parent_uid)`` of the conversation's waiting events, in arrival order."""
        return [(r[0], r[1]) for r in self.all(
            "SELECT uid, parent_uid FROM ingest_pending WHERE conversation_id = ? ORDER BY position", (cid,))]

    def pending_payloads(self, cid: str, uids: Sequence[str]) -> dict[str, str]:
        """The JSON each of these waiting events came as."""
        found: dict[str, str] = {}
        for chunk in chunks(list(uids), 500):
            found.update((r[0], r[1]) for r in self.all(
                f"SELECT uid, payload FROM ingest_pending WHERE conversation_id = ? "
                f"AND uid IN ({', '.join('?' for _ in chunk)})",
                (cid, *chunk),
            ))
        return found

    def pending_uids(self, cid: str, uids: Sequence[str]) -> set[str]:
        """Which of ``uids`` wait in ``ingest_pending``."""
        found: set[str] = set()
        for chunk in chunks(list(uids), 500):
            found.update(r[0] for r in self.all(
                f"SELECT uid FROM ingest_pending WHERE conversation_id = ? AND uid IN ({', '.join('?' for _ in chunk)})",
                (cid, *chunk),
            ))
        return found

    def drop_pending(self, cid: str, uids: Sequence[str]) -> None:
        for chunk in chunks(list(uids), 500):
            self.execute(
                f"DELETE FROM ingest_pending WHERE conversation_id = ? AND uid IN ({', '.join('?' for _ in chunk)})",
                (cid, *chunk),
            )

    def pending_count(self, cid: str) -> int:
        return int(self.one("SELECT COUNT(*) FROM ingest_pending WHERE conversation_id = ?", (cid,)))

    def pending_counts(self) -> dict[str, int]:
        """Each conversation with waiting events: how many wait."""
        return {r[0]: int(r[1]) for r in self.all(
            "SELECT conversation_id, COUNT(*) FROM ingest_pending GROUP BY conversation_id", ())}
