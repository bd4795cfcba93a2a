"""Model replies kept for reuse (revision 0009)."""

from __future__ import annotations

from .driver import Driver


class ReplyStatements(Driver):
    """Model replies kept for reuse: statements over the shared driver."""

    def llm_reply(self, key: str) -> str | None:
        """The reply kept under ``key`` (its JSON), or None."""
        return self.one("SELECT reply FROM llm_reply WHERE key = ?", (key,))

    def keep_llm_reply(self, key: str, model: str, reply: str, created_at: str) -> None:
        """Keep a reply (a second one under the same key changes nothing)."""
        self.execute("INSERT INTO llm_reply (key, model, reply, created_at) VALUES (?, ?, ?, ?) "
                     "ON CONFLICT (key) DO NOTHING", (key, model, reply, created_at))
