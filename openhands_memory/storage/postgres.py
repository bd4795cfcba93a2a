"""The PostgreSQL recorder (psycopg 3): the same tables, the same SQL, one connection.

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
  there, so ``BEGIN`` never travels alone: it is pipelined with the transaction's first
  statement (a read) or with the lock and ``MAX(id)`` (a write); a view's statements go in
  three pipelined groups (``run_all``). An append of a few events is one round trip in all
  (``PostgresRecorder.append``): the lock and an ``INSERT`` that numbers the rows itself
  from ``MAX(id) + 1``, one implicit transaction committed at the pipeline's Sync, so the
  conversation's lock is held only while the server works, never across the network.
"""

from __future__ import annotations

import functools
import re
import select
import shlex
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence, TypeVar

from .. import limits
from ..database import Location, connect_server, connect_timeout_of, judge_server
from ..errors import (
    ConnectionLost,
    ConnectTimeout,
    DatabaseUnreachable,
    LockTimeout,
    MultipleStatements,
    QueryError,
    QueryTimeout,
    ReadOnlyViolation,
    ServerFailure,
    ServerLimitExceeded,
    StatementCancelled,
    StatementTimeout,
)
from .codec import EVENT_COLUMNS
from .recorder import FOLLOWS_HEAD, QueryResult, Recorder, wait_millis
from ..searchable import fold_nul
from . import search, search_waiting
from .search import SearchFilters
from .session import (
    END,
    INSERT_CONDENSATION,
    INSERT_EVENT,
    INSERT_RANGE,
    IntegrityViolation,
    Session,
)

#: Writes run at READ COMMITTED whatever the database's default: each statement after the
#: lock then sees what the lock's previous holder committed (MAX(id) above all).
BEGIN_WRITE = "BEGIN ISOLATION LEVEL READ COMMITTED"
BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
LOCK = "UPDATE conversation SET version = version + 1 WHERE id = %s RETURNING version"
LAST_ID = "SELECT MAX(id) FROM event WHERE conversation_id = %s"
#: Appends of up to this many events take the one-round-trip path; longer ones COPY.
APPEND_ROWS = 64
#: The columns an append sends per row (EVENT_COLUMNS without conversation_id and id), and
#: their SQL types (the VALUES list needs them: parameters arrive untyped).
APPEND_COLUMNS = EVENT_COLUMNS[2:]
APPEND_TYPES = ("VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR",
                "BOOLEAN", "BOOLEAN", "INTEGER", "TEXT")


#: Set for the recorder's connection when it starts, whatever the database's defaults:
#: READ COMMITTED for a pipeline's implicit transaction (an append), so that the INSERT's
#: snapshot, taken after the lock is granted, sees the previous holder's rows; and no JIT:
#: the library's statements are short index reads, but the planner prices each interval of
#: a view at ~10k, so a view of a dozen intervals passed jit_above_cost (100k) and spent
#: ~10 ms compiling a query that runs in one (measured on the 1M-event SDK history). No
#: parallel workers either, for the same reason: a search of the events waiting above the
#: watermark (a few rows, whose count the planner cannot know) was given two, and their
#: start-up took 6 ms of a 6 ms statement.
SESSION_SETTINGS = (("default_transaction_isolation", "read\\ committed"), ("jit", "off"),
                    ("max_parallel_workers_per_gather", "0"))


def _lock_not_available(error: BaseException) -> bool:
    """Whether the server stopped a statement at lock_timeout (SQLSTATE 55P03)."""
    return getattr(getattr(error, "diag", None), "sqlstate", None) == "55P03"


def _with_options(url: str, settings: list[str]) -> str:
    """The ``options`` start-up parameter: the caller's own (the URL's, else $PGOPTIONS),
    then ours, which win where both set something."""
    import os

    if "options" not in url.lower():  # (parsing a URL costs ~0.1 ms: only when it may say)
        given = os.environ.get("PGOPTIONS", "")
        return " ".join([*([given] if given else []), *settings])
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:  # connect_server says what to install
        return " ".join(settings)
    try:
        given = conninfo_to_dict(url).get("options") or os.environ.get("PGOPTIONS", "")
    except Exception:  # noqa: BLE001  a URL libpq cannot parse: connect_server says why
        return " ".join(settings)
    return " ".join([*([str(given)] if given else []), *settings])


