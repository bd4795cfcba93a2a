"""The conversations: rows of ``conversation``, their metadata, and the write's version mark."""

from __future__ import annotations

import json
from typing import Any

from ... import limits
from .driver import NEXT_SEARCH_KEY, Driver, _json


class ConversationStatements(Driver):
    """The conversations: statements over the shared driver."""

    def insert_conversation(self, cid: str, created_at: str, metadata: dict[str, Any]) -> None:
        limits.conversation_id(cid)  # every new conversation's row is made here (or in postgres/session.py's)
        self.execute(
            f"INSERT INTO conversation (id, created_at, metadata, search_key) VALUES (?, ?, ?, {NEXT_SEARCH_KEY})",
            (cid, created_at, json.dumps(metadata)),
        )

    def conversation_exists(self, cid: str) -> bool:
        return self.one("SELECT 1 FROM conversation WHERE id = ?", (cid,)) is not None

    def conversations(self) -> list[tuple[str, str, dict[str, Any]]]:
        rows = self.all("SELECT id, created_at, metadata FROM conversation ORDER BY created_at, id")
        return [(i, c, _json(m)) for i, c, m in rows]

    def conversation_ids_like(self, prefix: str, limit: int) -> list[str]:
        return [r[0] for r in self.all(
            "SELECT id FROM conversation WHERE id >= ? AND id < ? ORDER BY id LIMIT ?",
            (prefix, prefix + "\U0010ffff", limit),
        )]

    def delete_conversation(self, cid: str) -> bool:
        return self.execute("DELETE FROM conversation WHERE id = ?", (cid,)).rowcount > 0

    def metadata(self, cid: str) -> dict[str, Any] | None:
        raw = self.one("SELECT metadata FROM conversation WHERE id = ?", (cid,))
        return None if raw is None else _json(raw)

    def set_metadata(self, cid: str, metadata: dict[str, Any]) -> None:
        self.execute("UPDATE conversation SET metadata = ? WHERE id = ?", (json.dumps(metadata), cid))
