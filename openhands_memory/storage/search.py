"""The full-text index of events' text (revision 0008; the rule: ``searchable.py``).

SQLite: two contentless FTS5 tables kept by triggers on ``event``, through a queue:

* ``event_words``: porter stemming over unicode61 (diacritics folded), ranked by bm25;
* ``event_grams``: trigrams with ``detail=none`` (no positions: a quarter of the size of a
  full trigram index), so a fragment matches as the AND of its trigrams and is then confirmed
  against the text (``instr``), which a few candidates cost nothing.

A new event waits in ``search_pending`` (its document id, conversation and id), and every
``FLUSH_AT`` events the queue goes into both tables at once, in the transaction that filled
it: FTS5 writes a segment for each transaction, which for single appends was most of their
cost. The connection keeps its statement journals in memory (``database.connect``): a
statement that fires triggers keeps one, and in a temporary file it cost more than the
append. A search reads the queue too, matching each word as a substring of the text (the
queue holds a conversation's newest events, so it is short, and seldom forgotten).

A document's id is ``conversation.search_key << 32 | event.id``: a conversation's events are
one range of ids (a search never reads another conversation's), newest last, so that
``ORDER BY rowid DESC`` reads the newest matches first and stops at the limit, and the id
does not move when VACUUM renumbers rowids. The text is spelled in SQL (``json_tree`` over
``searchable.TEXT_KEYS``), so that every connection keeps the index right, and contentless
tables can be told what to unindex: the triggers recompute it from the old row.

PostgreSQL: ``ohm_search_text(kind, payload)`` spells the same text; GIN expression indexes
on ``to_tsvector('english', …)`` and on ``pg_trgm`` trigrams index it (with the event id, so
that a search reads windows of the newest ids: ``PG_WINDOW``), kept in the writing
transaction as any index is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..searchable import SEARCHED_KINDS, TEXT_KEYS


@dataclass(frozen=True)
class SearchFilters:
    """What a search keeps besides its words: kinds, tool names, ISO timestamps."""

    kinds: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    before: str | None = None
    after: str | None = None

#: A conversation's documents are ids ``key << SHIFT`` .. ``(key << SHIFT) | MASK``.
SHIFT = 32
MASK = (1 << SHIFT) - 1

KIND_LIST = ", ".join(f"'{k}'" for k in SEARCHED_KINDS)
KEY_LIST = ", ".join(f"'{k}'" for k in TEXT_KEYS)


def sqlite_text(payload: str) -> str:
    """The searchable text of a payload column, in SQLite's SQL (``searchable.text_of``)."""
    return (f"(SELECT group_concat(value, char(10)) FROM json_tree({payload}) "
            f"WHERE type = 'text' AND key IN ({KEY_LIST}))")


def _doc(row: str) -> str:
    return (f"(((SELECT search_key FROM conversation WHERE id = {row}.conversation_id) << {SHIFT}) "
            f"| {row}.id)")


WORDS = "event_words"
GRAMS = "event_grams"
PENDING = "search_pending"
#: Events wait in ``search_pending`` until this many have, then go into the FTS5 tables in
#: one batch: FTS5 writes a segment per transaction, and one per appended event cost 1.5 ms;
#: each segment is then merged into larger ones, so fewer, larger ones cost less again
#: (revision 0010: 1,024 and ``AUTOMERGE`` made single appends 1.6x faster than 128 and 4).
FLUSH_AT = 1024
#: Segments of one size FTS5 lets pile up before it merges them into one (its default: 4).
#: Fewer merges rewrite each posting fewer times; a search reads a few more segments.
AUTOMERGE = 16
PENDING_TABLE = (f"CREATE TABLE {PENDING} (n INTEGER PRIMARY KEY, doc INTEGER NOT NULL UNIQUE, "
                 "conversation_id TEXT NOT NULL, seq INTEGER NOT NULL)")
TABLES = (
    f"CREATE VIRTUAL TABLE {WORDS} USING fts5(body, content='', "
    "tokenize='porter unicode61 remove_diacritics 2')",
    f"CREATE VIRTUAL TABLE {GRAMS} USING fts5(body, content='', tokenize='trigram', detail='none')",
    PENDING_TABLE,
    *(f"INSERT INTO {t}({t}, rank) VALUES ('automerge', {AUTOMERGE})" for t in (WORDS, GRAMS)),
)


def stem(term: str) -> str:
    """What a word of a query must hold of an event's text in the queue, where FTS5 cannot
    stem it: the word less a common English ending ("checking", "checked", "checks": "check")."""
    word = term.lower()
    for ending in ("ing", "ed", "es", "s"):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            return word[: -len(ending)]
    return word


def _pending(row: str) -> str:
    return f"EXISTS (SELECT 1 FROM {PENDING} WHERE doc = {_doc(row)})"


def _unindex(row: str, when: str) -> str:
    """Statements taking ``row`` out of the index (its pending entry, or its documents)."""
    return "".join(
        f"INSERT INTO {t}({t}, rowid, body) SELECT 'delete', {_doc(row)}, {sqlite_text(row + '.payload')} "
        f"WHERE {when} AND NOT {_pending(row)}; "
        for t in (WORDS, GRAMS)
    ) + f"DELETE FROM {PENDING} WHERE doc = {_doc(row)}; "


