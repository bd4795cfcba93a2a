"""What the OpenHands SDK keeps beside events (revision 0005): base state and files."""

from __future__ import annotations

from .driver import Driver


class SdkFileStatements(Driver):
    """What the OpenHands SDK keeps beside events: statements over the shared driver."""

    def base_state(self, cid: str) -> str | None:
        return self.one("SELECT base_state FROM conversation WHERE id = ?", (cid,))

    def set_base_state(self, cid: str, text: str | None) -> bool:
        """False when there is no such conversation."""
        return self.execute("UPDATE conversation SET base_state = ? WHERE id = ?", (text, cid)).rowcount > 0

    def file_content(self, cid: str, path: str) -> bytes | None:
        raw = self.one("SELECT content FROM conversation_file WHERE conversation_id = ? AND path = ?", (cid, path))
        return None if raw is None else bytes(raw)

    def put_file(self, cid: str, path: str, content: bytes, updated_at: str) -> None:
        self.execute(
            "INSERT INTO conversation_file (conversation_id, path, content, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (conversation_id, path) DO UPDATE SET content = excluded.content, "
            "updated_at = excluded.updated_at",
            (cid, path, content, updated_at),
        )

    def file_paths(self, cid: str, prefix: str) -> list[str]:
        """Paths of the conversation's files that start with ``prefix``, in order."""
        # substr, not LIKE: SQLite's LIKE ignores case, and '%' or '_' in a path would match.
        return [r[0] for r in self.all(
            "SELECT path FROM conversation_file WHERE conversation_id = ? AND substr(path, 1, ?) = ? ORDER BY path",
            (cid, len(prefix), prefix),
        )]

    def delete_files(self, cid: str, path: str) -> int:
        """Delete the file at ``path`` and every file under ``path/``; how many went."""
        folder = path.rstrip("/") + "/"
        return self.execute(
            "DELETE FROM conversation_file WHERE conversation_id = ? AND (path = ? OR substr(path, 1, ?) = ?)",
            (cid, path, len(folder), folder),
        ).rowcount

