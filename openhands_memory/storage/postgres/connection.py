"""The PostgreSQL recorder (psycopg 3): one connection, its transactions, and its
replacement when the server ends it; the same tables and SQL as SQLite.

* **Gap-free ids under many writers.** A write transaction for a conversation starts with
  ``UPDATE conversation SET version = version + 1 WHERE id = ? RETURNING version``: the row
  lock it takes makes "next id = MAX(id) + 1" one writer's decision at a time, until commit
  or rollback. (A conversation being created needs no lock: its primary key refuses a
  second creator.)
* **Fresh views.** That same statement is the write's version bump; its value, read inside
  the transaction, is what ``Session.touch`` returns, and a view cache compares it with the
  version it saw. One round trip does the lock, the bump and the existence check.
* **Reads** are ``REPEATABLE READ READ ONLY`` transactions: one snapshot per view.
* **Round trips.** Every round trip to the server costs about what a one-row statement costs
  there, so ``BEGIN`` never travels alone: it is pipelined with the transaction's settings
  and its first statement (a read) or with the lock and ``MAX(id)`` (a write); a view's
  statements go in three pipelined groups (``run_all``). An append of a few events is one
  round trip in all (``PostgresRecorder.append``): BEGIN, the lock, an ``INSERT`` that
  numbers the rows itself from ``MAX(id) + 1`` and COMMIT, so the conversation's lock is held
  only while the server works, never across the network.
* **Poolers.** Nothing lives in the server's session between transactions: no start-up
  options, no session-level ``SET`` or advisory lock, and prepared statements only once the
  connection is known to be the server's own session (``_attach``). The settings a
  transaction needs are set in it (``TRANSACTION_SETTINGS``), the locks are row locks that
  end with it. So the recorder works unchanged through a pooler in transaction mode
  (PgBouncer's), which gives a client a server connection for one transaction at a time.
"""

from __future__ import annotations

import select
import shlex
import time
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from ...database import Location, connect_server, connect_timeout_of, create_schema, judge_server
from ...errors import ConnectionLost, ConnectTimeout, DatabaseUnreachable, LockTimeout, PoolerTimeout, \
    ServerFailure, ServerLimitExceeded, StatementCancelled, StatementTimeout
from ..recorder import FOLLOWS_HEAD, Datastore, wait_millis

from ..session import Session
from .dialect import (
    APPEND_ROWS,
    BEGIN_READ,
    LAST_ID,
    LOCK,
    POOLER_LOST_SIGN,
    TRANSACTION_SETTINGS,
    append_sql,
    begin_write,
    first_line,
    lock_not_available,
    pyformat,
)
from .fast_append import LibpqAppender
from .session import PostgresSession

#: What libpq says of a server that is restarting (or a connection it ended while starting).
RESTARTING = ("starting up", "shutting down", "in recovery mode", "not yet accepting connections",
              "Connection refused", "server closed the connection unexpectedly")


def underlying(error: BaseException) -> BaseException:
    """The failure behind psycopg's "cannot exit pipeline mode": when a pipeline's statement
    fails with the server ending the session (``pg_terminate_backend``, a restart), psycopg
    then tries to leave pipeline mode on the dying connection, and that error replaces the
    one that says what happened (which it keeps as its context)."""
    import psycopg

    while (isinstance(error, psycopg.OperationalError) and str(error).startswith("cannot exit pipeline mode")
           and isinstance(error.__context__, psycopg.Error)):
        error = error.__context__
    return error


