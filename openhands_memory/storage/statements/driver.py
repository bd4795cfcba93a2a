"""The driver every statement group shares: the SQL text constants the groups use, and
``Driver``, one transaction's connection with ``execute/one/all/executemany`` and the hooks a
backend overrides (``sql`` placeholders, ``translate``, ``run_all``/``run_streaming``)."""

from __future__ import annotations

import json
from itertools import islice
from typing import Any, Iterable, Iterator, Sequence

from ... import ranges
from ...events import TOOL_KINDS
from ...ranges import Run
from ..codec import EVENT_COLUMNS

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


class Driver:
    """What every statement group runs on: one transaction's connection, and the hooks a
    backend overrides (placeholders, error translation, pipelining, dialect hints)."""

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

    def touch(self, cid: str) -> Any:
        """Mark this transaction's write to ``cid`` for other connections' view caches, and
        return the version it leaves (``Datastore.version``), read inside the transaction so
        that no later commit by someone else can slip into it."""
        raise NotImplementedError

    def no_index(self, column: str) -> str:
        """``column`` written so that the planner will not pick an index for it (SQLite's
        unary plus); PostgreSQL's planner needs no such hint."""
        return f"+{column}"

    def byte_length(self, column: str) -> str:
        """A text column's size in bytes, without counting its characters (SQLite's
        ``LENGTH`` of text walks the UTF-8; of a blob it reads the header)."""
        return f"LENGTH(CAST({column} AS BLOB))"


def _json(value: Any) -> Any:
    """A JSON column's value: SQLite hands back text, PostgreSQL the decoded object."""
    return json.loads(value) if isinstance(value, (str, bytes)) else value

