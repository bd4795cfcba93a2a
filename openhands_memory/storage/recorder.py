"""The datastore: how the library reaches a database, whatever the database.

In the ``eventsourcing`` library's vocabulary this is a *datastore*: it owns one connection
and its transactions, nothing more. The statements are the *recorders*: the statement groups
of ``storage/statements/`` (events, condensations and hidden runs, view, tree, search, ...),
composed into ``Session`` (``storage/session.py``), which a datastore hands out: ``writing``
for a write transaction that keeps per-conversation ids gap-free, ``reading`` for one
consistent snapshot. Transactions compose: a session passed down runs everything in the
caller's transaction. ``version`` tells a view cache whether another connection wrote. One
interface, a backend each (``sqlite.py``, ``postgres/``), one contract test suite run
against both. ``Recorder`` is this class's former name, kept for callers that still use it.
"""

from __future__ import annotations

import math
import threading
import time
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from ..errors import LockTimeout
from .session import Session


#: What ``Datastore.append`` returns, having written nothing, when HEAD is not the newest row.
FOLLOWS_HEAD = object()


class Datastore(ABC):
    """One database connection, guarded by a lock (a store is used by one thread at a time;
    the lock makes a second thread wait instead of corrupting a transaction)."""

    label: str  # the file path or URL, for messages
    backend: str  # "sqlite" or "postgresql"
    readonly: bool = False  # opened for reading only: every write would be refused

    def __init__(self) -> None:
        self._lock = threading.RLock()

    @abstractmethod
    def _begin_write(self, session: Session, conversation_id: str | None, timeout: float | None = None) -> None:
        """Start a write transaction; with a conversation id, hold whatever lock keeps that
        conversation's next id unique until the transaction ends. ``timeout``: wait at most
        this long for that lock (``LockTimeout`` after it), however the connection's own
        limits are set; None: as they are set."""

    @abstractmethod
    def _begin_read(self, session: Session) -> None: ...

    @abstractmethod
    def _commit(self, session: Session) -> None: ...

    @abstractmethod
    def _rollback(self, session: Session) -> None: ...

    @abstractmethod
    def session(self) -> Session: ...

    @abstractmethod
    def version(self, conversation_id: str) -> Any:
        """A token that changes when another connection commits a write to the conversation
        (it may also change for writes elsewhere: a view cache then reads again)."""

    def existing_version(self, conversation_id: str) -> Any | None:
        """``version`` if the conversation exists, else None: a store looks a conversation up
        and hands its view cache the first token at once (in one statement where the token
        is a column of the conversation's row: PostgreSQL's)."""
        with self.reading(snapshot=False) as db:
            if not db.conversation_exists(conversation_id):
                return None
        return self.version(conversation_id)

    @abstractmethod
    def close(self) -> None: ...

    @property
    @abstractmethod
    def closed(self) -> bool:
        """Whether ``close`` was called."""

    @contextmanager
    def writing(self, conversation_id: str | None = None, *, large: bool = False,
                timeout: float | None = None) -> Iterator[Session]:
        """A write transaction. ``large``: one that may change more pages than memory should
        hold (deleting a conversation, building or dropping the search index), which SQLite
        journals in a file. ``timeout``: the most seconds to wait for the transaction's lock
        (this connection's, then the database's), after which ``LockTimeout`` says so and
        nothing is written; None waits as the connection's own settings say (SQLite's busy
        timeout, PostgreSQL's lock_timeout)."""
        if timeout is not None and math.isnan(timeout):
            raise ValueError("a lock timeout must be a number of seconds, not NaN")
        deadline = None if timeout is None else time.monotonic() + timeout
        if deadline is None:
            self._lock.acquire()
        elif not self._lock.acquire(timeout=wait_seconds(timeout)):
            raise LockTimeout(self.label, conversation_id, timeout)
        try:
            session = self.session()
            try:
                try:
                    self._begin_write(session, conversation_id, None if deadline is None else left(deadline))
                except LockTimeout:
                    if timeout is None:
                        raise
                    # The backend waited what was left; the caller's wait was all of it.
                    raise LockTimeout(self.label, conversation_id, timeout) from None
                yield session
            except BaseException:
                self._rollback(session)
                raise
            self._commit(session)
        finally:
            self._lock.release()

    def append(
        self, conversation_id: str, rows: Sequence[tuple[Any, ...]], count: Sequence[str] = (),
        parent: str | None = None,
    ) -> tuple[int, Any, dict[str, int]] | None | object:
        """Append ``rows`` (``codec.event_row`` tuples; the id in each is ignored) to the
        conversation in a write transaction of their own, with the next ids: (the first id,
        the version the write left, how many ActionEvents each response id in ``count`` had
        before these rows — a view cache's batch sizes, read in the same transaction), or
        None when there is no such conversation, or ``FOLLOWS_HEAD`` (nothing written) when
        the rows need parents of their own (``Session.append_point``): HEAD was moved back, or
        the first row's ``parent`` (the external id its event names, if any) is not the newest
        row. The writing context then gives them their parents (each row after the first must
        follow the one before).
        A backend may do it in fewer round trips than these statements take (see
        PostgreSQL's)."""
        with self.writing(conversation_id) as db:
            point = db.append_point(conversation_id, parent, count)
            if point is None:
                return None
            first, continues, counts = point
            if not continues:
                return FOLLOWS_HEAD
            db.insert_events([(row[0], first + k, *row[2:]) for k, row in enumerate(rows)])
            return first, db.touch(conversation_id), counts

    @contextmanager
    def reading(self, *, snapshot: bool = True) -> Iterator[Session]:
        """A read transaction. ``snapshot=False`` for a single statement, which is consistent
        on its own: it saves the round trips of beginning and ending a transaction."""
        with self._lock:
            session = self.session()
            if not snapshot:
                yield session
                return
            self._begin_read(session)
            try:
                yield session
            finally:
                self._rollback(session)


#: The former name (what ``eventsourcing`` calls a recorder is a statement group here).
Recorder = Datastore


#: The longest wait either database takes as one setting (SQLite's busy_timeout and
#: PostgreSQL's lock_timeout are C ints of milliseconds): about 24.8 days.
LONGEST_WAIT_MS = 2**31 - 1


def wait_seconds(timeout: float) -> float:
    """``timeout`` as ``threading.Lock.acquire`` takes it (no negative, no infinity)."""
    return min(max(timeout, 0.0), threading.TIMEOUT_MAX)


def left(deadline: float) -> float:
    """The seconds until ``deadline`` (``time.monotonic``), none below zero."""
    return max(0.0, deadline - time.monotonic())


def wait_millis(timeout: float, least: int = 0) -> int:
    """``timeout`` seconds as a database's wait setting: whole milliseconds, rounded up, at
    least ``least`` (PostgreSQL reads 0 as "no limit") and at most ``LONGEST_WAIT_MS``."""
    if timeout * 1000 >= LONGEST_WAIT_MS:
        return LONGEST_WAIT_MS
    return max(least, math.ceil(max(timeout, 0.0) * 1000))


@dataclass(frozen=True)
class QueryResult:
    """What a backend's ``read_only_query`` returns: the columns, at most ``max_rows`` rows,
    and whether more were available.

    Each backend runs one statement that cannot write, by construction, and fails with the
    library's errors: ``ReadOnlyViolation`` naming what would have written,
    ``MultipleStatements``, ``QueryTimeout``, ``QueryError`` for anything else the database
    refused; Ctrl-C stops the statement and raises ``KeyboardInterrupt``.
    """

    header: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool
