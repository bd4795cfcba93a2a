"""The PostgreSQL session: the shared statements (``storage/session.py``) over psycopg, with
PostgreSQL's own where the dialect differs (search over GIN indexes, COPY for batches, the
lock as the version bump) and pipelining of a transaction's ``BEGIN`` with its first
statement."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Protocol, Sequence, TypeVar

from ... import limits
from ...errors import PoolerTimeout
from ...searchable import fold_nul
from .. import search, search_waiting
from ..codec import EVENT_COLUMNS
from ..search import SearchFilters
from ..session import END, INSERT_CONDENSATION, INSERT_EVENT, INSERT_RANGE, IntegrityViolation, Session
from .dialect import LOCK, TRANSACTION_SETTINGS, pyformat


class Reconnecting(Protocol):
    """What the session asks of the recorder that holds its connection (``connection.py``):
    a driver error as the library's, and a new connection when the server ended the old."""

    def fail(self, error: BaseException, *, writing: bool, committed: bool | None = False,
             conversation_id: str | None = None) -> None: ...

    def lost(self, error: BaseException) -> bool: ...

    def reconnect(self, after: BaseException | None = None) -> None: ...

_T = TypeVar("_T")


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

    def __init__(self, conn: Any, recorder: Reconnecting):
        super().__init__(conn)
        self.recorder = recorder

    def defer_event_indexes(self) -> list[str]:
        return []  # COPY fills the indexes as it goes; a load never drops them here

    def sql(self, text: str) -> str:
        return pyformat(text)

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
        wanted = list(dict.fromkeys(u for u in uids if "\x00" not in u))  # (a row once, as IN gives it)
        if not wanted:
            return []
        # One probe of the uid index per uid (a LATERAL that the planner cannot flatten, for its
        # LIMIT): with "uid IN (...)", or a LATERAL without the LIMIT, the planner read
        # the conversation's rows by its id alone and filtered them whenever its statistics
        # did not know the conversation (a new one, or one grown since the last ANALYZE),
        # which an agent server's every batch would pay at the size of its history.
        return self.all(
            "SELECT e.id, e.uid FROM unnest(CAST(? AS text[])) AS u(uid) CROSS JOIN LATERAL "
            f"(SELECT id, uid FROM event WHERE conversation_id = ? AND uid = u.uid AND {self.no_index('id')} < ? "
            "LIMIT 1) e",  # (a uid is unique in its conversation; the LIMIT keeps the probe a probe)
            (wanted, cid, before),
        )

    def results_near(self, cid: str, seq: int, call_id: str, span: int = 256) -> list[int]:
        return [] if "\x00" in call_id else super().results_near(cid, seq, call_id, span)

    def byte_length(self, column: str) -> str:
        return f"OCTET_LENGTH({column})"

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
    pending_begin: str | tuple[str, ...] | None = None
    #: The transaction is a read (``Datastore.reading``).
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

        def send(begin: str | tuple[str, ...] | None) -> Any:
            if begin is None:
                return self.conn.execute(self.sql(text), params)
            with self.conn.pipeline():  # BEGIN and this statement in one round trip
                self._begin_with(begin)
                return self.conn.execute(self.sql(text), params)

        return self.again_if_lost(send, begin)

    def run_all(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple]]:
        """One round trip for all of them (and a pending BEGIN): a pipeline."""
        if not statements:
            return []
        begin, self.pending_begin = self.pending_begin, None

        def send(begin: str | tuple[str, ...] | None) -> list[Any]:
            with self.conn.pipeline():
                if begin is not None:
                    self._begin_with(begin)
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

    def again_if_lost(self, send: Callable[[Any], _T], begin: str | tuple[str, ...] | None) -> _T:
        """``send(begin)``, translating a failure; a read that has taken no snapshot yet (its
        BEGIN goes with this statement) or takes none (a single statement) runs once more
        on a new connection after a connection loss. A read further into its transaction
        cannot: its snapshot is gone, and statements from two snapshots would not agree.

        The second time, BEGIN goes alone first: a pooler that gives up on the command
        (PgBouncer's ``query_wait_timeout``) ends the connection, and libpq keeps the
        pooler's reason only outside a pipeline (``PoolerTimeout`` then names it)."""
        try:
            return send(begin)
        except Exception as e:
            if not (self.reading and (begin is not None or self.single) and self.recorder.lost(e)
                    and PoolerTimeout.SIGN not in str(e)):  # (a pooler that waited in vain would again)
                self.translate(e)
                raise
            self.recorder.reconnect(after=e)
        try:
            if begin is not None:
                self._begin_with(begin)
            return send(None)
        except Exception as e:
            self.translate(e)
            raise

    def send_begin(self) -> None:
        """Send a pending ``BEGIN`` on its own (before COPY, which no pipeline carries)."""
        if self.pending_begin is not None:
            begin, self.pending_begin = self.pending_begin, None
            with self.conn.pipeline():
                self._begin_with(begin)

    def _begin_with(self, begin: str | tuple[str, ...]) -> None:
        """``begin`` (a BEGIN, or a BEGIN and its ``SET LOCAL``s) and the settings every
        transaction of ours runs with, in the caller's pipeline (they end with the
        transaction: see ``TRANSACTION_SETTINGS``)."""
        for statement in (begin,) if isinstance(begin, str) else begin:
            self.conn.execute(statement)
        self.conn.execute(TRANSACTION_SETTINGS)

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
