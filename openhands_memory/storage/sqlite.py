"""The SQLite recorder: one file, WAL, writes in ``BEGIN IMMEDIATE``.

``BEGIN IMMEDIATE`` takes the file's write lock up front, so "next id = MAX(id) + 1" cannot
race another process. ``PRAGMA data_version`` changes when another connection commits, which
is how a view cache learns that it must read again.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from .. import database
from .recorder import Recorder
from .session import IntegrityViolation, Session


class SqliteSession(Session):
    def touch(self, cid: str) -> Any:
        # Our own commit leaves data_version as it is, and while this transaction holds the
        # write lock nobody else can commit: the value now is the value after our commit.
        return self.conn.execute("PRAGMA data_version").fetchone()[0]

    def file_problems(self, full: bool) -> list[str]:
        if not full:
            return []
        found = [r[0] for r in self.conn.execute("PRAGMA integrity_check")]
        problems = [] if found == ["ok"] else ["integrity: " + "; ".join(found[:5])]
        broken = self.conn.execute("PRAGMA foreign_key_check").fetchall()
        if broken:
            tables = ", ".join(sorted({r[0] for r in broken}))
            problems.append(f"foreign keys: {len(broken)} row(s) point at missing rows (tables: {tables})")
        return problems

    def translate(self, error: Exception) -> None:
        if isinstance(error, sqlite3.IntegrityError):
            raise IntegrityViolation(str(error)) from None


class SqliteRecorder(Recorder):
    backend = "sqlite"

    def __init__(self, path: Path, *, durability: database.Durability = "normal", readonly: bool = False):
        super().__init__()
        self.label = str(path)
        self.readonly = readonly
        # Read-only: a query-only connection that is safe beside writers and leaves no files
        # behind (see database.connect_readonly).
        self.conn = database.connect_readonly(path) if readonly else database.connect(path, durability)
        self._session = SqliteSession(self.conn)

    def session(self) -> Session:
        return self._session

    def _begin_write(self, session: Session, conversation_id: str | None) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def _begin_read(self, session: Session) -> None:
        self.conn.execute("BEGIN")

    def _commit(self, session: Session) -> None:
        self.conn.execute("COMMIT")

    def _rollback(self, session: Session) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    def version(self, conversation_id: str) -> Any:
        with self._lock:
            return self.conn.execute("PRAGMA data_version").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self.conn.close()