@functools.lru_cache(maxsize=APPEND_ROWS)
def append_sql(n: int) -> str:
    """An INSERT of ``n`` rows numbered from the conversation's MAX(id) + 1, returning the ids.

    The subquery is uncorrelated, so it runs once (an InitPlan: one seek of the primary key
    from its end). It must run in a statement of its own after the lock's: a statement's
    snapshot is taken when it starts, and one taken before the lock was granted would miss
    the previous holder's rows."""
    row = "(" + ", ".join(["CAST(%s AS INTEGER)"] + [f"CAST(%s AS {t})" for t in APPEND_TYPES]) + ")"
    names = ", ".join(APPEND_COLUMNS)
    return (
        f"INSERT INTO event ({', '.join(EVENT_COLUMNS)}) "
        f"SELECT %s, n.next + v.k, {', '.join('v.' + c for c in APPEND_COLUMNS)} "
        "FROM (SELECT COALESCE(MAX(id), -1) + 1 AS next FROM event WHERE conversation_id = %s) n "
        f"CROSS JOIN (VALUES {', '.join([row] * n)}) AS v(k, {names}) "
        # Nothing when the rows need parents of their own (Recorder.append, Session.append_point):
        # HEAD was moved back, or the first row names a parent that is not the newest row.
        "WHERE (SELECT head FROM conversation WHERE id = %s) IS NULL AND (CAST(%s AS TEXT) IS NULL "
        "OR (SELECT uid FROM event WHERE conversation_id = %s AND id = n.next - 1) = CAST(%s AS TEXT)) "
        "RETURNING id"
    )


_T = TypeVar("_T")
#: What libpq says of a server that is restarting (or a connection it ended while starting).
RESTARTING = ("starting up", "shutting down", "in recovery mode", "not yet accepting connections",
              "Connection refused", "server closed the connection unexpectedly")


@functools.lru_cache(maxsize=512)
def _pyformat(text: str) -> str:
    """``?`` placeholders as psycopg's ``%s`` (the library's SQL has no ``%`` of its own and
    no ``?`` inside string literals)."""
    return re.sub(r"\?", "%s", text.replace("%", "%%"))


def _drained(parts: list[list[tuple]]) -> Iterator[tuple]:
    for part in parts:
        part.reverse()
        while part:
            yield part.pop()


