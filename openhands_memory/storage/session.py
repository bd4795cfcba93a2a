"""A transaction on the database, and every statement the library runs inside one.

``Session`` holds the SQL the two backends share, written once with ``?`` placeholders; a
backend's subclass translates the placeholders and overrides the few statements its SQL
dialect spells differently. Nothing outside ``storage/`` sees a driver connection, and
driver errors leave here as the library's own (``IntegrityViolation`` below, or the errors
in ``errors.py``).

Hot statements carry planner hints, explained in docs/architecture.md ("Stable query
plans") and held by tests/test_query_plans.py.
"""

from __future__ import annotations

import json
from itertools import islice
from typing import Any, Iterable, Iterator, Sequence

from .. import limits, ranges
from ..events import TOOL_KINDS
from ..ranges import Run
from ..searchable import fold_nul
from . import search, search_waiting
from .search import SearchFilters
from .codec import EVENT_COLUMNS
from .inspection import InspectionQueries

END = ranges.END  # "no upper bound" for id ranges

# The kinds a tool loop is made of, and the rows that end or start one (non-tool kinds and
# thinking actions): the partial index ix_event_loop_edge holds exactly the latter. The
# predicate must match the index's (schema.LOOP_EDGE_WHERE) word for word (spelled here again:
# the schema's module brings SQLAlchemy, which a command's start-up does without).
TOOL_KIND_LIST = ", ".join(f"'{k}'" for k in sorted(TOOL_KINDS))
LOOP_EDGE = f"(({' AND '.join(f'kind <> {k!r}' for k in sorted(TOOL_KINDS))}) OR has_thinking)"

INSERT_EVENT = (
    f"INSERT INTO event ({', '.join(EVENT_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in EVENT_COLUMNS)})"
)
INSERT_CONDENSATION = (
    "INSERT INTO condensation (conversation_id, id, summary, summary_offset, strategy, reason, "
    "config, tokens_before, tokens_after) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_RANGE = (
    "INSERT INTO forgotten_range (conversation_id, condensation_id, start_id, end_id) "
    "VALUES (?, ?, ?, ?)"
)
INSERT_CALL = (
    "INSERT INTO llm_call (conversation_id, condensation_id, created_at, strategy, purpose, "
    "model, prompt_tokens, completion_tokens, cost_usd, latency_s, outcome, error, response_id, "
    "attempts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_HIDDEN = (
    "INSERT INTO hidden_run (conversation_id, from_id, start_id, end_id, until_id) "
    "VALUES (?, ?, ?, ?, ?)"
)

#: The indexes of ``event`` a load into an empty table builds after its rows
#: (``Session.defer_event_indexes``): those whose keys land anywhere in the tree, the
#: external ids' (UUIDs) and the actions' response ids (1M SDK events: 8.9 s to insert and
#: build with the response ids' kept row by row, 7.7 s built after). The partial indexes on
#: ``(conversation_id, id)`` take each key at the end of the tree, which costs no more than
#: building them, and some are read during the load (the path of a Condensation's tree:
#: ``ix_event_jump``).
DEFERRED_EVENT_INDEXES = ("ix_event_response", "ux_event_uid")

# The view's statements that take no interval list (see Session.view_head and view_tail).
VIEW_ENDS = (
    "SELECT (SELECT MAX(id) FROM event WHERE conversation_id = ? AND id <= ?), "
    "(SELECT MAX(id) FROM condensation WHERE conversation_id = ? AND id <= ?), "
    "(SELECT MAX(id) FROM condensation WHERE conversation_id = ?)"
)
HIDDEN_LIVE = (
    "SELECT start_id, end_id FROM hidden_run "
    "WHERE conversation_id = ? AND until_id IS NULL ORDER BY start_id"
)
LATEST_SUMMARY = (
    "SELECT c.id, e.uid, e.timestamp, c.summary, c.summary_offset "
    "FROM condensation c JOIN event e ON e.conversation_id = c.conversation_id AND e.id = c.id "
    "WHERE c.conversation_id = ? AND c.id <= ? "
    "AND c.summary IS NOT NULL AND c.summary_offset IS NOT NULL "
    "ORDER BY c.id DESC LIMIT 1"
)
# The next conversation's number for the search index's document ids (storage/search.py):
# one seek of ux_conversation_search_key.
NEXT_SEARCH_KEY = "(SELECT COALESCE(MAX(search_key), 0) + 1 FROM conversation)"
# Pin events up to an id (ix_event_pin; a branch's view keeps those on its path).
PIN_EVENTS = (
    "SELECT id, payload FROM event WHERE conversation_id = ? AND kind = 'PinEvent' AND id <= ? ORDER BY id"
)
LAST_REQUEST = (
    "SELECT MAX(id) FROM event WHERE conversation_id = ? AND id <= ? "
    "AND kind = 'CondensationRequest'"
)

# The path from a leaf to the root, as id intervals, newest first (see tree.py): from each
# leaf, the nearest row at or before it whose parent is not the row before it (one seek of
# ix_event_jump) starts the interval, and that row's parent is the next leaf. The leaf is the
# one asked for (``at``), else HEAD, else the newest row; an empty HEAD (-1) has no path.
# Parents always precede their children, so the walk ends.
PATH = (
    "WITH RECURSIVE walk(leaf, j, depth) AS ("
    "SELECT l.leaf, (SELECT MAX(id) FROM event WHERE conversation_id = ? AND parent_seq IS NOT NULL "
    "AND id <= l.leaf), 0 FROM (SELECT COALESCE(CAST(? AS BIGINT), "
    "(SELECT head FROM conversation WHERE id = ?), "
    "(SELECT MAX(id) FROM event WHERE conversation_id = ?)) AS leaf) l WHERE l.leaf >= 0 "
    "UNION ALL "
    "SELECT p.parent_seq, (SELECT MAX(id) FROM event WHERE conversation_id = ? AND parent_seq IS NOT NULL "
    "AND id <= p.parent_seq), w.depth + 1 FROM walk w JOIN event p ON p.conversation_id = ? AND p.id = w.j "
    "WHERE p.parent_seq >= 0 AND w.depth < 1000000) "
    "SELECT COALESCE(j, 0), leaf FROM walk"
)
#: The kinds that are not nodes of the SDK's tree (never HEAD: ConversationState.append_event).
NON_NODE_KINDS = ("ConversationStateUpdateEvent",)
NON_NODE_LIST = ", ".join(f"'{k}'" for k in NON_NODE_KINDS)

