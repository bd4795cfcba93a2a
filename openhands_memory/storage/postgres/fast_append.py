"""The one-round-trip append through libpq itself, beside psycopg (see ``LibpqAppender``)."""

from __future__ import annotations

import functools
import re
import secrets
from typing import Any, Sequence

from .dialect import LOCK, append_sql, pyformat


@functools.lru_cache(maxsize=256)
def numbered(sql: str) -> bytes:
    """psycopg's ``%s`` placeholders as the server's own ``$1, $2, ...``."""
    counter = iter(range(1, 100_000))
    return re.sub(r"%s", lambda _: f"${next(counter)}", sql).replace("%%", "%").encode()


class LibpqAppender:
    """``PostgresRecorder.append`` through libpq itself (psycopg's ``pq`` layer): BEGIN, the
    lock, the INSERT, the batch count and COMMIT in one pipeline, with text parameters.

    It exists for speed alone. psycopg's pipeline (a generator per statement, a wait per
    send) costs this process about 250 µs of CPU per append and sends the statements in
    separate packets; this costs about 50 µs and sends them in one. ``named``: the
    statements are prepared on the connection the first time each is needed (``ohm_<tag>_lock``,
    ``ohm_<tag>_append_<n>``, the tag this appender's own), which saves the server parsing
    and planning the INSERT each time; only on the server's own session (the
    recorder judges it), since a prepared statement lives there, and a pooler in transaction
    mode hands that session to its next client (the tag keeps a name of ours from ever
    being another client's statement). Otherwise, and for good once a named statement goes
    missing twice, the statements are unnamed. The transaction is explicit, so that it runs at
    READ COMMITTED whatever the database's default (see ``append_sql``). It runs only on an
    idle connection outside psycopg's own pipeline, and leaves it idle again, or in a failed
    transaction the caller rolls back: psycopg never sees the difference."""

    def __init__(self, conn: Any, begin: str, *, named: bool = False):
        import select

        self.conn = conn
        self.pgconn = conn.pgconn
        self.begin = begin.encode()
        self.named = named
        self.prepared: set[bytes] = set()
        self.tag = b"ohm_" + secrets.token_hex(4).encode()
        #: The last append's COMMIT was sent: a failure after it may follow a commit.
        self.synced = False
        self.readable, self.writable = select.poll(), select.poll()
        self.readable.register(self.pgconn.socket, select.POLLIN)
        self.writable.register(self.pgconn.socket, select.POLLOUT)

    @staticmethod
    def usable(conn: Any) -> bool:
        pgconn = getattr(conn, "pgconn", None)
        return pgconn is not None and hasattr(pgconn, "enter_pipeline_mode") and hasattr(pgconn, "send_query_params")

    def _prepare(self, name: bytes, sql: str) -> None:
        import psycopg
        from psycopg import pq

        if name in self.prepared:
            return
        result = self.pgconn.prepare(name, numbered(sql))
        if result.status != pq.ExecStatus.COMMAND_OK:
            error = psycopg.errors.error_from_result(result, encoding=self.pgconn._encoding)
            # There already: ours (the tag is this appender's), prepared after the others
            # went missing and before the set of names was cleared (see append).
            if not isinstance(error, psycopg.errors.DuplicatePreparedStatement):
                raise error
        self.prepared.add(name)

    def _send(self, name: bytes, sql: str, values: list[bytes | None]) -> None:
        """One statement into the pipeline: prepared under ``name`` (before the pipeline), or
        unnamed."""
        if self.named:
            self.pgconn.send_query_prepared(name, values)
        else:
            self.pgconn.send_query_params(numbered(sql), values)

    def ready(self) -> bool:
        from psycopg import pq

        return (not self.conn.closed and getattr(self.conn, "_pipeline", None) is None
                and self.pgconn.transaction_status == pq.TransactionStatus.IDLE
                and self.pgconn.pipeline_status == pq.PipelineStatus.OFF)

    @staticmethod
    def _text(value: Any) -> bytes | None:
        if value is None:
            return None
        if value is True or value is False:
            return b"t" if value else b"f"
        return (value if isinstance(value, str) else str(value)).encode()

    def _collect(self, results: list[Any]) -> None:
        """Send what is left to send, then read results until the pipeline's Sync."""
        from psycopg import pq

        pgconn = self.pgconn
        while pgconn.flush():  # the output did not all fit in the socket: wait
            self.writable.poll()
        while True:
            while pgconn.is_busy():
                self.readable.poll()
                pgconn.consume_input()
            result = pgconn.get_result()
            if result is None:  # the end of one statement's results
                continue
            if result.status == pq.ExecStatus.PIPELINE_SYNC:
                return
            results.append(result)

    def append(
        self, n: int, params: Sequence[Any], count_sql: str | None, count_params: Sequence[Any]
    ) -> tuple[Any, list[int], list[tuple[str, int]]]:
        """(the version the lock left, the ids given, the rows of ``count_sql``, a batch
        count run after the insert): one round trip.

        A named statement that is missing fails the pipeline's first statement that uses it,
        so nothing has run: the transaction is rolled back and the append made again. psycopg
        deallocates every prepared statement of the connection after a ROLLBACK (a refused
        write), so the statements are prepared anew; missing again, they were never in the
        session the pipeline reached (a pooler's): unnamed from then on."""
        import psycopg

        for attempt in ("named", "prepared again", "unnamed"):
            try:
                return self._append(n, params, count_sql, count_params)
            except psycopg.errors.InvalidSqlStatementName:
                if not self.named:
                    raise
                self._end_failed()
                self.prepared.clear()
                if attempt == "prepared again":
                    self.named = False
        raise AssertionError("unreachable")  # the unnamed attempt returns or raises

    def _end_failed(self) -> None:
        """Roll back the transaction a failed pipeline left (libpq's own, so that psycopg does
        not take the ROLLBACK for a reason to deallocate its prepared statements)."""
        from psycopg import pq

        if self.pgconn.transaction_status == pq.TransactionStatus.INERROR:
            self.pgconn.exec_(b"ROLLBACK")

    def _append(
        self, n: int, params: Sequence[Any], count_sql: str | None, count_params: Sequence[Any]
    ) -> tuple[Any, list[int], list[tuple[str, int]]]:
        import psycopg
        from psycopg import pq

        self.synced = False
        values = [self._text(v) for v in params]
        pgconn = self.pgconn
        results = []
        lock, insert = self.tag + b"_lock", self.tag + b"_append_%d" % n
        count = self.tag + b"_count_%d" % (len(count_params) - 2)
        if self.named:  # (a round trip each, the first time only: before the pipeline)
            self._prepare(lock, LOCK)
            self._prepare(insert, append_sql(n))
            if count_sql is not None:
                self._prepare(count, pyformat(count_sql))
        pgconn.enter_pipeline_mode()
        try:
            pgconn.send_query_params(self.begin, None)
            self._send(lock, LOCK, values[:1])
            self._send(insert, append_sql(n), values)
            if count_sql is not None:
                self._send(count, pyformat(count_sql), [self._text(v) for v in count_params])
            self.synced = True
            pgconn.send_query_params(b"COMMIT", None)
            pgconn.pipeline_sync()
            try:
                self._collect(results)
            except psycopg.Error:
                raise  # the connection failed: nothing to cancel (the recorder says what happened)
            except BaseException:
                # Interrupted (Ctrl-C) with the server at work: cancel the statement, as
                # psycopg does, and read the pipeline to its end, so that the connection
                # stays usable (the append may or may not have been committed).
                try:
                    pgconn.get_cancel().cancel()
                    self._collect([])
                except BaseException:  # noqa: BLE001  (the interrupt is re-raised below)
                    self.conn.close()  # its state is unknown: the next use says so
                raise
        finally:
            if not self.conn.closed:
                try:
                    pgconn.exit_pipeline_mode()
                except Exception:  # noqa: BLE001  results left unread (a send failed): unusable
                    self.conn.close()
        for result in results:
            if result.status == pq.ExecStatus.FATAL_ERROR:
                raise psycopg.errors.error_from_result(result, encoding=pgconn._encoding)
        locked, inserted = results[1:3]
        version = int(locked.get_value(0, 0)) if locked.ntuples else None
        ids = [int(inserted.get_value(i, 0)) for i in range(inserted.ntuples)]
        found = []
        if count_sql is not None:
            counted = results[3]
            found = [(counted.get_value(i, 0).decode(), int(counted.get_value(i, 1))) for i in range(counted.ntuples)]
        return version, ids, found