def _queue(row: str, when: str = "1") -> str:
    return (f"INSERT INTO {PENDING}(doc, conversation_id, seq) SELECT {_doc(row)}, {row}.conversation_id, "
            f"{row}.id WHERE {when}; ")


_LIVE = "EXISTS (SELECT 1 FROM conversation WHERE id = {row}.conversation_id)"
_FLUSH = "".join(
    f"INSERT INTO {t}(rowid, body) SELECT p.doc, {sqlite_text('e.payload')} FROM {PENDING} p "
    "JOIN event e ON e.conversation_id = p.conversation_id AND e.id = p.seq; "
    for t in (WORDS, GRAMS)
) + f"DELETE FROM {PENDING}; "
TRIGGERS = (
    f"CREATE TRIGGER event_search_insert AFTER INSERT ON event WHEN new.kind IN ({KIND_LIST}) "
    f"BEGIN {_queue('new')}END",
    # ``n`` is the queue's rowid: one more than the largest, so it counts the queue (emptied
    # by each flush) without a COUNT(*) on every append.
    f"CREATE TRIGGER search_pending_flush AFTER INSERT ON {PENDING} "
    f"WHEN new.n >= {FLUSH_AT} BEGIN {_FLUSH}END",
    # A conversation's cascade deletes its events after its row: its own trigger unindexes them.
    f"CREATE TRIGGER event_search_delete AFTER DELETE ON event WHEN old.kind IN ({KIND_LIST}) "
    f"AND {_LIVE.format(row='old')} BEGIN {_unindex('old', '1')}END",
    f"CREATE TRIGGER event_search_update AFTER UPDATE OF kind, payload ON event "
    f"WHEN old.kind IN ({KIND_LIST}) OR new.kind IN ({KIND_LIST}) BEGIN "
    f"{_unindex('old', f'old.kind IN ({KIND_LIST})')}{_queue('new', f'new.kind IN ({KIND_LIST})')}END",
    "CREATE TRIGGER conversation_search_delete BEFORE DELETE ON conversation BEGIN "
    + "".join(
        f"INSERT INTO {t}({t}, rowid, body) SELECT 'delete', (old.search_key << {SHIFT}) | e.id, "
        f"{sqlite_text('e.payload')} FROM event e WHERE e.conversation_id = old.id AND e.kind IN ({KIND_LIST}) "
        f"AND NOT EXISTS (SELECT 1 FROM {PENDING} WHERE doc = (old.search_key << {SHIFT}) | e.id); "
        for t in (WORDS, GRAMS)
    )
    + f"DELETE FROM {PENDING} WHERE conversation_id = old.id; END",
)
TRIGGER_NAMES = ("event_search_insert", "search_pending_flush", "event_search_delete", "event_search_update",
                 "conversation_search_delete")

Progress = Callable[[int, int], None]  # (done, total)
#: Runs one statement: a migration's ``bind.exec_driver_sql``, a session's ``execute``.
Run = Callable[..., Any]


def _scalar(run: Run, text: str, params: tuple = ()) -> Any:
    rows = run(text, params).fetchall()
    return rows[0][0] if rows else None


def backfill_sqlite(run: Run, progress: Progress | None = None, chunk: int = 20_000) -> int:
    """Index every event already stored, a chunk of ids at a time; returns how many."""
    total = _scalar(run, f"SELECT COUNT(*) FROM event WHERE kind IN ({KIND_LIST})") or 0
    done = 0
    keys = run("SELECT id, search_key FROM conversation ORDER BY search_key", ()).fetchall()
    for cid, key in keys:
        last = _scalar(run, "SELECT MAX(id) FROM event WHERE conversation_id = ?", (cid,))
        for lo in range(0, (last if last is not None else -1) + 1, chunk):
            text = sqlite_text("payload")
            for t in (WORDS, GRAMS):
                run(
                    f"INSERT INTO {t}(rowid, body) SELECT ({int(key)} << {SHIFT}) | id, {text} FROM event "
                    f"WHERE conversation_id = ? AND id BETWEEN ? AND ? AND kind IN ({KIND_LIST})",
                    (cid, lo, lo + chunk - 1),
                )
            done += _scalar(
                run,
                f"SELECT COUNT(*) FROM event WHERE conversation_id = ? AND id BETWEEN ? AND ? AND kind IN ({KIND_LIST})",
                (cid, lo, lo + chunk - 1),
            ) or 0
            if progress is not None:
                progress(done, total)
    return done


def create_sqlite(run: Run, progress: Progress | None = None) -> None:
    for statement in TABLES:
        run(statement, ())
    backfill_sqlite(run, progress)
    for statement in TRIGGERS:
        run(statement, ())


def drop_sqlite(run: Run) -> None:
    for name in TRIGGER_NAMES:
        run(f"DROP TRIGGER IF EXISTS {name}", ())
    for t in (WORDS, GRAMS, PENDING):
        run(f"DROP TABLE IF EXISTS {t}", ())


