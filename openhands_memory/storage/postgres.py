"""The PostgreSQL recorder (psycopg 3): the same tables, the same SQL, one connection.

* **Gap-free ids under many writers.** A write transaction for a conversation first takes a
  transaction-scoped advisory lock on the conversation id
  (``pg_advisory_xact_lock(hashtextextended(id, 0))``): "next id = MAX(id) + 1" is then
  decided by one writer at a time, and the lock goes with the commit or rollback. The lock
  is keyed on the id, so it also covers a conversation being created.
* **Fresh views.** Every write transaction bumps ``conversation.version`` and reads the new
  value back inside the transaction; a view cache compares it with what it saw.
* **Reads** are ``REPEATABLE READ READ ONLY`` transactions: one snapshot per view.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Sequence

from ..database import Location
from .recorder import Recorder
from .session import INSERT_CONDENSATION, INSERT_RANGE, IntegrityViolation, Session


@functools.lru_cache(maxsize=512)
def _pyformat(text: str) -> str:
    """``?`` placeholders as psycopg's ``%s`` (the library's SQL has no ``%`` of its own and
    no ``?`` inside string literals)."""
    return re.sub(r"\?", "%s", text.replace("%", "%%"))


class PostgresSession(Session):
    # A plain join (or a LATERAL one, which the planner flattens) lets PostgreSQL read the
    # conversation's every row and filter them by interval. ``OFFSET 0`` keeps the LATERAL
    # subquery whole, so each interval is its own primary-key range scan. PostgreSQL needs
    # the ORDER BY, and has no unary-plus hint (nor needs one: see ``no_index``).
    interval_join = (
        "iv JOIN LATERAL (SELECT * FROM event WHERE conversation_id = ? "
        "AND id BETWEEN iv.s AND iv.e OFFSET 0) ev ON true"
    )
    interval_order = " ORDER BY ev.id"

    def sql(self, text: str) -> str:
        return _pyformat(text)

    def executemany(self, text: str, rows: Any) -> None:
        try:
            with self.conn.cursor() as cursor:
                cursor.executemany(self.sql(text), rows)
        except Exception as e:
            self.translate(e)
            raise

    def no_index(self, column: str) -> str:
        return column

    def translate(self, error: Exception) -> None:
        import psycopg

        if isinstance(error, psycopg.errors.IntegrityError):
            raise IntegrityViolation(str(error).splitlines()[0]) from None

    def _guarded(self, run: Any) -> Any:
        """Run a write that may violate a constraint inside a savepoint, so that the
        transaction stays usable for explaining the violation (PostgreSQL aborts it)."""
        self.conn.execute("SAVEPOINT guard")
        try:
            result = run()
        except IntegrityViolation:
            self.conn.execute("ROLLBACK TO SAVEPOINT guard")
            raise
        self.conn.execute("RELEASE SAVEPOINT guard")
        return result

    def insert_conversation(self, cid: str, created_at: str, metadata: dict[str, Any]) -> None:
        import json

        self._guarded(lambda: self.execute(
            "INSERT INTO conversation (id, created_at, metadata) VALUES (?, ?, CAST(? AS JSON))",
            (cid, created_at, json.dumps(metadata)),
        ))

    def set_metadata(self, cid: str, metadata: dict[str, Any]) -> None:
        import json

        self.execute(
            "UPDATE conversation SET metadata = CAST(? AS JSON) WHERE id = ?", (json.dumps(metadata), cid)
        )

    def conversation_ids_like(self, prefix: str, limit: int) -> list[str]:
        return [r[0] for r in self.all(
            "SELECT id FROM conversation WHERE starts_with(id, ?) ORDER BY id LIMIT ?", (prefix, limit)
        )]

    def insert_events(self, rows: Sequence[tuple[Any, ...]]) -> None:
        self._guarded(lambda: super(PostgresSession, self).insert_events(rows))

    def insert_condensation(self, cid: str, seq: int, values: Sequence[Any], runs: Sequence[Any]) -> None:
        sql = INSERT_CONDENSATION.replace("?, ?, ?, ?, ?, ?, ?, ?, ?)", "?, ?, ?, ?, ?, ?, CAST(? AS JSON), ?, ?)")
        self.execute(sql, (cid, seq, *values))
        self.executemany(INSERT_RANGE, [(cid, seq, s, e) for s, e in runs])

    def touch(self, cid: str) -> Any:
        return self.one("UPDATE conversation SET version = version + 1 WHERE id = ? RETURNING version", (cid,))


class PostgresRecorder(Recorder):
    backend = "postgresql"

    def __init__(self, location: Location):
        import psycopg

        super().__init__()
        self.label = location.label
        # Autocommit: transactions are begun explicitly, as on SQLite.
        self.conn = psycopg.connect(location.driver_url, autocommit=True)
        self._session = PostgresSession(self.conn)

    def session(self) -> Session:
        return self._session

    def _begin_write(self, session: Session, conversation_id: str | None) -> None:
        self.conn.execute("BEGIN")
        if conversation_id is not None:
            self.conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (conversation_id,))

    def _begin_read(self, session: Session) -> None:
        self.conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

    def _commit(self, session: Session) -> None:
        self.conn.execute("COMMIT")

    def _rollback(self, session: Session) -> None:
        from psycopg.pq import TransactionStatus

        if self.conn.info.transaction_status != TransactionStatus.IDLE:
            self.conn.execute("ROLLBACK")

    def version(self, conversation_id: str) -> Any:
        with self._lock:
            row = self.conn.execute("SELECT version FROM conversation WHERE id = %s", (conversation_id,)).fetchone()
        return None if row is None else row[0]

    def close(self) -> None:
        with self._lock:
            self.conn.close()