class PostgresRecorder(Datastore):
    """One connection to the server, replaced when the server ends it.

    Failures leave as the library's errors (``fail``): ``ConnectionLost``,
    ``StatementTimeout``, ``StatementCancelled``, or ``ServerFailure``, each saying whether a
    write may have landed. After any of them the recorder is usable again: a connection the
    server has ended is replaced at the start of the next transaction, append or version
    check. A read whose snapshot has not begun retries once on the new connection; a write
    never retries."""

    backend = "postgresql"

    def __init__(self, location: Location, *, create: bool = True, readonly: bool = False,
                 statement_timeout: float | None = None):
        super().__init__()
        self._closed = False
        self.location = location
        self.label = location.label
        self.readonly = readonly
        # A read's BEGIN, with its statement timeout set for that transaction only (SET LOCAL:
        # nothing of it outlives the transaction, as a pooler in transaction mode requires).
        self.begin_read: str | tuple[str, ...] = BEGIN_READ if statement_timeout is None else (
            BEGIN_READ, f"SET LOCAL statement_timeout = {max(1, int(statement_timeout * 1000))}")
        # Autocommit: transactions are begun explicitly, as on SQLite, each with the settings
        # it needs (TRANSACTION_SETTINGS): nothing lives in the server's session, which a
        # pooler in transaction mode hands to another client between transactions.
        self._begin = begin_write(readonly)  # a read-only store's every transaction is read-only
        #: The connection is the server's own session (no pooler between): see _own_session.
        self._own = False
        self.conn = connect_server(location)
        try:
            try:
                judged = judge_server(location, self.conn, create=create and not readonly)
                if judged.create:
                    self.conn.close()  # alembic makes the schema on a connection of its own
                    create_schema(location)
                    self.conn = connect_server(location)
                self._own = judged.backend_pid is not None and judged.backend_pid == self.conn.info.backend_pid
            except Exception as e:
                self.fail(e, writing=False)
                raise
        except BaseException:
            self.conn.close()
            raise
        self._session = PostgresSession(self.conn, self)
        self._attach()

    def _attach(self) -> None:
        """What belongs to the current connection: the libpq appender, its statements named
        (prepared once) only in the server's own session, psycopg's prepared statements
        likewise, and the probe ``_usable`` polls.

        Prepared statements live in the server's session. Through a pooler in transaction
        mode that session is another client's after each transaction, so there every
        statement is unnamed, parsed and planned each time. A pooler gives its clients a start-up process id of its own making,
        so the server reporting the id libpq was given (``judge_server``) says that no
        pooler is between; should one turn out to be (the named statements go missing),
        the appender falls back to unnamed ones for good."""
        if self._own:
            self.conn.prepare_threshold = 5  # psycopg's default: a statement run 5 times is prepared
        self._libpq = (LibpqAppender(self.conn, self._begin, named=self._own) if LibpqAppender.usable(self.conn)
                       else None)
        self._probe = select.poll()
        self._probe.register(self.conn.pgconn.socket, select.POLLIN)

    # --- failures ----------------------------------------------------------------------

    def lost(self, error: BaseException) -> bool:
        """Whether ``error`` ended the connection (the server ended the session or went away,
        the network failed): then the next call connects again."""
        import psycopg

        error = underlying(error)
        if not isinstance(error, psycopg.Error):
            return False
        ended = isinstance(error, (psycopg.errors.AdminShutdown, psycopg.errors.CrashShutdown,
                                   psycopg.errors.IdleSessionTimeout,
                                   psycopg.errors.IdleInTransactionSessionTimeout,
                                   psycopg.errors.ConnectionException)) or POOLER_LOST_SIGN in str(error)
        if ended and not self.conn.closed:
            self.conn.close()  # the server has ended the session: never reuse it
        return ended or self.conn.closed

    def fail(self, error: BaseException, *, writing: bool, committed: bool | None = False,
             conversation_id: str | None = None) -> None:
        """Raise the library's error for a driver error the server or the network caused
        (return for any other: a bug, to be seen as one). ``committed``: ``None`` when the
        failure came after a COMMIT or a committing Sync was sent, so that the write may have
        landed; otherwise ``False``."""
        import psycopg

        error = underlying(error)
        if not isinstance(error, psycopg.Error):
            return
        reason = first_line(error).removeprefix("consuming input failed: ")
        if self.lost(error) and PoolerTimeout.SIGN in reason:  # it never reached the server
            raise PoolerTimeout(self.label, reason, writing=writing) from None
        if self.lost(error):
            check = (f"openhands-memory history {shlex.quote(self.label)} {shlex.quote(conversation_id)}"
                     if conversation_id is not None else f"openhands-memory conversations {shlex.quote(self.label)}")
            raise ConnectionLost(self.label, reason, writing=writing, committed=committed, check=check) from None
        # The server answered with an error: the statement's transaction (or a pipeline's
        # implicit one) is rolled back, a failed COMMIT included.
        if isinstance(error, psycopg.errors.QueryCanceled):
            kind: type[ServerFailure] = StatementTimeout if "timeout" in reason else StatementCancelled
        elif isinstance(error, psycopg.errors.LockNotAvailable):
            kind = StatementTimeout
        elif isinstance(error, psycopg.errors.ProgramLimitExceeded):  # (an OperationalError too)
            kind = ServerLimitExceeded
        elif isinstance(error, psycopg.OperationalError):  # out of disk, memory, connections...
            kind = ServerFailure
        else:
            return
        raise kind(self.label, reason, writing=writing) from None

    def _usable(self) -> None:
        """Before a transaction, an append or a version check: a connection the server has
        ended meanwhile (a restart, ``pg_terminate_backend``, an idle timeout) is replaced,
        so that the call runs, not fails. An idle connection the server has written to
        without being asked has been ended (its last words, then end of file). One poll(2)
        that does not wait: no round trip."""
        import psycopg
        from psycopg import pq

        if self._session.active:  # the transaction fails with its connection, whole
            return
        conn = self.conn
        if not conn.closed and conn.pgconn.transaction_status == pq.TransactionStatus.IDLE:
            # Read what came (a notice, or the session's end: its last words, then end of
            # file, which libpq sees only on a read of its own) until nothing more has.
            while self._probe.poll(0):
                try:
                    conn.pgconn.consume_input()
                except psycopg.OperationalError:
                    break
                if conn.closed:
                    break
        if conn.closed:
            self.reconnect()

    def reconnect(self, after: BaseException | None = None) -> None:
        """A new connection in place of one the server has ended. ``after``: the failure of
        a read about to be retried; if connecting fails, the message says both."""
        old = self.conn
        try:
            old.close()
        except Exception:  # noqa: BLE001  it is gone either way
            pass
        try:
            self.conn = self._connect_again()
        except DatabaseUnreachable as e:
            if after is None:
                raise
            reason = first_line(after).removeprefix("consuming input failed: ")
            raise ConnectionLost(self.label, f"{reason}; connecting again failed: {e.why}",
                                 writing=False) from None
        if self._session.conn is old:  # (not when a test stands in for the connection)
            self._session.conn = self.conn
        self._attach()

    def _connect_again(self) -> Any:
        """Connect to a server that was there a moment ago. One that is restarting refuses
        connections, or says it is starting up, for a few seconds: try again four times a
        second until the connect timeout has passed, then say why not."""
        deadline = time.monotonic() + connect_timeout_of(self.location.driver_url)
        while True:
            try:
                return connect_server(self.location)
            except ConnectTimeout:
                raise  # it took the whole timeout already
            except DatabaseUnreachable as e:
                if time.monotonic() >= deadline or not any(word in str(e) for word in RESTARTING):
                    raise
            time.sleep(0.25)

    # --- transactions ------------------------------------------------------------------

    def session(self) -> Session:
        return self._session

    def _begin_write(self, session: Session, conversation_id: str | None, timeout: float | None = None) -> None:
        assert isinstance(session, PostgresSession)
        self._usable()
        session.active = True
        session.version = None
        session.known_last = None
        session.reading = False
        session.conversation = conversation_id
        if conversation_id is None:
            session.pending_begin = self._begin
            return
        session.pending_begin = None
        # BEGIN, the lock and the conversation's last id in one round trip. MAX(id) is read
        # by a statement of its own, after the lock is granted (see append_sql).
        conn = session.conn  # (a test may stand in for the connection to see the statements)
        try:
            with conn.pipeline():
                conn.execute(self._begin)
                conn.execute(TRANSACTION_SETTINGS)
                if timeout is not None:
                    # The wait for the row lock, for this statement alone: SET LOCAL ends
                    # with the transaction (so a pooler's next client never inherits it),
                    # and DEFAULT gives the rest of it the session's own lock_timeout.
                    conn.execute(f"SET LOCAL lock_timeout = {wait_millis(timeout, least=1)}")
                locked = conn.execute(LOCK, (conversation_id,))
                if timeout is not None:
                    conn.execute("SET LOCAL lock_timeout TO DEFAULT")
                last = conn.execute(LAST_ID, (conversation_id,))
        except Exception as e:
            if timeout is not None and lock_not_available(e):
                raise LockTimeout(self.label, conversation_id, timeout) from None
            self.fail(e, writing=True, conversation_id=conversation_id)
            raise
        row = locked.fetchone()
        session.version = row[0] if row else None
        found = last.fetchone()[0]
        session.known_last = (conversation_id, -1 if found is None else found)

    def _begin_read(self, session: Session) -> None:
        assert isinstance(session, PostgresSession)
        self._usable()
        session.active = True
        session.pending_begin = self.begin_read
        session.reading = True

    @contextmanager
    def reading(self, *, snapshot: bool = True) -> Iterator[Session]:
        if snapshot:
            with super().reading() as session:
                yield session
            return
        with self._lock:
            session = self._session
            if session.active:  # inside the caller's transaction: its statements are its own
                yield session
                return
            self._usable()  # single statements: each may run again after a connection loss
            session.reading = session.single = True
            try:
                yield session
            finally:
                session.reading = session.single = False

    def _commit(self, session: Session) -> None:
        assert isinstance(session, PostgresSession)
        session.known_last = None
        session.active = False
        if session.pending_begin is not None:  # nothing was sent: nothing to commit
            session.pending_begin = None
            return
        try:
            self.conn.execute("COMMIT")
        except Exception as e:
            # No answer to a COMMIT: it may have landed. An error in answer: it did not.
            self.fail(e, writing=True, committed=None if self.lost(e) else False,
                      conversation_id=session.conversation)
            raise

    def _rollback(self, session: Session) -> None:
        """End the transaction without keeping anything. Never raises for the server: it
        runs after a failure, whose error is the one to see, or after a read, whose rows are
        read already; a connection that cannot end its transaction is closed (the server
        then rolls it back) and replaced on the next call."""
        import psycopg
        from psycopg.pq import TransactionStatus

        assert isinstance(session, PostgresSession)
        session.pending_begin = None
        session.known_last = None
        session.active = False
        reading, session.reading = session.reading, False
        if self.conn.closed:
            return
        status = self.conn.info.transaction_status
        try:
            if status == TransactionStatus.INTRANS and reading:
                # A read-only transaction ends the same either way; COMMIT keeps psycopg from
                # taking the ROLLBACK for a reason to forget (and deallocate) what it prepared.
                self.conn.execute("COMMIT")
            elif status != TransactionStatus.IDLE:
                self.conn.execute("ROLLBACK")
        except psycopg.Error:
            self.conn.close()

    def append(
        self, conversation_id: str, rows: Sequence[tuple[Any, ...]], count: Sequence[str] = (),
        parent: str | None = None,
    ) -> tuple[int, Any, dict[str, int]] | None | object:
        """One round trip: BEGIN, the lock (the version bump), an INSERT that numbers the rows
        from MAX(id) + 1 on the server, when asked the batch counts, and COMMIT, pipelined
        (READ COMMITTED, so that each statement's snapshot is taken after the lock is
        granted). The lock is held while the server runs the statements and commits, never
        while a reply crosses the network or this process waits for a CPU, which is what
        lets many writers share one conversation.

        The counts are read after the INSERT (its ids are the server's), so the new rows'
        own actions are taken off them: what is left is what came before."""
        if not rows or len(rows) > APPEND_ROWS:
            return super().append(conversation_id, rows, count, parent)
        params: list[Any] = [conversation_id, conversation_id]
        for k, row in enumerate(rows):
            params.append(k)
            params.extend(row[2:])
        params.extend([conversation_id, parent, conversation_id, parent])
        count = sorted(set(count))[:500]  # a view asks for the few response ids new to it
        count_params = [conversation_id, 2**31 - 1, *count]  # every id (the column is an INTEGER)
        with self._lock:
            self._usable()
            conn = self._session.conn  # (a test may stand in for the connection)
            if conn is self.conn and self._libpq is not None and self._libpq.ready():
                appender = self._libpq
                try:
                    version, ids, found = appender.append(
                        len(rows), params, self._session.batch_sizes_sql(len(count)) if count else None, count_params
                    )
                except Exception as e:
                    self._rollback(self._session)  # a statement failed: its transaction did
                    self._failed_append(e, conversation_id, synced=appender.synced)
                    raise
            else:
                try:
                    with conn.pipeline():
                        conn.execute(self._begin)
                        locked = conn.execute(LOCK, (conversation_id,))
                        inserted = conn.execute(append_sql(len(rows)), params)
                        counted = (conn.execute(pyformat(self._session.batch_sizes_sql(len(count))), count_params)
                                   if count else None)
                        conn.execute("COMMIT")
                except Exception as e:
                    self._rollback(self._session)
                    self._failed_append(e, conversation_id, synced=True)
                    raise
                row = locked.fetchone()
                version = None if row is None else row[0]
                ids = [r[0] for r in inserted.fetchall()]
                found = [tuple(r) for r in counted.fetchall()] if counted is not None else []
        if not ids and version is not None:
            return FOLLOWS_HEAD
        ids.sort()
        # The conversation's row is there (else the insert's foreign key would have refused).
        assert version is not None and ids == list(range(ids[0], ids[0] + len(rows))), ids
        counts = {}
        for rid, n in found:
            new = sum(1 for row in rows if row[2] == "ActionEvent" and row[8] == rid)
            if n > new:
                counts[rid] = n - new
        return ids[0], version, counts

    def _failed_append(self, error: BaseException, conversation_id: str, *, synced: bool) -> None:
        """An append's failure as the library's error. ``synced``: the pipeline's COMMIT was
        sent; if no answer came, the append may have landed."""
        import psycopg

        if isinstance(error, psycopg.errors.IntegrityError):
            self._session.translate(error)
        self.fail(error, writing=True, committed=None if synced and self.lost(error) else False,
                  conversation_id=conversation_id)

    def version(self, conversation_id: str) -> Any:
        with self._lock:
            self._usable()
            try:
                row = self.conn.execute("SELECT version FROM conversation WHERE id = %s", (conversation_id,)).fetchone()
            except Exception as e:
                if not self.lost(e) or self._session.active or PoolerTimeout.SIGN in str(e):
                    # (a transaction's fails whole; a pooler that waited in vain would again)
                    session = self._session
                    self.fail(e, writing=session.active and not session.reading, conversation_id=session.conversation)
                    raise
                self.reconnect(after=e)  # one statement, a read: once more on a new connection
                try:
                    row = self.conn.execute("SELECT version FROM conversation WHERE id = %s",
                                            (conversation_id,)).fetchone()
                except Exception as again:
                    self.fail(again, writing=False)
                    raise
        return None if row is None else row[0]

    def existing_version(self, conversation_id: str) -> Any | None:
        return self.version(conversation_id)  # (NOT NULL: no row, no conversation)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self.conn.close()