# Intervals go to SQL as a VALUES list, so that reading a view costs a fixed number of
# statements however many intervals it has.
CHUNK = 4_000  # intervals per statement (two parameters each)
#: A view's columns of each row: payloads only of the rows the model sees.
VIEW_ROW_COLUMNS = ("ev.id, ev.kind, ev.has_thinking, ev.tool_call_id, ev.llm_response_id, "
                    "CASE WHEN ev.llm_visible THEN ev.payload END")
#: How many rows ``Session.run_streaming`` takes from the driver at a time.
STREAM_BATCH = 256
#: The rows of a path's intervals that are on it (a detached state update is not: tree.py).
ON_PATH = " AND ev.detached IS NULL"


class IntegrityViolation(Exception):
    """A unique or foreign key constraint refused a write (the driver's error, translated)."""


def chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """``items`` in lists of ``size`` (the last may be shorter), read as they come: the one
    batching helper (statements' parameter lists here, an import's event batches in io/)."""
    it = iter(items)
    while batch := list(islice(it, size)):
        yield batch


class Session(InspectionQueries):
    """One transaction's statements. Made by a recorder's ``reading()`` or ``writing()``."""

    #: How the backend joins the intervals' VALUES list to the event table (``ev``). SQLite's
    #: CROSS JOIN fixes the order: the list outside, a primary-key range inside.
    interval_join = "iv CROSS JOIN event ev ON ev.conversation_id = ? AND ev.id BETWEEN iv.s AND iv.e"
    #: SQLite returns those rows in id order already (a sort would copy every payload);
    #: PostgreSQL needs the ORDER BY.
    interval_order = ""
    #: Placeholders of this many parameters at most per statement.
    max_params = 30_000

    def __init__(self, conn: Any):
        self.conn = conn

    # --- the driver ----------------------------------------------------------------------

    def sql(self, text: str) -> str:
        """``text`` in the driver's placeholder style."""
        return text

    def execute(self, text: str, params: Sequence[Any] = ()) -> Any:
        try:
            return self.conn.execute(self.sql(text), params)
        except Exception as e:
            self.translate(e)
            raise

    def executemany(self, text: str, rows: Iterable[Sequence[Any]]) -> None:
        try:
            self.conn.executemany(self.sql(text), rows)
        except Exception as e:
            self.translate(e)
            raise

    def translate(self, error: Exception) -> None:
        """Raise the library's error for a driver error, or return to let it pass."""

    def run_all(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple]]:
        """The rows of each statement, in order. The statements' parameters must not depend
        on one another's results: a backend may send them together (PostgreSQL pipelines
        them into one round trip); here they run one after another."""
        return [self.all(text, params) for text, params in statements]

    def run_streaming(
        self, streamed: Sequence[tuple[str, Sequence[Any]]], statements: Sequence[tuple[str, Sequence[Any]]],
        *, once: bool = False,
    ) -> tuple[Iterator[tuple], list[list[tuple]]]:
        """``run_all(statements)``, and the rows of ``streamed`` as the caller takes them (here
        read from the file a batch at a time, so that a long view never holds every row at
        once). The caller takes them inside the same transaction. ``once``: many rows that
        are read once (a long view's), which a backend need not keep in its cache."""
        return self._stream(streamed, once), self.run_all(statements)

    def _stream(self, statements: Sequence[tuple[str, Sequence[Any]]], once: bool) -> Iterator[tuple]:
        for text, params in statements:
            cursor = self.execute(text, params)
            try:
                while batch := cursor.fetchmany(STREAM_BATCH):
                    yield from batch
            except Exception as e:
                self.translate(e)
                raise

    def one(self, text: str, params: Sequence[Any] = ()) -> Any:
        row = self.execute(text, params).fetchone()
        return None if row is None else row[0]

    def all(self, text: str, params: Sequence[Any] = ()) -> list[tuple]:
        return [tuple(r) for r in self.execute(text, params).fetchall()]

    def intervals_cte(self, intervals: Sequence[Run]) -> tuple[str, list[int]]:
        values = ", ".join("(CAST(? AS BIGINT), CAST(? AS BIGINT))" for _ in intervals)
        return f"WITH iv(s, e) AS (VALUES {values}) ", [x for run in intervals for x in run]

    # --- conversations -------------------------------------------------------------------

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

    def touch(self, cid: str) -> Any:
        """Mark this transaction's write to ``cid`` for other connections' view caches, and
        return the version it leaves (``Recorder.version``), read inside the transaction so
        that no later commit by someone else can slip into it."""
        raise NotImplementedError

    # --- events --------------------------------------------------------------------------

    def last_seq(self, cid: str, upto: int = END) -> int:
        last = self.one("SELECT MAX(id) FROM event WHERE conversation_id = ? AND id <= ?", (cid, upto))
        return -1 if last is None else last

    def insert_events(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Rows made by ``codec.event_row``."""
        self.executemany(INSERT_EVENT, rows)

    def event(self, cid: str, seq: int) -> tuple[str, str] | None:
        row = self.execute(
            "SELECT kind, payload FROM event WHERE conversation_id = ? AND id = ?", (cid, seq)
        ).fetchone()
        return None if row is None else (row[0], row[1])

    def event_page(
        self, cid: str, start: int, stop: int, limit: int, kinds: Sequence[str] | None = None,
        columns: str = "id, kind, payload",
    ) -> list[tuple]:
        """Rows with ids in ``[start, stop)``, oldest first, at most ``limit``."""
        where = "conversation_id = ? AND id >= ? AND id < ?"
        if kinds is not None:
            where += f" AND kind IN ({', '.join('?' for _ in kinds)})"
        return self.all(
            f"SELECT {columns} FROM event WHERE {where} ORDER BY id LIMIT {int(limit)}",
            (cid, start, stop, *(kinds or ())),
        )

    def seqs_of(self, cid: str, before: int, uids: Sequence[str]) -> list[tuple[int, str]]:
        """(seq, uid) of the events before ``before`` with these external ids."""
        found: list[tuple[int, str]] = []
        for chunk in chunks(list(uids), 500):
            found += self.all(
                # "+id" keeps the planner on the uid index: a range on the primary key would
                # read the whole history.
                f"SELECT id, uid FROM event WHERE conversation_id = ? AND {self.no_index('id')} < ? "
                f"AND uid IN ({', '.join('?' for _ in chunk)})",
                (cid, before, *chunk),
            )
        return found

    def defer_event_indexes(self) -> list[str]:
        """Inside a write transaction, when ``event`` holds no row yet (a new file's import):
        drop the indexes a bulk load would fill one random key at a time
        (``DEFERRED_EVENT_INDEXES``) and return the statements that build them again, which
        the loader runs once its rows are in, before it commits (``build_indexes``): built
        from the rows, sorted once, instead of kept row by row (1M events: 9 s of inserts
        against 22). Nothing may read them meanwhile (an import resolves external ids itself).
        [] when the table holds rows (building an index again would read them all) or the
        backend keeps its own way (PostgreSQL's COPY)."""
        if self.one("SELECT 1 FROM event LIMIT 1") is not None:
            return []
        names = ", ".join(f"'{n}'" for n in DEFERRED_EVENT_INDEXES)
        found = self.all(f"SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'event' "
                         f"AND name IN ({names}) ORDER BY name")
        for name, _ in found:
            self.execute(f"DROP INDEX {name}")
        return [sql for _, sql in found]

    def build_indexes(self, statements: Sequence[str]) -> None:
        """Build again the indexes ``defer_event_indexes`` dropped (their very statements)."""
        for text in statements:
            self.execute(text)

    def no_index(self, column: str) -> str:
        """``column`` written so that the planner will not pick an index for it (SQLite's
        unary plus); PostgreSQL's planner needs no such hint."""
        return f"+{column}"

    # --- condensations -------------------------------------------------------------------

    def insert_condensation(self, cid: str, seq: int, values: Sequence[Any], runs: Sequence[Run]) -> None:
        """The condensation row (``values``: summary, offset, strategy, reason, config JSON,
        tokens before, tokens after) and its forgotten ranges."""
        self.execute(INSERT_CONDENSATION, (cid, seq, *values))
        self.executemany(INSERT_RANGE, [(cid, seq, s, e) for s, e in runs])

    def latest_condensation(self, cid: str, upto: int = END) -> int | None:
        return self.one(
            "SELECT MAX(id) FROM condensation WHERE conversation_id = ? AND id <= ?", (cid, upto)
        )

    def forgotten_ranges(self, cid: str) -> list[tuple[int, int, int]]:
        """(condensation, start, end) of every forgotten range, by condensation then start."""
        return self.all(
            "SELECT condensation_id, start_id, end_id FROM forgotten_range WHERE conversation_id = ? "
            "ORDER BY condensation_id, start_id",
            (cid,),
        )

    def condensations_with_ranges(self, cid: str) -> list[tuple[int, int | None, int | None]]:
        """(condensation, start, end) rows, a condensation without ranges once with NULLs."""
        return self.all(
            "SELECT c.id, r.start_id, r.end_id FROM condensation c LEFT JOIN forgotten_range r "
            "ON r.conversation_id = c.conversation_id AND r.condensation_id = c.id "
            "WHERE c.conversation_id = ? ORDER BY c.id, r.start_id",
            (cid,),
        )

    # --- hidden runs (see hidden.py) -----------------------------------------------------

    def hidden_live(self, cid: str) -> list[Run]:
        return [(s, e) for s, e in self.all(HIDDEN_LIVE, (cid,))]

    def hidden_at(self, cid: str, condensation_id: int) -> list[Run]:
        return [(s, e) for s, e in self.all(
            "SELECT start_id, end_id FROM hidden_run WHERE conversation_id = ? AND from_id <= ? "
            "AND (until_id IS NULL OR until_id > ?) ORDER BY start_id",
            (cid, condensation_id, condensation_id),
        )]

    def any_visible(self, cid: str, lo: int, hi: int) -> bool:
        return self.one(
            "SELECT 1 FROM event WHERE conversation_id = ? AND id BETWEEN ? AND ? AND llm_visible LIMIT 1",
            (cid, lo, hi),
        ) is not None

    def close_hidden(self, cid: str, until: int, starts: Iterable[int]) -> None:
        self.executemany(
            "UPDATE hidden_run SET until_id = ? WHERE conversation_id = ? AND until_id IS NULL AND start_id = ?",
            [(until, cid, s) for s in starts],
        )

    def open_hidden(self, cid: str, since: int, runs: Iterable[Run]) -> None:
        self.executemany(INSERT_HIDDEN, [(cid, since, s, e, None) for s, e in runs])

    def hidden_rows(self, cid: str) -> list[tuple[int, int, int, int | None]]:
        """(from, start, end, until) of every hidden run row, sorted."""
        return sorted(self.all(
            "SELECT from_id, start_id, end_id, until_id FROM hidden_run WHERE conversation_id = ?", (cid,)
        ))

    def replace_hidden(self, cid: str, rows: Iterable[tuple[int, int, int, int | None]]) -> None:
        self.execute("DELETE FROM hidden_run WHERE conversation_id = ?", (cid,))
        self.executemany(INSERT_HIDDEN, [(cid, *r) for r in rows])

    # --- the view (see view/query.py) ----------------------------------------------------

    def view_ends(self, cid: str, upto: int) -> tuple[int, int | None, int | None]:
        """(the last event id <= upto, the newest condensation <= upto, the newest overall)."""
        last, cond, newest = self.execute(VIEW_ENDS, (cid, upto, cid, upto, cid)).fetchone()
        return (-1 if last is None else last), cond, newest

    def view_head(
        self, cid: str, at: int | None
    ) -> tuple[int, int | None, int | None, list[Run] | None, list[Run], list[tuple[int, str]]]:
        """In one ``run_all``: ``view_ends`` up to ``at`` (None: all), the live hidden runs when
        they are the ones in force there (no condensation after it; else None), the path
        from the view's leaf to the root (``path``), oldest interval first, and the pin events
        up to ``at`` (``pin_events``; on any branch: the caller keeps the path's)."""
        upto = END if at is None else at
        ends, live, walk, pins = self.run_all([
            (VIEW_ENDS, (cid, upto, cid, upto, cid)), (HIDDEN_LIVE, (cid,)), self.path_statement(cid, at),
            (PIN_EVENTS, (cid, upto)),
        ])
        last, cond, newest = ends[0]
        last = -1 if last is None else last
        path = sorted((s, min(e, last)) for s, e in walk if s <= min(e, last))
        live_runs = [(s, e) for s, e in live] if cond == newest else None
        return last, cond, newest, live_runs, path, [(i, p) for i, p in pins]

    def pin_events(self, cid: str, upto: int = END) -> list[tuple[int, str]]:
        """(id, payload) of the pin events with ids up to ``upto``, oldest first."""
        return [(i, p) for i, p in self.all(PIN_EVENTS, (cid, upto))]

    # --- search (storage/search.py) -------------------------------------------------------

    def search_index_on(self) -> bool:
        """Whether the database keeps the full-text index (it may be switched off)."""
        return search.sqlite_on(self.execute)

    def set_search_index(self, on: bool, progress: search.Progress | None = None) -> bool:
        """Build the index (every stored event, with ``progress``) or drop it; whether that
        changed anything."""
        if on == self.search_index_on():
            return False
        if on:
            self._create_search_index(progress)
        else:
            self._drop_search_index()
        return True

    def _create_search_index(self, progress: search.Progress | None) -> None:
        search.create_sqlite(self.execute, progress)

    def _drop_search_index(self) -> None:
        search.drop_sqlite(self.execute)

    def _search_key(self, cid: str) -> int | None:
        """The conversation's number in the search index's document ids (SQLite)."""
        row = self.execute("SELECT search_key FROM conversation WHERE id = ?", (cid,)).fetchone()
        return None if row is None else row[0]

    def _search_filters(self, filters: SearchFilters) -> tuple[str, list[Any]]:
        where, params = "", []
        if filters.kinds:
            where += f" AND e.kind IN ({', '.join('?' for _ in filters.kinds)})"
            params += list(filters.kinds)
        if filters.tools:
            where += f" AND e.tool_name IN ({', '.join('?' for _ in filters.tools)})"
            params += list(filters.tools)
        if filters.before is not None:
            where += " AND e.timestamp < ?"
            params.append(filters.before)
        if filters.after is not None:
            where += " AND e.timestamp > ?"
            params.append(filters.after)
        return where, params

    def search_words(self, cid: str, terms: Sequence[str], upto: int, limit: int,
                     filters: SearchFilters) -> list[tuple[int, float]]:
        """(id, score: higher is better) of the newest events up to ``upto`` whose text has
        every one of ``terms`` (words, stemmed; a term of several words is a phrase), newest
        first: indexed ones, and those above the watermark by the index's rules
        (``search_waiting.py``)."""
        key = self._search_key(cid)
        if key is None or not terms:
            return []
        words = search_waiting.words_match([fold_nul(t) for t in terms])
        where, params = self._search_filters(filters)
        found = [(s, -score) for s, score in self.all(
            f"SELECT event_words.rowid & {search.MASK}, bm25(event_words) FROM event_words "
            f"JOIN event e ON e.conversation_id = ? AND e.id = event_words.rowid & {search.MASK} "
            f"WHERE event_words MATCH ? AND event_words.rowid BETWEEN ? AND ?{where} "
            f"ORDER BY event_words.rowid DESC LIMIT {int(limit)}",
            (cid, words, key << search.SHIFT, (key << search.SHIFT) | upto, *params),
        )]
        return self._newest(found, self._waiting_words(cid, words, upto, limit, filters), limit)

    #: The waiting texts of the conversation searched last, in FTS5 (SQLite), kept in step
    #: from one search to the next (``search_waiting.WaitingWords``).
    _waiting: search_waiting.WaitingWords | None = None

    def _waiting_words(self, cid: str, words: str, upto: int, limit: int,
                       filters: SearchFilters) -> list[tuple[int, float]]:
        """(id, score) of the newest events above ``cid``'s watermark, up to ``upto``, kept
        by ``filters``, whose text matches the FTS5 query ``words`` as the index would."""
        where, params = self._search_filters(filters)
        rows = self.all(
            f"SELECT e.id, e.kind, CAST(e.payload AS BLOB), 1{where} FROM event e WHERE e.conversation_id = ? "
            f"AND e.id > {search.upto_of('?')} AND e.kind IN ({search.KIND_LIST})",
            (*params, cid, cid),
        )
        if self._waiting is None or self._waiting.conversation_id != cid:
            if self._waiting is not None:
                self._waiting.close()
            self._waiting = search_waiting.WaitingWords(cid)
        self._waiting.sync({i: (kind, payload) for i, kind, payload, _ in rows}, lambda ids: self._texts(cid, ids))
        return self._waiting.match(words, upto, limit, {i for i, _, _, kept in rows if kept})

    def _texts(self, cid: str, ids: Sequence[int]) -> list[tuple[int, str | None]]:
        """(id, searchable text as the index spells it) of these events."""
        found: list[tuple[int, str | None]] = []
        for chunk in chunks(list(ids), 500):
            found += self.all(f"SELECT e.id, {self.TEXT_OF_EVENT} FROM event e WHERE e.conversation_id = ? "
                              f"AND e.id IN ({', '.join('?' for _ in chunk)})", (cid, *chunk))
        return found

    @staticmethod
    def _newest(found: list[Any], waiting: list[Any], limit: int) -> list[Any]:
        """The indexed matches and those waiting above the watermark, newest first."""
        return sorted(waiting + found, reverse=True)[:limit] if waiting else found

    #: SQL: the searchable text of event ``e``, as the index spells it.
    TEXT_OF_EVENT = search.sqlite_text("e.payload")
    #: The backend, as ``search_waiting.raw_filter`` names it.
    RAW_BACKEND = "sqlite"

    def _holds(self, fragment: str) -> tuple[str, str]:
        """SQL over a lowered text ``t`` holding ``fragment``, and its parameter: the test the
        index confirms a trigram candidate with (``search_grams``)."""
        return "instr(t, lower(?)) > 0", fragment

    def _waiting_grams(self, cid: str, fragment: str, upto: int, filters: SearchFilters) -> list[int]:
        """Ids of the events above the index's watermark whose text holds ``fragment`` (any
        case), newest first: the newest events, not indexed yet (storage/search.py). Up to
        FLUSH_AT of them: the JSON of each is first searched as it is stored, and only those
        that may hold it are spelled (some 5 us each)."""
        where, params = self._search_filters(filters)
        raw = search.raw_safe(fragment)
        if raw:
            where += " AND " + search_waiting.raw_filter(fragment, self.RAW_BACKEND)
            params.append(search.like_pattern(fragment))
        holds, needle = self._holds(fragment)
        return [s for (s,) in self.all(
            f"SELECT seq FROM (SELECT e.id AS seq, lower({self.TEXT_OF_EVENT}) AS t FROM event e "
            f"WHERE e.conversation_id = ? AND e.id > {search.upto_of('?')} AND e.id <= ? "
            f"AND e.kind IN ({search.KIND_LIST}){where}) AS waiting WHERE {holds} ORDER BY seq DESC",
            (cid, cid, upto, *params, needle),
        )]

    def search_grams(self, cid: str, fragment: str, upto: int, limit: int,
                     filters: SearchFilters) -> list[int]:
        """Ids of the newest events up to ``upto`` whose text holds ``fragment`` (three
        characters or more, any case), newest first."""
        key = self._search_key(cid)
        fragment = fold_nul(fragment)
        if key is None or len(fragment) < 3:
            return []
        where, params = self._search_filters(filters)
        found = [s for (s,) in self.all(
            f"SELECT event_grams.rowid & {search.MASK} FROM event_grams "
            f"JOIN event e ON e.conversation_id = ? AND e.id = event_grams.rowid & {search.MASK} "
            f"WHERE event_grams MATCH ? AND event_grams.rowid BETWEEN ? AND ?{where} "
            f"AND instr(lower({search.sqlite_text('e.payload')}), lower(?)) > 0 "
            f"ORDER BY event_grams.rowid DESC LIMIT {int(limit)}",
            (cid, search_waiting.gram_match(fragment), key << search.SHIFT, (key << search.SHIFT) | upto,
             *params, fragment),
        )]
        waiting = self._waiting_grams(cid, fragment, upto, filters)
        return self._newest(found, waiting, limit)

    def hidden_by(self, cid: str, seq: int) -> int | None:
        """The condensation whose live hidden run holds ``seq`` (ix_hidden_run_live)."""
        row = self.execute(
            "SELECT from_id, end_id FROM hidden_run WHERE conversation_id = ? AND until_id IS NULL "
            "AND start_id <= ? ORDER BY start_id DESC LIMIT 1",
            (cid, seq),
        ).fetchone()
        return row[0] if row is not None and row[1] >= seq else None

    def results_near(self, cid: str, seq: int, call_id: str, span: int = 256) -> list[int]:
        """Ids near ``seq`` (a primary-key range) holding tool call ``call_id``: a call's
        result, a result's call."""
        return [s for (s,) in self.all(
            "SELECT id FROM event WHERE conversation_id = ? AND id BETWEEN ? AND ? AND tool_call_id = ? AND id <> ?",
            (cid, seq - span, seq + span, call_id, seq),
        )]

    def event_rows(self, cid: str, seqs: Sequence[int]) -> list[tuple[int, str, str, str | None, str, str]]:
        """(id, uid, kind, tool_name, timestamp, payload) of the events with these ids."""
        found: list[tuple[int, str, str, str | None, str, str]] = []
        for chunk in chunks(sorted(set(seqs)), 500):
            found += self.all(
                "SELECT id, uid, kind, tool_name, timestamp, payload FROM event WHERE conversation_id = ? "
                f"AND id IN ({', '.join('?' for _ in chunk)}) ORDER BY id",
                (cid, *chunk),
            )
        return found

    def view_tail(
        self, cid: str, intervals: Sequence[Run], upto: int, *, count: bool = True, once: bool = False
    ) -> tuple[Iterator[tuple], list[tuple], tuple | None, int | None, dict[str, int]]:
        """What a view reads once its intervals are known, in one ``run_streaming``: the rows
        (``VIEW_ROW_COLUMNS`` of each, to be taken inside the transaction), the interval
        edges (as ``view_edges``), the newest summary (condensation id, its uid, timestamp,
        summary, offset), the newest request's id and (``count``) ``batch_sizes`` up to
        ``upto`` for the response ids of the rows' actions. ``once``: a long view's rows
        (``run_streaming``)."""
        rows = self.interval_statements(cid, intervals, VIEW_ROW_COLUMNS, ON_PATH)
        edges = self.edge_statements(cid, intervals)
        counts = self.batch_statements(cid, intervals, upto) if count else []
        found_rows, results = self.run_streaming(
            rows, [*edges, *counts, (LATEST_SUMMARY, (cid, upto)), (LAST_REQUEST, (cid, upto))], once=once)
        found_edges = [r for part in results[: len(edges)] for r in part]
        sizes = {rid: n for part in results[len(edges) : -2] for rid, n in part}
        summary, request = results[-2], results[-1]
        return (found_rows, found_edges, (summary[0] if summary else None), (request[0][0] if request else None),
                sizes)

    def batch_statements(self, cid: str, intervals: Sequence[Run], upto: int) -> list[tuple[str, list[Any]]]:
        """``batch_sizes`` up to ``upto`` for the response ids of the actions in ``intervals``,
        which the database finds itself: so the counts go with the statements that read those
        rows, not in a round trip after them."""
        out = []
        for part in chunks(intervals, CHUNK):
            cte, params = self.intervals_cte(part)
            actions = f"SELECT ev.llm_response_id FROM {self.interval_join} WHERE ev.kind = 'ActionEvent'{ON_PATH}"
            out.append((cte + self.batch_sizes_sql(0, actions), [*params, cid, upto, cid]))
        return out

    def interval_statements(
        self, cid: str, intervals: Sequence[Run], select: str, where: str = "", *, ordered: bool = True
    ) -> list[tuple[str, list[Any]]]:
        """The statements of ``over_intervals`` (one per CHUNK intervals)."""
        out = []
        for part in chunks(intervals, CHUNK):
            cte, params = self.intervals_cte(part)
            out.append((
                f"{cte}SELECT {select} FROM {self.interval_join}{where}{self.interval_order if ordered else ''}",
                [*params, cid],
            ))
        return out

    def over_intervals(
        self, cid: str, intervals: Sequence[Run], select: str, where: str = "", *, ordered: bool = True
    ) -> Iterator[tuple]:
        """``SELECT select`` over the event rows (``ev``) of ``intervals``, in id order
        (``ordered=False`` for an aggregate)."""
        for text, params in self.interval_statements(cid, intervals, select, where, ordered=ordered):
            yield from self.execute(text, params)

    def edge_statements(self, cid: str, intervals: Sequence[Run]) -> list[tuple[str, list[Any]]]:
        out = []
        for part in chunks(intervals, CHUNK):
            cte, params = self.intervals_cte(part)
            out.append((
                cte + "SELECT iv.s, iv.e, "
                "(SELECT CASE WHEN kind = 'ActionEvent' AND has_thinking THEN id END FROM event "
                f"WHERE conversation_id = ? AND id < iv.s AND {LOOP_EDGE} AND detached IS NULL "
                "ORDER BY id DESC LIMIT 1), "
                f"(SELECT kind IN ({TOOL_KIND_LIST}) AND NOT has_thinking FROM event "
                "WHERE conversation_id = ? AND id = iv.e + 1) FROM iv",
                [*params, cid, cid],
            ))
        return out

    def view_edges(self, cid: str, intervals: Sequence[Run]) -> Iterator[tuple[int, int, int | None, Any]]:
        """For each interval (s, e): the thinking action whose loop the row before s belongs
        to, if any, and whether row e + 1 is a tool event that would continue a loop."""
        for text, params in self.edge_statements(cid, intervals):
            yield from self.execute(text, params)

    def batch_sizes(self, cid: str, upto: int, rids: Iterable[str]) -> dict[str, int]:
        """How many ActionEvents with id <= upto each response id has (absent: none)."""
        out: dict[str, int] = {}
        for chunk in chunks(sorted(rids), 500):
            out.update(self.all(self.batch_sizes_sql(len(chunk)), (cid, upto, *chunk)))
        return out

    def batch_sizes_sql(self, n: int, ids: str | None = None) -> str:
        """``batch_sizes``' statement for ``n`` response ids (parameters: cid, upto, ids), or
        for those an SQL subquery ``ids`` selects (parameters: cid, upto, its own)."""
        return (
            f"SELECT llm_response_id, COUNT(*) FROM event WHERE {self.no_index('conversation_id')} = ? "
            # Hinted off conversation_id and id: on them the planner may pick the uid or
            # primary key index and read every row of the conversation. The partial
            # response-id index is then the only choice: one seek per batch.
            f"AND kind = 'ActionEvent' AND {self.no_index('id')} <= ? "
            f"AND llm_response_id IN ({ids or ', '.join('?' for _ in range(n))}) "
            f"GROUP BY llm_response_id"
        )

    # --- the history tree (see tree.py) ---------------------------------------------------

    def path_statement(self, cid: str, at: int | None) -> tuple[str, list[Any]]:
        return PATH, [cid, at, cid, cid, cid, cid]

    def path(self, cid: str, at: int | None = None) -> list[Run]:
        """The intervals of ids on the path from ``at`` (None: HEAD) to the root, oldest
        first; empty for an empty HEAD."""
        text, params = self.path_statement(cid, at)
        return sorted((s, e) for s, e in self.all(text, params))

    def head(self, cid: str) -> int | None:
        """HEAD as stored: None while it is the newest row, -1 when empty, else an id."""
        return self.one("SELECT head FROM conversation WHERE id = ?", (cid,))

    def set_head(self, cid: str, head: int | None) -> None:
        self.execute("UPDATE conversation SET head = ? WHERE id = ?", (head, cid))

    def append_point(
        self, cid: str, parent: str | None, count: Iterable[str] = ()
    ) -> tuple[int, bool, dict[str, int]] | None:
        """Where an append goes, in one statement (an append asks it every time): the next
        id; whether a row there whose event names ``parent`` (an external id, or None) simply
        follows the newest row (HEAD is the newest row, and the event names no parent or that
        row: see tree.py); and ``batch_sizes`` up to the newest row for the response ids in
        ``count`` (one is counted in the same statement: a step's new action). None when
        there is no such conversation."""
        rids = sorted(set(count))
        one = rids if len(rids) == 1 else []
        # Hinted off conversation_id and id as batch_sizes_sql is: the response-id index.
        counted = (f", (SELECT COUNT(*) FROM event WHERE {self.no_index('conversation_id')} = c.id "
                   f"AND kind = 'ActionEvent' AND {self.no_index('id')} <= m.last AND llm_response_id = ?)"
                   if one else "")
        row = self.execute(
            "SELECT m.last, c.head IS NULL AND (CAST(? AS TEXT) IS NULL OR (SELECT uid FROM event "
            f"WHERE conversation_id = c.id AND id = m.last) = CAST(? AS TEXT)){counted} FROM conversation c, "
            "(SELECT MAX(id) AS last FROM event WHERE conversation_id = ?) m WHERE c.id = ?",
            (parent, parent, *one, cid, cid),
        ).fetchone()
        if row is None:
            return None
        first = (-1 if row[0] is None else row[0]) + 1
        if one:
            counts = {one[0]: row[2]} if row[2] else {}
        else:
            counts = self.batch_sizes(cid, first - 1, rids) if rids else {}
        return first, bool(row[1]), counts

    def uid_of(self, cid: str, seq: int) -> str | None:
        return self.one("SELECT uid FROM event WHERE conversation_id = ? AND id = ?", (cid, seq))

    def set_payloads(self, cid: str, payloads: Sequence[tuple[int, str]]) -> None:
        """Rewrite rows' JSON (a fork renumbers what its Condensations forgot by id)."""
        self.executemany(
            "UPDATE event SET payload = ? WHERE conversation_id = ? AND id = ?",
            [(text, cid, seq) for seq, text in payloads],
        )

    def set_parents(self, cid: str, parents: Sequence[tuple[int, int]]) -> None:
        """(id, parent id) of rows whose parent is not the row before them (-1: a root)."""
        self.executemany(
            "UPDATE event SET parent_seq = ? WHERE conversation_id = ? AND id = ?",
            [(parent, cid, seq) for seq, parent in parents],
        )

    def set_detached(self, cid: str, seqs: Sequence[int]) -> None:
        """Mark non-node rows that the next event skips (see tree.py)."""
        self.executemany(
            "UPDATE event SET detached = TRUE WHERE conversation_id = ? AND id = ?", [(cid, seq) for seq in seqs]
        )

    def chains_between(self, cid: str, lo: int, hi: int) -> bool:
        """Whether every row with an id in [lo, hi] is a non-node whose parent is the row
        before it: then a row after them whose parent is lo - 1 continues lo - 1's branch."""
        return self.one(
            "SELECT 1 FROM event WHERE conversation_id = ? AND id BETWEEN ? AND ? "
            f"AND (kind NOT IN ({NON_NODE_LIST}) OR parent_seq IS NOT NULL) LIMIT 1",
            (cid, lo, hi),
        ) is None

    def jumps(self, cid: str) -> list[tuple[int, int]]:
        """(id, parent) of every row whose parent is not the row before it, by id."""
        return self.all(
            "SELECT id, parent_seq FROM event WHERE conversation_id = ? AND parent_seq IS NOT NULL ORDER BY id",
            (cid,),
        )

    def last_node(self, cid: str, lo: int, hi: int) -> int | None:
        """The newest row in [lo, hi] that is a node of the tree."""
        return self.one(
            "SELECT MAX(id) FROM event WHERE conversation_id = ? AND id BETWEEN ? AND ? "
            f"AND kind NOT IN ({NON_NODE_LIST})",
            (cid, lo, hi),
        )

    def hidden_on_path(self, cid: str, path: Sequence[Run]) -> list[tuple[int, int, int, int | None]]:
        """(from, start, end, until) of the hidden runs in force on a path: written by a
        condensation on it, and not merged away by one on it. The live runs (few, from their
        partial index), then the merged ones whose merger lies in a gap of the path or past
        its leaf (spelled out, read from the covering index ``ix_hidden_run_path``)."""
        cte, params = self.intervals_cte(path)
        gaps = [(a[1] + 1, b[0] - 1) for a, b in zip(path, path[1:]) if b[0] > a[1] + 1]
        closed_off = "".join(" OR h.until_id BETWEEN ? AND ?" for _ in gaps)
        return self.all(
            cte + "SELECT h.from_id, h.start_id, h.end_id, h.until_id FROM hidden_run h "
            "WHERE h.conversation_id = ? AND h.until_id IS NULL "
            "AND EXISTS (SELECT 1 FROM iv WHERE h.from_id BETWEEN iv.s AND iv.e) "
            "UNION ALL SELECT h.from_id, h.start_id, h.end_id, h.until_id FROM iv JOIN hidden_run h "
            "ON h.conversation_id = ? AND h.from_id BETWEEN iv.s AND iv.e "
            f"WHERE h.until_id IS NOT NULL AND (h.until_id > ?{closed_off}) ORDER BY 2",
            [*params, cid, cid, path[-1][1], *[x for gap in gaps for x in gap]],
        )

    def close_hidden_rows(self, cid: str, until: int, keys: Iterable[tuple[int, int]]) -> None:
        """Close the live runs ``(from, start)`` (``close_hidden`` where several branches may
        each have a live run starting at one id)."""
        self.executemany(
            "UPDATE hidden_run SET until_id = ? WHERE conversation_id = ? AND until_id IS NULL "
            "AND from_id = ? AND start_id = ?",
            [(until, cid, f, s) for f, s in keys],
        )

    def path_ends(self, cid: str, path: Sequence[Run]) -> tuple[int | None, int | None]:
        """(the newest condensation, the newest request) on a path."""
        cte, params = self.intervals_cte(path)
        row = self.execute(
            cte + "SELECT (SELECT MAX(c) FROM (SELECT (SELECT MAX(id) FROM condensation WHERE conversation_id = ? "
            "AND id BETWEEN iv.s AND iv.e) AS c FROM iv) x), "
            "(SELECT MAX(r) FROM (SELECT (SELECT MAX(id) FROM event WHERE conversation_id = ? "
            "AND id BETWEEN iv.s AND iv.e AND kind = 'CondensationRequest') AS r FROM iv) y)",
            [*params, cid, cid],
        ).fetchone()
        return row[0], row[1]

    def branch_tail(
        self, cid: str, intervals: Sequence[Run], edges: Sequence[tuple[int, int, int | None, int | None]],
        path: Sequence[Run], *, once: bool = False,
    ) -> tuple[Iterator[tuple], list[tuple], tuple | None]:
        """``view_tail`` for a view whose path branches: the rows of ``intervals``; the edges
        of each (s, e, the row before s on the path when it is hidden, the row after e when
        hidden), as ``view_edges``; the newest summary on the path."""
        rows = self.interval_statements(cid, intervals, VIEW_ROW_COLUMNS, ON_PATH)
        edge_sql = []
        for part in chunks(edges, CHUNK):
            values = ", ".join("(CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT))"
                               for _ in part)
            edge_sql.append((
                f"WITH iv(s, e, p, n) AS (VALUES {values}) SELECT iv.s, iv.e, "
                "(SELECT CASE WHEN kind = 'ActionEvent' AND has_thinking THEN id END FROM event "
                f"WHERE conversation_id = ? AND id <= iv.p AND {LOOP_EDGE} AND detached IS NULL "
                "ORDER BY id DESC LIMIT 1), "
                f"(SELECT kind IN ({TOOL_KIND_LIST}) AND NOT has_thinking FROM event "
                "WHERE conversation_id = ? AND id = iv.n) FROM iv",
                [*[x for quad in part for x in quad], cid, cid],
            ))
        cte, params = self.intervals_cte(path)
        summary = (
            cte + "SELECT c.id, e.uid, e.timestamp, c.summary, c.summary_offset FROM condensation c "
            "JOIN event e ON e.conversation_id = c.conversation_id AND e.id = c.id "
            "WHERE c.conversation_id = ? AND c.id = (SELECT MAX(m) FROM (SELECT (SELECT MAX(id) FROM condensation "
            "WHERE conversation_id = ? AND id BETWEEN iv.s AND iv.e AND summary IS NOT NULL "
            "AND summary_offset IS NOT NULL) AS m FROM iv) x)",
            [*params, cid, cid],
        )
        found_rows, results = self.run_streaming(rows, [*edge_sql, summary], once=once)
        found_edges = [r for part in results[: len(edge_sql)] for r in part]
        return found_rows, found_edges, (results[-1][0] if results[-1] else None)

    def batch_sizes_on(self, cid: str, path: Sequence[Run], rids: Iterable[str]) -> dict[str, int]:
        """``batch_sizes`` counting only the actions on a path."""
        out: dict[str, int] = {}
        for chunk in chunks(sorted(rids), 500):
            cte, params = self.intervals_cte(path)
            out.update(self.all(
                cte + f"SELECT llm_response_id, COUNT(*) FROM event WHERE {self.no_index('conversation_id')} = ? "
                f"AND kind = 'ActionEvent' AND llm_response_id IN ({', '.join('?' for _ in chunk)}) "
                "AND EXISTS (SELECT 1 FROM iv WHERE id BETWEEN iv.s AND iv.e) GROUP BY llm_response_id",
                [*params, cid, *chunk],
            ))
        return out

    def copy_path(self, source: str, target: str, moves: Sequence[tuple[int, int, int]]) -> None:
        """Copy the rows of a path into another conversation (a fork): ``moves`` are
        (start, end, shift) per interval; each row lands at its id plus shift, and so do the
        condensations among them. Their forgotten ranges are cut per interval, each part
        moved by its own interval's shift (a range that spans a jump of the path, written
        before ranges were cut at jumps, names rows of other branches between its parts);
        the hidden runs are the caller's to rebuild."""
        cols = [c for c in EVENT_COLUMNS if c not in ("conversation_id", "id")]
        for s, e, shift in moves:
            self.execute(
                f"INSERT INTO event (conversation_id, id, {', '.join(cols)}) "
                f"SELECT ?, id + ?, {', '.join(cols)} FROM event WHERE conversation_id = ? AND id BETWEEN ? AND ?",
                (target, shift, source, s, e),
            )
            self.execute(
                "INSERT INTO condensation (conversation_id, id, summary, summary_offset, strategy, reason, config, "
                "tokens_before, tokens_after) SELECT ?, id + ?, summary, summary_offset, strategy, reason, config, "
                "tokens_before, tokens_after FROM condensation WHERE conversation_id = ? AND id BETWEEN ? AND ?",
                (target, shift, source, s, e),
            )
        runs: dict[int, list[Run]] = {}
        for s, e, _ in moves:
            for cond, start, end in self.all(
                "SELECT condensation_id, start_id, end_id FROM forgotten_range "
                "WHERE conversation_id = ? AND condensation_id BETWEEN ? AND ?", (source, s, e),
            ):
                runs.setdefault(cond, []).append((start, end))
        out = []
        for cond, forgot in runs.items():
            shift = next(d for s, e, d in moves if s <= cond <= e)
            before = [(s, min(e, cond - 1), d) for s, e, d in moves if s < cond]  # its own path
            out += [(target, cond + shift, a, b) for a, b in ranges.moved(forgot, before)]
        self.executemany(INSERT_RANGE, out)

    # --- token counts (see conversation/tokens.py) -----------------------------------------

    def token_counts(self, cid: str, intervals: Sequence[Run]) -> dict[int, int | None]:
        """Every LLM-visible row's cached token count (None: not counted yet)."""
        return dict(self.over_intervals(cid, intervals, "ev.id, ev.token_count", " AND ev.llm_visible"))

    def set_token_counts(self, cid: str, counts: Iterable[tuple[int, int]]) -> None:
        self.executemany(
            "UPDATE event SET token_count = ? WHERE conversation_id = ? AND id = ?",
            [(n, cid, seq) for seq, n in counts],
        )

    def clear_token_counts(self, cid: str) -> None:
        self.execute(
            "UPDATE event SET token_count = NULL WHERE conversation_id = ? AND token_count IS NOT NULL",
            (cid,),
        )

    # --- the ledger ----------------------------------------------------------------------

    def insert_llm_calls(self, rows: Sequence[Sequence[Any]]) -> None:
        """Rows in ``INSERT_CALL`` column order."""
        self.executemany(INSERT_CALL, rows)

    # --- model replies kept for reuse (revision 0009) ---------------------------------------

    def llm_reply(self, key: str) -> str | None:
        """The reply kept under ``key`` (its JSON), or None."""
        return self.one("SELECT reply FROM llm_reply WHERE key = ?", (key,))

    def keep_llm_reply(self, key: str, model: str, reply: str, created_at: str) -> None:
        """Keep a reply (a second one under the same key changes nothing)."""
        self.execute("INSERT INTO llm_reply (key, model, reply, created_at) VALUES (?, ?, ?, ?) "
                     "ON CONFLICT (key) DO NOTHING", (key, model, reply, created_at))

    # --- what the OpenHands SDK keeps beside events (revision 0005) ----------------------

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


def _json(value: Any) -> Any:
    """A JSON column's value: SQLite hands back text, PostgreSQL the decoded object."""
    return json.loads(value) if isinstance(value, (str, bytes)) else value