def sqlite_on(run: Run) -> bool:
    """Whether the file keeps a search index (``search-index off`` drops its tables)."""
    return _scalar(run, f"SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '{WORDS}'") == 1


# --- PostgreSQL ----------------------------------------------------------------------------

PG_TEXT_OF = "ohm_search_text({e}.kind, {e}.payload)"
PG_VECTOR_OF = "to_tsvector('english'::regconfig, ohm_search_text({e}.kind, {e}.payload))"
PG_TEXT = "ohm_search_text(kind, payload)"
PG_VECTOR = f"to_tsvector('english'::regconfig, {PG_TEXT})"
PG_FUNCTION = (
    "CREATE OR REPLACE FUNCTION ohm_search_text(kind text, payload text) RETURNS text "
    # COST: spelling a row's text parses its JSON (some 50 us): the planner should read the
    # indexes rather than spell the text of every row in a window.
    "LANGUAGE sql IMMUTABLE PARALLEL SAFE COST 10000 AS $$ "
    "WITH RECURSIVE walk(key, value) AS ("
    f"SELECT NULL::text, CASE WHEN kind IN ({KIND_LIST}) THEN payload::jsonb END "
    "UNION ALL "
    "SELECT c.key, c.value FROM walk w CROSS JOIN LATERAL ("
    "SELECT e.key, e.value FROM jsonb_each(CASE WHEN jsonb_typeof(w.value) = 'object' THEN w.value END) e "
    "UNION ALL "
    "SELECT NULL, a.value FROM jsonb_array_elements(CASE WHEN jsonb_typeof(w.value) = 'array' THEN w.value END) a"
    ") c) "
    "SELECT string_agg(value #>> '{}', E'\\n') FROM walk "
    f"WHERE jsonb_typeof(value) = 'string' AND key IN ({KEY_LIST}) $$"
)
PG_WHERE = f"kind IN ({KIND_LIST})"
# The event id is a column of both indexes too (btree_gin): a search asks for a window of
# the newest ids, and the index cuts its candidates to the window before the text of each
# must be spelled again to confirm it (pg_trgm's matches are only candidates).
PG_INDEXES = (
    f"CREATE INDEX ix_event_words ON event USING gin (id, {PG_VECTOR}) WHERE {PG_WHERE}",
    f"CREATE INDEX ix_event_grams ON event USING gin (id, {PG_TEXT} gin_trgm_ops) WHERE {PG_WHERE}",
)
#: The first window of ids a PostgreSQL search reads; each next one is four times as wide.
#: Each window costs a read of its terms' whole posting lists (some 10 ms at 100k events),
#: so few wide windows beat many narrow ones.
PG_WINDOW = 1024


def create_postgres(run: Run, progress: Progress | None = None) -> None:
    run("CREATE EXTENSION IF NOT EXISTS pg_trgm", ())
    run("CREATE EXTENSION IF NOT EXISTS btree_gin", ())
    run(PG_FUNCTION, ())
    for statement in PG_INDEXES:  # one statement each: PostgreSQL builds it, no progress to show
        run(statement, ())


def drop_postgres(run: Run) -> None:
    run("DROP INDEX IF EXISTS ix_event_grams", ())
    run("DROP INDEX IF EXISTS ix_event_words", ())
    run("DROP FUNCTION IF EXISTS ohm_search_text(text, text)", ())


def postgres_on(run: Run) -> bool:
    return _scalar(run, "SELECT COUNT(*) FROM pg_indexes WHERE schemaname = current_schema() "
                        "AND indexname = 'ix_event_words'") == 1


def problems(conn: Any) -> list[str]:
    """What ``doctor --full`` finds wrong with SQLite's search index (a raw connection): a
    trigger missing (a copy of the event table dropped it), a conversation without its key,
    or documents that do not match the searchable events one for one. An index switched off
    (no tables) is no problem."""
    found = []
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    if not sqlite_on(conn.execute):
        left = [n for n in TRIGGER_NAMES if n in names]
        if left:
            found.append(f"search: the index is off, but trigger(s) {', '.join(left)} remain: appends will fail")
        return found
    missing = [n for n in TRIGGER_NAMES if n not in names]
    if missing:
        found.append(f"search: trigger(s) {', '.join(missing)} missing: new events are not indexed")
    keyless = conn.execute("SELECT COUNT(*) FROM conversation WHERE search_key IS NULL").fetchone()[0]
    if keyless:
        found.append(f"search: {keyless} conversation(s) have no search_key: their events are not indexed")
    events = conn.execute(f"SELECT COUNT(*) FROM event WHERE kind IN ({KIND_LIST})").fetchone()[0]
    pending = conn.execute(f"SELECT COUNT(*) FROM {PENDING}").fetchone()[0]
    for t in (WORDS, GRAMS):
        docs = conn.execute(f"SELECT COUNT(*) FROM {t}_docsize").fetchone()[0]
        if docs + pending != events:
            found.append(f"search: {t} indexes {docs:,} events and {pending:,} wait, but {events:,} are searchable")
    return found