class PostgresSession(Session):
    # A plain join (or a LATERAL one, which the planner flattens) lets PostgreSQL read the
    # conversation's every row and filter them by interval. ``OFFSET 0`` keeps the LATERAL
    # subquery whole, so each interval is its own primary-key range scan. PostgreSQL needs
    # the ORDER BY.
    interval_join = (
        "iv JOIN LATERAL (SELECT * FROM event WHERE conversation_id = ? "
        "AND id BETWEEN iv.s AND iv.e OFFSET 0) ev ON true"
    )
    interval_order = " ORDER BY ev.id"

    def __init__(self, conn: Any, recorder: "PostgresRecorder"):
        super().__init__(conn)
        self.recorder = recorder

    def defer_event_indexes(self) -> list[str]:
        return []  # COPY fills the indexes as it goes; a load never drops them here

    def sql(self, text: str) -> str:
        return _pyformat(text)

    def executemany(self, text: str, rows: Any) -> None:
        try:
            self.send_begin()
            with self.conn.cursor() as cursor:
                cursor.executemany(self.sql(text), rows)
        except Exception as e:
            self.translate(e)
            raise

    # Lookups by an event's identifiers (codec.IDENTIFIERS): a value holding a NUL names no
    # row here, since none can hold one, and the server refuses to compare it (DataError). It
    # comes from JSON the library keeps whole: a Condensation's forgotten ids, a pin's event
    # id, the SDK's leaf_event_id, a call id in a row written before such rows were refused.
    def seqs_of(self, cid: str, before: int, uids: Sequence[str]) -> list[tuple[int, str]]:
        return super().seqs_of(cid, before, [u for u in uids if "\x00" not in u])

    def results_near(self, cid: str, seq: int, call_id: str, span: int = 256) -> list[int]:
        return [] if "\x00" in call_id else super().results_near(cid, seq, call_id, span)

    def no_index(self, column: str) -> str:
        # An expression the planner cannot match to an index (SQLite's unary plus does not
        # parse on text here): without it, "id < ?" on the primary key can win over the uid
        # or response-id index and read the conversation's every row.
        return f"({column} || '')" if column == "conversation_id" else f"({column} + 0)"

    def translate(self, error: Exception) -> None:
        import psycopg

        if isinstance(error, psycopg.errors.IntegrityError):
            raise IntegrityViolation(str(error).splitlines()[0]) from None
        # Inside an explicit transaction nothing commits before the COMMIT (_commit says
        # whether that one may have landed): the server rolls back what a failure leaves.
        self.recorder.fail(error, writing=not self.reading, conversation_id=self.conversation)

    #: The version the current write transaction left (set when it began; see the recorder).
    version: Any = None
    #: ``BEGIN ...`` not sent yet: it goes with the transaction's first statement.
    pending_begin: str | None = None
    #: The transaction is a read (``Recorder.reading``).
    reading = False
    #: A read without a transaction (``reading(snapshot=False)``): each statement stands alone.
    single = False
    #: Inside a transaction the recorder began (until its commit or rollback): its
    #: connection must not be replaced under it, or its later statements would run, outside
    #: it, on another.
    active = False
    #: The conversation the write transaction locked (for messages).
    conversation: str | None = None
    #: (conversation, MAX(id)) read right after the write's lock was taken, until an insert.
    known_last: tuple[str, int] | None = None

    def execute(self, text: str, params: Sequence[Any] = ()) -> Any:
        begin, self.pending_begin = self.pending_begin, None

        def send() -> Any:
            if begin is None:
                return self.conn.execute(self.sql(text), params)
            with self.conn.pipeline():  # BEGIN and this statement in one round trip
                self.conn.execute(begin)
                return self.conn.execute(self.sql(text), params)

        return self.again_if_lost(send, begin)

    def run_all(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple]]:
        """One round trip for all of them (and a pending BEGIN): a pipeline."""
        if not statements:
            return []
        begin, self.pending_begin = self.pending_begin, None

        def send() -> list[Any]:
            with self.conn.pipeline():
                if begin is not None:
                    self.conn.execute(begin)
                return [self.conn.execute(self.sql(text), params) for text, params in statements]

        cursors = self.again_if_lost(send, begin)
        return [[tuple(r) for r in cursor.fetchall()] for cursor in cursors]

    def run_streaming(
        self, streamed: Sequence[tuple[str, Sequence[Any]]], statements: Sequence[tuple[str, Sequence[Any]]],
        *, once: bool = False,
    ) -> tuple[Iterator[tuple], list[list[tuple]]]:
        """All in one pipeline (one round trip): the streamed rows arrive with the others,
        and are handed out taken off their lists, so that what the caller makes of them
        replaces them rather than adds to them."""
        results = self.run_all([*streamed, *statements])
        return _drained(results[: len(streamed)]), results[len(streamed):]

    def again_if_lost(self, send: Callable[[], _T], begin: str | None) -> _T:
        """``send()``, translating a failure; a read that has taken no snapshot yet (its
        BEGIN goes with this statement) or takes none (a single statement) runs once more
        on a new connection after a connection loss. A read further into its transaction
        cannot: its snapshot is gone, and statements from two snapshots would not agree."""
        try:
            return send()
        except Exception as e:
            if not (self.reading and (begin is not None or self.single) and self.recorder.lost(e)):
                self.translate(e)
                raise
            self.recorder.reconnect(after=e)
        try:
            return send()
        except Exception as e:
            self.translate(e)
            raise

    def send_begin(self) -> None:
        """Send a pending ``BEGIN`` on its own (before COPY, which no pipeline carries)."""
        if self.pending_begin is not None:
            begin, self.pending_begin = self.pending_begin, None
            self.conn.execute(begin)

    def last_seq(self, cid: str, upto: int = END) -> int:
        if upto == END and self.known_last is not None and self.known_last[0] == cid:
            return self.known_last[1]
        return super().last_seq(cid, upto)

    # --- search: the texts behind a watermark, and their GIN indexes (storage/search.py) ---

    TEXT_OF_EVENT = search.PG_TEXT_OF.format(e="e")
    RAW_BACKEND = "postgresql"

    def _holds(self, fragment: str) -> tuple[str, str]:
        # The index's own test of a candidate (``search_grams``), on the text lowered alike.
        return "t LIKE lower(?)", search.like_pattern(fragment)

    def _windows(self, select: str, params: Sequence[Any], upto: int, limit: int) -> list[tuple]:
        """Rows of ``select`` over windows of the newest ids up to ``upto``: its block of
        ``2 ** PG_BLOCK_BITS`` ids, then four times as many blocks each time, until ``limit``
        rows. ``select`` ends in a window's list of blocks, its first and its last id."""
        found: list[tuple] = []
        top, count = upto >> search.PG_BLOCK_BITS, 1
        while top >= 0 and len(found) < limit:
            low = max(0, top - count + 1)
            bounds = (low << search.PG_BLOCK_BITS, min(upto, ((top + 1) << search.PG_BLOCK_BITS) - 1))
            window = [list(range(low, top + 1)), *bounds]
            found += self.all(f"{select} ORDER BY id DESC LIMIT {int(limit - len(found))}", (*params, *window))
            top, count = low - 1, count * 4
        return found

    def search_index_on(self) -> bool:
        return search.postgres_on(self.execute)

    def _create_search_index(self, progress: search.Progress | None) -> None:
        search.create_postgres(self.execute, progress)

    def _drop_search_index(self) -> None:
        search.drop_postgres(self.execute)

    def _indexed(self, match: str, window: str, where: str) -> str:
        """The ids of indexed texts matching ``match`` (SQL over ``t.body``) in ``window``,
        the event's own columns at hand for the filters. MATERIALIZED: the matches come from
        the GIN index (the window cut inside it), never from a walk over the window's rows."""
        return (f"WITH m AS MATERIALIZED (SELECT t.id FROM {search.PG_TEXTS} t "
                "JOIN event e ON e.conversation_id = t.conversation_id AND e.id = t.id "
                f"WHERE t.conversation_id = ? AND {match}{where} AND {window}) SELECT id FROM m")

    def search_words(self, cid: str, terms: Sequence[str], upto: int, limit: int,
                     filters: SearchFilters) -> list[tuple[int, float]]:
        if not terms:
            return []
        where, params = self._search_filters(filters)
        query = fold_nul(" ".join(terms))
        words = search.PG_WORDS_OF.format(t="t")
        # Words no text holds at all (a fragment of an identifier, read as words) would have
        # every window read in vain, some 5 ms each; the index alone says so at once.
        held = self.one(f"SELECT EXISTS (SELECT 1 FROM {search.PG_TEXTS} t "
                        f"WHERE {words} @@ plainto_tsquery('english', ?))", (query,))
        ids = [] if not held else [r[0] for r in self._windows(
            self._indexed(f"{words} @@ plainto_tsquery('english', ?)", search.PG_WORDS_WINDOW, where),
            (cid, query, *params), upto, limit,
        )]
        found = [(s, float(r)) for s, r in self.all(
            f"SELECT t.id, ts_rank({words}, plainto_tsquery('english', ?)) FROM {search.PG_TEXTS} t "
            f"WHERE t.conversation_id = ? AND t.id IN ({', '.join('?' for _ in ids)}) ORDER BY t.id DESC",
            (query, cid, *ids),
        )] if ids else []
        return self._newest(found, self._waiting_words_matching(cid, query, upto, limit, filters), limit)

    def _waiting_words_matching(self, cid: str, query: str, upto: int, limit: int,
                                filters: SearchFilters) -> list[tuple[int, float]]:
        """(id, rank) of the newest events above the watermark (at most ``PG_FLUSH_AT``)
        whose words match ``query``: the index's expressions, over texts spelled here."""
        where, params = self._search_filters(filters)
        words = search.PG_WORDS_OF.format(t="w")
        return [(s, float(r)) for s, r in self.all(
            f"SELECT w.id, ts_rank({words}, plainto_tsquery('english', ?)) FROM (SELECT e.id, "
            f"{search.PG_BODY_OF.format(e='e')} AS body FROM event e WHERE e.conversation_id = ? "
            f"AND e.id > {search.upto_of('?')} AND e.id <= ? AND e.kind IN ({search.KIND_LIST}){where} OFFSET 0) w "
            f"WHERE w.body IS NOT NULL AND {words} @@ plainto_tsquery('english', ?) "
            f"ORDER BY w.id DESC LIMIT {int(limit)}",
            (query, cid, cid, upto, *params, query),
        )]

    def search_grams(self, cid: str, fragment: str, upto: int, limit: int,
                     filters: SearchFilters) -> list[int]:
        fragment = fold_nul(fragment)
        if len(fragment) < 3:
            return []
        where, params = self._search_filters(filters)
        pattern = search.like_pattern(fragment)
        bits, top = search.PG_BLOCK_BITS, upto >> search.PG_BLOCK_BITS
        near = list(range(top, max(-1, top - search.PG_GRAMS_NEAR), -1))
        # The newest blocks one by one (storage/search.py says why), then the older ones at once.
        # OFFSET 0 keeps each block its own probe: flattened into a join, a common fragment's
        # candidates in the whole table were read (and rechecked) once, 150 ms at 100k events.
        found = [r[0] for r in self.all(
            f"SELECT m.id FROM (SELECT b FROM unnest(CAST(? AS integer[])) AS n(b) ORDER BY b DESC) n "
            f"CROSS JOIN LATERAL (SELECT t.id FROM {search.PG_TEXTS} t "
            "JOIN event e ON e.conversation_id = t.conversation_id AND e.id = t.id "
            f"WHERE t.conversation_id = ? AND (t.id >> {bits}) = n.b AND t.body LIKE lower(?){where} "
            f"AND t.id <= CAST(? AS integer) OFFSET 0) m ORDER BY n.b DESC, m.id DESC LIMIT {int(limit)}",
            (near, cid, pattern, *params, upto),
        )]
        if len(found) < limit and near[-1] > 0:
            found += [r[0] for r in self.all(
                self._indexed("t.body LIKE lower(?)", "t.id < CAST(? AS integer)", where)
                + f" ORDER BY id DESC LIMIT {int(limit - len(found))}",
                (cid, pattern, *params, near[-1] << bits),
            )]
        return self._newest(found, self._waiting_grams(cid, fragment, upto, filters), limit)

    def file_problems(self, full: bool) -> list[str]:
        # PostgreSQL checks its own pages and keys; what it cannot know is whether the search
        # index's texts are the events' (a trigger dropped by hand).
        if not full:
            return []
        return search.postgres_problems(self.execute) + search_waiting.problems(self.execute, "postgresql")

    def insert_conversation(self, cid: str, created_at: str, metadata: dict[str, Any]) -> None:
        # No search_key: PostgreSQL keys its search texts by the event's own key (storage/search.py).
        import json

        limits.conversation_id(cid)  # as Session.insert_conversation: the rule every new id keeps
        self.execute(
            "INSERT INTO conversation (id, created_at, metadata) VALUES (?, ?, CAST(? AS JSON))",
            (cid, created_at, json.dumps(metadata)),
        )

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
        self.known_last = None
        if len(rows) == 1:  # one round trip; executemany would take a pipeline's several
            self.execute(INSERT_EVENT, rows[0])
            return
        # COPY streams a batch in one statement, several times faster than inserts.
        try:
            self.send_begin()
            with self.conn.cursor() as cursor:
                with cursor.copy(f"COPY event ({', '.join(EVENT_COLUMNS)}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
        except Exception as e:
            self.translate(e)
            raise

    def insert_condensation(self, cid: str, seq: int, values: Sequence[Any], runs: Sequence[Any]) -> None:
        sql = INSERT_CONDENSATION.replace("?, ?, ?, ?, ?, ?, ?, ?, ?)", "?, ?, ?, ?, ?, ?, CAST(? AS JSON), ?, ?)")
        self.execute(sql, (cid, seq, *values))
        self.executemany(INSERT_RANGE, [(cid, seq, s, e) for s, e in runs])

    def hold(self, cid: str) -> None:
        self.execute(LOCK.replace("%s", "?"), (cid,))
        # The version and last id cached at the transaction's start were another
        # conversation's (or none): ``touch`` and ``last_seq`` ask again for this one.
        self.version = None
        self.known_last = None

    def touch(self, cid: str) -> Any:
        if self.version is None:  # a write begun without the conversation's id
            self.version = self.one(
                "UPDATE conversation SET version = version + 1 WHERE id = ? RETURNING version", (cid,)
            )
        return self.version


class PostgresRecorder(Recorder):
    """One connection to the server, replaced when the server ends it.

    Failures leave as the library's errors (``fail``): ``ConnectionLost``,
    ``StatementTimeout``, ``StatementCancelled``, or ``ServerFailure``, each saying whether a
    write may have landed. After any of them the recorder is usable again: a connection the
    server has ended is replaced at the start of the next transaction, append or version
    check. A read whose snapshot has not begun retries once on the new connection; a write
    never retries."""

    backend = "postgresql"

    def __init__(self, location: Location, *, create: bool = True, readonly: bool = False):
        super().__init__()
        self._closed = False
        self.location = location
        self.label = location.label
        self.readonly = readonly
        # Autocommit: transactions are begun explicitly, as on SQLite (or are a pipeline's
        # implicit one: see append). The session's settings travel with the start-up message,
        # which costs no round trip of its own.
        settings = [f"-c {name}={value}" for name, value in SESSION_SETTINGS]
        if readonly:  # every transaction of this connection is read-only
            settings.append("-c default_transaction_read_only=on")
        self._options = _with_options(location.driver_url, settings)
        self.conn = connect_server(location, options=self._options)
        try:
            try:
                judge_server(location, self.conn, create=create and not readonly)
            except Exception as e:
                self.fail(e, writing=False)
                raise
        except BaseException:
            self.conn.close()
            raise
        self._session = PostgresSession(self.conn, self)
        self._attach()

    def _attach(self) -> None:
        """What belongs to the current connection: the libpq appender (its prepared
        statements) and the probe ``_usable`` polls."""
        self._libpq = _LibpqAppender(self.conn) if _LibpqAppender.usable(self.conn) else None
        self._probe = select.poll()
        self._probe.register(self.conn.pgconn.socket, select.POLLIN)

    # --- failures ----------------------------------------------------------------------

    def lost(self, error: BaseException) -> bool:
        """Whether ``error`` ended the connection (the server ended the session or went away,
        the network failed): then the next call connects again."""
        import psycopg

        if not isinstance(error, psycopg.Error):
            return False
        ended = isinstance(error, (psycopg.errors.AdminShutdown, psycopg.errors.CrashShutdown,
                                   psycopg.errors.IdleSessionTimeout,
                                   psycopg.errors.IdleInTransactionSessionTimeout,
                                   psycopg.errors.ConnectionException))
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

        if not isinstance(error, psycopg.Error):
            return
        reason = _first_line(error).removeprefix("consuming input failed: ")
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
            reason = _first_line(after).removeprefix("consuming input failed: ")
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
                return connect_server(self.location, options=self._options)
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
            session.pending_begin = BEGIN_WRITE
            return
        session.pending_begin = None
        # BEGIN, the lock and the conversation's last id in one round trip. MAX(id) is read
        # by a statement of its own, after the lock is granted (see append_sql).
        conn = session.conn  # (a test may stand in for the connection to see the statements)
        try:
            with conn.pipeline():
                conn.execute(BEGIN_WRITE)
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
            if timeout is not None and _lock_not_available(e):
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
        session.pending_begin = BEGIN_READ
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
                # A read-only transaction ends the same either way, but on "ROLLBACK" psycopg
                # forgets its prepared statements and deallocates them all (one more round
                # trip, then every statement prepared again), and ours (append) with them.
                self.conn.execute("COMMIT")
            elif status != TransactionStatus.IDLE:
                self.conn.execute("ROLLBACK")
        except psycopg.Error:
            self.conn.close()

    def append(
        self, conversation_id: str, rows: Sequence[tuple[Any, ...]], count: Sequence[str] = (),
        parent: str | None = None,
    ) -> tuple[int, Any, dict[str, int]] | None | object:
        """One round trip: the lock (the version bump), an INSERT that numbers the rows from
        MAX(id) + 1 on the server and, when asked, the batch counts, pipelined. With no
        BEGIN, the statements before the pipeline's Sync are one implicit transaction,
        committed at the Sync or rolled back whole if one fails (READ COMMITTED: the
        connection's default, set when it started, so each statement's snapshot is taken
        after the lock is granted). The lock is held while the server runs the statements
        and commits, never while a reply crosses the network or this process waits for a
        CPU, which is what lets many writers share one conversation.

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
                    self._failed_append(e, conversation_id, synced=appender.synced)
                    raise
            else:
                try:
                    with conn.pipeline():
                        locked = conn.execute(LOCK, (conversation_id,))
                        inserted = conn.execute(append_sql(len(rows)), params)
                        counted = (conn.execute(_pyformat(self._session.batch_sizes_sql(len(count))), count_params)
                                   if count else None)
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
        """An append's failure as the library's error. ``synced``: the pipeline's Sync, which
        commits it, was sent; if no answer came, the append may have landed."""
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
                if not self.lost(e) or self._session.active:  # (a transaction's: it fails whole)
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


class _LibpqAppender:
    """``PostgresRecorder.append`` through libpq itself (psycopg's ``pq`` layer): the same
    two prepared statements in one pipeline, with text parameters.

    It exists for speed alone. psycopg's pipeline (a generator per statement, a wait per
    send) costs this process about 250 µs of CPU per append and sends the statements in
    separate packets; this costs about 50 µs and sends them in one. The statements are
    prepared on the connection the first time each is needed (``ohm_lock``,
    ``ohm_append_<n>``). It runs only on an idle connection outside psycopg's own pipeline,
    and leaves it idle again: psycopg never sees the difference."""

    def __init__(self, conn: Any):
        import select

        self.conn = conn
        self.pgconn = conn.pgconn
        self.prepared: set[bytes] = set()
        #: The last append's Sync (its commit) was sent: a failure after it may follow a commit.
        self.synced = False
        self.readable, self.writable = select.poll(), select.poll()
        self.readable.register(self.pgconn.socket, select.POLLIN)
        self.writable.register(self.pgconn.socket, select.POLLOUT)

    @staticmethod
    def usable(conn: Any) -> bool:
        pgconn = getattr(conn, "pgconn", None)
        return pgconn is not None and hasattr(pgconn, "enter_pipeline_mode") and hasattr(pgconn, "send_query_prepared")

    def ready(self) -> bool:
        from psycopg import pq

        return (not self.conn.closed and getattr(self.conn, "_pipeline", None) is None
                and self.pgconn.transaction_status == pq.TransactionStatus.IDLE
                and self.pgconn.pipeline_status == pq.PipelineStatus.OFF)

    def _prepare(self, name: bytes, sql: str) -> None:
        import psycopg
        from psycopg import pq

        if name in self.prepared:
            return
        counter = iter(range(1, 100_000))
        text = re.sub(r"%s", lambda _: f"${next(counter)}", sql).replace("%%", "%").encode()
        result = self.pgconn.prepare(name, text)
        if result.status != pq.ExecStatus.COMMAND_OK:
            raise psycopg.errors.error_from_result(result, encoding=self.pgconn._encoding)
        self.prepared.add(name)

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

        psycopg deallocates every prepared statement of the connection after a ROLLBACK
        (a refused write); then the first statement fails, nothing has run, and the append
        is made again with the statements prepared anew."""
        import psycopg

        try:
            return self._append(n, params, count_sql, count_params)
        except psycopg.errors.InvalidSqlStatementName:
            self.prepared.clear()
            return self._append(n, params, count_sql, count_params)

    def _append(
        self, n: int, params: Sequence[Any], count_sql: str | None, count_params: Sequence[Any]
    ) -> tuple[Any, list[int], list[tuple[str, int]]]:
        import psycopg
        from psycopg import pq

        self.synced = False
        name = b"ohm_append_%d" % n
        self._prepare(b"ohm_lock", LOCK)
        self._prepare(name, append_sql(n))
        counting = b"ohm_count_%d" % (len(count_params) - 2)
        if count_sql is not None:
            self._prepare(counting, _pyformat(count_sql))
        values = [self._text(v) for v in params]
        pgconn = self.pgconn
        results = []
        pgconn.enter_pipeline_mode()
        try:
            pgconn.send_query_prepared(b"ohm_lock", values[:1])
            pgconn.send_query_prepared(name, values)
            if count_sql is not None:
                pgconn.send_query_prepared(counting, [self._text(v) for v in count_params])
            self.synced = True
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
        locked, inserted = results[:2]
        version = int(locked.get_value(0, 0)) if locked.ntuples else None
        ids = [int(inserted.get_value(i, 0)) for i in range(inserted.ntuples)]
        found = []
        if count_sql is not None:
            counted = results[2]
            found = [(counted.get_value(i, 0).decode(), int(counted.get_value(i, 1))) for i in range(counted.ntuples)]
        return version, ids, found


def read_only_query(location: Location, query: str, *, timeout: float, max_rows: int) -> QueryResult:
    """Run one statement that cannot write on the server (see ``QueryResult``).

    Read-only by construction: the session's transactions are read-only by default, the
    statement runs inside ``BEGIN READ ONLY`` (which nothing in the statement can turn back:
    PostgreSQL refuses to change a transaction's mode after its first query), the extended
    protocol takes a single statement, and the transaction is rolled back. A statement timeout
    stops it; Ctrl-C cancels it on the server (psycopg sends the cancel). A connection lost
    under it is a read like any other: it runs once more on a new connection, then
    ``ConnectionLost``.
    """
    try:
        return _read_only_query(location, query, timeout=timeout, max_rows=max_rows)
    except _Lost:
        pass
    try:
        return _read_only_query(location, query, timeout=timeout, max_rows=max_rows)
    except _Lost as e:
        raise ConnectionLost(location.label, str(e), writing=False) from None


class _Lost(Exception):
    """The connection ended under ``read_only_query``'s statement (the reason)."""


def _read_only_query(location: Location, query: str, *, timeout: float, max_rows: int) -> QueryResult:
    import psycopg

    with connect_server(location) as conn:
        try:
            conn.execute("SET default_transaction_read_only = on")
            conn.execute("BEGIN READ ONLY")
            conn.execute(f"SET LOCAL statement_timeout = {max(1, int(timeout * 1000))}")
            # prepare=True: the extended protocol, which takes one statement. Without it
            # psycopg sends a query without parameters by the simple protocol, which runs
            # every statement in the string: "COMMIT; BEGIN READ WRITE; DELETE ..." wrote.
            cursor = conn.execute(query, prepare=True)  # type: ignore[call-overload]
            rows = cursor.fetchmany(max_rows + 1) if cursor.description else []
            header = [d.name for d in cursor.description or []]
        except psycopg.errors.ReadOnlySqlTransaction as e:
            raise ReadOnlyViolation(f"sql is read-only: {_first_line(e)}") from None
        except psycopg.errors.QueryCanceled as e:
            if "statement timeout" in str(e):
                raise QueryTimeout(timeout) from None
            raise StatementCancelled(location.label, _first_line(e), writing=False) from None
        except psycopg.errors.SyntaxError as e:
            if "multiple commands" in str(e):  # the extended protocol takes one statement
                raise MultipleStatements(f"give one SQL statement at a time ({_first_line(e)})") from None
            raise QueryError(f"SQL error: {_first_line(e)}") from None
        except psycopg.Error as e:
            if conn.closed or isinstance(e, (psycopg.errors.AdminShutdown, psycopg.errors.CrashShutdown)):
                raise _Lost(_first_line(e).removeprefix("consuming input failed: ")) from None
            raise QueryError(f"SQL error: {_first_line(e)}") from None
        finally:
            if not conn.closed and conn.info.transaction_status != 0:  # not idle: end it
                try:
                    conn.execute("ROLLBACK")
                except psycopg.Error:  # it ends with the connection, which closes next
                    pass
    return QueryResult(header, [tuple(r) for r in rows[:max_rows]], len(rows) > max_rows)


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
