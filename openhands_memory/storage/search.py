"""The full-text index of events' text (revision 0008; the rule: ``searchable.py``).

SQLite: two contentless FTS5 tables kept by triggers on ``event``, behind a watermark:

* ``event_words``: porter stemming over unicode61 (diacritics folded), ranked by bm25;
* ``event_grams``: trigrams with ``detail=none`` (no positions: a quarter of the size of a
  full trigram index), so a fragment matches as the AND of its trigrams and is then confirmed
  against the text (``instr``), which a few candidates cost nothing.

``search_state`` keeps each conversation's watermark: its searchable events up to that id are
in both tables, the newer ones not yet. When an append takes a conversation ``FLUSH_AT``
events past its watermark, the trigger puts them all in at once, in that transaction, and
moves the watermark to the new row: FTS5 writes a segment for each transaction, which for
single appends was most of their cost. Below the threshold an append writes nothing for the
index (the trigger's condition reads one row): revision 0011 replaced a queue table, whose
row and index entry each append wrote, by this. The connection keeps its statement journals
in memory (``database.connect``): a statement that fires triggers keeps one, and in a
temporary file it cost more than the append. A search reads the events above the watermark
too (at most ``FLUSH_AT`` rows of the conversation, its newest), by the index's own rules, so
that its answer never depends on where the watermark is (``search_waiting.py``).

A document's id is ``conversation.search_key << 32 | event.id``: a conversation's events are
one range of ids (a search never reads another conversation's), newest last, so that
``ORDER BY rowid DESC`` reads the newest matches first and stops at the limit, and the id
does not move when VACUUM renumbers rowids. The text is spelled in SQL (``json_tree`` over
``searchable.TEXT_KEYS``), so that every connection keeps the index right, and contentless
tables can be told what to unindex: the triggers recompute it from the old row.

PostgreSQL keeps the same watermark (revision 0012): ``ohm_search_text(kind, payload)`` spells
the same text, and a statement trigger writes the texts of a conversation's waiting events
into ``event_text`` once it is ``PG_FLUSH_AT`` past its watermark; GIN indexes on
``to_tsvector('english', …)`` and on ``pg_trgm`` trigrams index the texts (with the event id,
so that a search reads windows of the newest ids: ``PG_BLOCK_BITS``), and a fragment is confirmed
against the stored text, never spelled again from the JSON. (Until 0012 the two indexes were
expressions over ``event``, kept by every append: ``search_expression.py``.)

Both spell U+0000 as a space (``searchable.NUL_AS``, ``nul_folded``): until revision 0015
SQLite's JSON functions ended a string at it, and PostgreSQL's ``jsonb`` refused it, failing
the flush of its conversation (``search_text_v1.py`` keeps that spelling for the migrations).
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


def nul_folded(json_text: str, backend: str = "sqlite") -> str:
    """SQL: the JSON ``json_text`` with each ``\\u0000`` escape written as a space
    (``searchable.NUL_AS``), an escaped backslash left as it is (``\\\\u0000`` is a backslash
    and "u0000"): escaped backslashes are set aside as U+0001, which valid JSON never holds
    raw, while the escapes are replaced, then put back. Only a payload that holds the escape
    is rewritten. Backslashes are spelled ``char(92)``, the same whatever a server's
    ``standard_conforming_strings`` says."""
    find, char = ("instr", "char") if backend == "sqlite" else ("strpos", "chr")
    slash, aside = f"{char}(92)", f"{char}(1)"
    escape = f"{slash} || 'u0000'"
    return (f"CASE WHEN {find}({json_text}, {escape}) > 0 THEN replace(replace(replace({json_text}, "
            f"{slash} || {slash}, {aside}), {escape}, ' '), {aside}, {slash} || {slash}) ELSE {json_text} END")


def sqlite_text(payload: str) -> str:
    """The searchable text of a payload column, in SQLite's SQL (``searchable.searched_text``)."""
    return (f"(SELECT group_concat(value, char(10)) FROM json_tree({nul_folded(payload)}) "
            f"WHERE type = 'text' AND key IN ({KEY_LIST}))")


def _doc(row: str) -> str:
    return (f"(((SELECT search_key FROM conversation WHERE id = {row}.conversation_id) << {SHIFT}) "
            f"| {row}.id)")


WORDS = "event_words"
GRAMS = "event_grams"
STATE = "search_state"
#: A conversation's events wait (unindexed, found by a scan of the newest rows) until this
#: many have come after its watermark, then go into the FTS5 tables in one batch: FTS5
#: writes a segment per transaction, and one per appended event cost 1.5 ms; each segment is
#: then merged into larger ones, so fewer, larger ones cost less again (1,024 and
#: ``AUTOMERGE`` made single appends 1.6x faster than 128 and 4).
FLUSH_AT = 1024
#: Segments of one size FTS5 lets pile up before it merges them into one (its default: 4).
#: Fewer merges rewrite each posting fewer times; a search reads a few more segments.
AUTOMERGE = 16
#: The watermark: every searchable event of the conversation with an id up to ``upto`` is in
#: the FTS5 tables, none above it. No row: nothing indexed yet (-1).
STATE_TABLE = (f"CREATE TABLE {STATE} (conversation_id TEXT NOT NULL PRIMARY KEY, upto INTEGER NOT NULL) "
               "WITHOUT ROWID")
#: How ``event_words`` cuts and folds words (the waiting events are matched with it too).
WORDS_TOKENIZER = "porter unicode61 remove_diacritics 2"
TABLES = (
    f"CREATE VIRTUAL TABLE {WORDS} USING fts5(body, content='', tokenize='{WORDS_TOKENIZER}')",
    f"CREATE VIRTUAL TABLE {GRAMS} USING fts5(body, content='', tokenize='trigram', detail='none')",
    STATE_TABLE,
    *(f"INSERT INTO {t}({t}, rank) VALUES ('automerge', {AUTOMERGE})" for t in (WORDS, GRAMS)),
)


def upto_of(cid: str) -> str:
    """SQL: the watermark of conversation ``cid`` (an SQL expression), -1 when none."""
    return f"COALESCE((SELECT upto FROM {STATE} WHERE conversation_id = {cid}), -1)"


#: Characters every JSON encoder writes as they are: a needle made of them alone is in the
#: stored JSON of each event whose text holds it. (Not quotes or backslashes, which JSON
#: escapes; not ``<``, ``>``, ``&`` or ``'``, which some encoders escape for HTML; nor
#: anything outside ASCII, which some write as ``\\u`` escapes.)
_RAW = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.,:;/()[]{}=+*#@!?%$^|~`")


def raw_safe(needle: str) -> bool:
    """Whether ``needle`` can be looked for in an event's stored JSON before its text is
    spelled: an event whose text holds it has it in its JSON, verbatim in any case."""
    return bool(needle) and all(c in _RAW for c in needle)


def like_pattern(needle: str) -> str:
    """A LIKE pattern matching text that holds ``needle`` (backslash escapes)."""
    return "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _index(row: str, when: str, text: Callable[[str], str], op: str = "") -> str:
    """Statements putting ``row`` into both tables (``op="delete"``: taking it out; a
    contentless table is told the text it indexed)."""
    head = f"{{t}}({{t}}, rowid, body) SELECT 'delete', " if op == "delete" else "{t}(rowid, body) SELECT "
    return "".join(
        "INSERT INTO " + head.format(t=t) + f"{_doc(row)}, {text(row + '.payload')} WHERE {when}; "
        for t in (WORDS, GRAMS)
    )


def _searched(row: str) -> str:
    return f"{row}.kind IN ({KIND_LIST})"


def _indexed(row: str) -> str:
    return f"{_searched(row)} AND {row}.id <= {upto_of(row + '.conversation_id')}"


def sqlite_triggers(text: Callable[[str], str]) -> tuple[str, ...]:
    """The triggers that keep the FTS5 tables, each spelling texts with ``text`` (a payload
    column to SQL): ``sqlite_text`` today; a migration passes the spelling of its revision
    (``search_text_v1``), since a contentless table must be told the text it indexed."""
    # Every FLUSH_AT events past the watermark, the events between it and the new row go in
    # and the watermark moves up to the row. Only the rows' own conversation: a
    # conversation's events are one run of its primary key, read in id order.
    flush = "".join(
        f"INSERT INTO {t}(rowid, body) SELECT (c.search_key << {SHIFT}) | e.id, {text('e.payload')} "
        "FROM conversation c JOIN event e ON e.conversation_id = c.id WHERE c.id = new.conversation_id "
        f"AND e.id > {upto_of('new.conversation_id')} AND e.id <= new.id AND {_searched('e')}; "
        for t in (WORDS, GRAMS)
    ) + (f"INSERT INTO {STATE}(conversation_id, upto) VALUES (new.conversation_id, new.id) "
         "ON CONFLICT(conversation_id) DO UPDATE SET upto = excluded.upto; ")
    return (
        # Nothing is written for an event below the threshold: the WHEN reads one row.
        f"CREATE TRIGGER event_search_flush AFTER INSERT ON event "
        f"WHEN new.id >= {upto_of('new.conversation_id')} + {FLUSH_AT} BEGIN {flush}END",
        # A row written below the watermark (a deleted id written again) is indexed at once.
        f"CREATE TRIGGER event_search_late AFTER INSERT ON event WHEN {_indexed('new')} "
        f"BEGIN {_index('new', '1', text)}END",
        # A conversation's cascade deletes its events after its row (and watermark): its own
        # trigger has unindexed them.
        f"CREATE TRIGGER event_search_delete AFTER DELETE ON event WHEN {_indexed('old')} "
        f"BEGIN {_index('old', '1', text, 'delete')}END",
        # An event above the watermark is indexed from its row when the flush comes to it.
        f"CREATE TRIGGER event_search_update AFTER UPDATE OF kind, payload ON event "
        f"WHEN old.id <= {upto_of('old.conversation_id')} BEGIN "
        f"{_index('old', _searched('old'), text, 'delete')}{_index('new', _searched('new'), text)}END",
        "CREATE TRIGGER conversation_search_delete BEFORE DELETE ON conversation BEGIN "
        + "".join(
            f"INSERT INTO {t}({t}, rowid, body) SELECT 'delete', (old.search_key << {SHIFT}) | e.id, "
            f"{text('e.payload')} FROM event e WHERE e.conversation_id = old.id AND {_searched('e')} "
            f"AND e.id <= {upto_of('old.id')}; "
            for t in (WORDS, GRAMS)
        )
        + f"DELETE FROM {STATE} WHERE conversation_id = old.id; END",
    )


TRIGGERS = sqlite_triggers(sqlite_text)
TRIGGER_NAMES = ("event_search_flush", "event_search_late", "event_search_delete", "event_search_update",
                 "conversation_search_delete")

Progress = Callable[[int, int], None]  # (done, total)
#: Runs one statement: a migration's ``bind.exec_driver_sql``, a session's ``execute``.
Run = Callable[..., Any]


def _scalar(run: Run, text: str, params: tuple = ()) -> Any:
    rows = run(text, params).fetchall()
    return rows[0][0] if rows else None


#: Indexes one chunk of a conversation's events: (run, conversation id, its search_key, first
#: id, last id).
IndexChunk = Callable[[Run, str, Any, int, int], None]


def _backfill(run: Run, index_chunk: IndexChunk, progress: Progress | None, chunk: int) -> int:
    """Index every event stored above each conversation's watermark, a chunk of ids at a
    time, and move the watermark to its newest event; returns how many were indexed."""
    total = _scalar(run, f"SELECT COUNT(*) FROM event e WHERE {_searched('e')} "
                         f"AND e.id > {upto_of('e.conversation_id')}") or 0
    done = 0
    keys = run(f"SELECT id, search_key, {upto_of('id')} FROM conversation ORDER BY search_key, id", ()).fetchall()
    for cid, key, upto in keys:
        last = _scalar(run, "SELECT MAX(id) FROM event WHERE conversation_id = ?", (cid,))
        if last is None or last <= upto:
            continue
        for lo in range(upto + 1, last + 1, chunk):
            hi = min(lo + chunk - 1, last)
            index_chunk(run, cid, key, lo, hi)
            run(f"INSERT INTO {STATE}(conversation_id, upto) VALUES (?, ?) "
                "ON CONFLICT(conversation_id) DO UPDATE SET upto = excluded.upto", (cid, hi))
            done += _scalar(run, f"SELECT COUNT(*) FROM event WHERE conversation_id = ? AND id BETWEEN ? AND ? "
                                 f"AND {_searched('event')}", (cid, lo, hi)) or 0
            if progress is not None:
                progress(done, total)
    return done


def _index_chunk_sqlite(run: Run, cid: str, key: Any, lo: int, hi: int) -> None:
    for t in (WORDS, GRAMS):
        run(f"INSERT INTO {t}(rowid, body) SELECT ({int(key)} << {SHIFT}) | id, {sqlite_text('payload')} FROM event "
            f"WHERE conversation_id = ? AND id BETWEEN ? AND ? AND {_searched('event')}", (cid, lo, hi))


def backfill_sqlite(run: Run, progress: Progress | None = None, chunk: int = 20_000) -> int:
    return _backfill(run, _index_chunk_sqlite, progress, chunk)


def create_sqlite(run: Run, progress: Progress | None = None) -> None:
    for statement in TABLES:
        run(statement, ())
    backfill_sqlite(run, progress)
    for statement in TRIGGERS:
        run(statement, ())


def drop_sqlite(run: Run) -> None:
    for name in TRIGGER_NAMES:
        run(f"DROP TRIGGER IF EXISTS {name}", ())
    for t in (WORDS, GRAMS, STATE):
        run(f"DROP TABLE IF EXISTS {t}", ())


def sqlite_on(run: Run) -> bool:
    """Whether the file keeps a search index (``search-index off`` drops its tables)."""
    return _scalar(run, f"SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '{WORDS}'") == 1


# --- PostgreSQL ----------------------------------------------------------------------------

#: Spells an event's text as ``searchable.searched_text`` does (NULL for a kind never
#: searched): ``jsonb`` refuses ``\\u0000``, which ``nul_folded`` turns into a space first.
PG_FUNCTION = (
    "CREATE OR REPLACE FUNCTION ohm_search_text(kind text, payload text) RETURNS text "
    # COST: spelling a row's text parses its JSON (some 50 us): the planner tests every
    # cheaper condition first (a waiting event's JSON as stored, a missing text).
    "LANGUAGE sql IMMUTABLE PARALLEL SAFE COST 10000 AS $$ "
    "WITH RECURSIVE walk(key, value) AS ("
    f"SELECT NULL::text, CASE WHEN kind IN ({KIND_LIST}) THEN ({nul_folded('payload', 'postgresql')})::jsonb END "
    "UNION ALL "
    "SELECT c.key, c.value FROM walk w CROSS JOIN LATERAL ("
    "SELECT e.key, e.value FROM jsonb_each(CASE WHEN jsonb_typeof(w.value) = 'object' THEN w.value END) e "
    "UNION ALL "
    "SELECT NULL, a.value FROM jsonb_array_elements(CASE WHEN jsonb_typeof(w.value) = 'array' THEN w.value END) a"
    ") c) "
    "SELECT string_agg(value #>> '{}', E'\\n') FROM walk "
    f"WHERE jsonb_typeof(value) = 'string' AND key IN ({KEY_LIST}) $$"
)
PG_TEXT_OF = "ohm_search_text({e}.kind, {e}.payload)"
#: What ``event_text`` keeps: the text in lower case, so that a fragment is matched with
#: ``LIKE``; ``ILIKE`` lowers every text it reads again, which tripled the cost of confirming
#: a candidate.
PG_BODY_OF = "lower(ohm_search_text({e}.kind, {e}.payload))"
#: The spelled texts of a conversation's events up to its watermark (``search_state``, as on
#: SQLite); deleting an event deletes its text (the foreign key).
PG_TEXTS = "event_text"
#: An event's words: a PL/pgSQL function, so that the planner sees its cost (a SQL function
#: would be inlined into ``to_tsvector``, cheap enough to compute for every row of a window
#: rather than read the index). A ``tsvector`` holds at most 1 MB: the words of a larger text
#: (some 40,000 distinct ones) would fail the statement that indexes it, every append's at the
#: flush, so such a text gives the words of as much of its beginning as fits, halving until
#: one does (its substrings are all in the trigram index). Below 64 KB a text cannot reach
#: the limit (its tsvector is at most ~3 times its size), and skips the EXCEPTION block, whose
#: subtransaction every call would pay.
PG_WORDS_LIMITED = 65536
PG_WORDS_FUNCTION = (
    "CREATE OR REPLACE FUNCTION ohm_words(body text) RETURNS tsvector "
    "LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE COST 1000 AS $$ "
    "DECLARE n integer; "
    f"BEGIN IF octet_length(body) < {PG_WORDS_LIMITED} THEN RETURN to_tsvector('english'::regconfig, body); END IF; "
    "n := length(body); "
    "LOOP BEGIN RETURN to_tsvector('english'::regconfig, left(body, n)); "
    "EXCEPTION WHEN program_limit_exceeded THEN n := n / 2; END; END LOOP; "
    "END $$"
)
PG_WORDS_OF = "ohm_words({t}.body)"
#: Conversations wait this many events past their watermark before their texts are spelled
#: and indexed in one statement: the appends in between write nothing for the index (they
#: spelled each text twice and fed two GIN indexes, 0.7 ms an append), and a search spells
#: at most this many texts that wait (~50 us each).
PG_FLUSH_AT = 128
# After each statement that inserts events: rows written at or below their conversation's
# watermark (an id deleted and written again) are indexed at once; a conversation that is
# PG_FLUSH_AT events past its watermark has all its waiting texts spelled and moves it.
PG_TRIGGER_FUNCTIONS = (
    "CREATE OR REPLACE FUNCTION ohm_search_flush() RETURNS trigger LANGUAGE plpgsql AS $$ "
    "DECLARE conv text; first_id integer; last_id integer; mark integer; "
    "BEGIN "
    "FOR conv, first_id, last_id, mark IN SELECT n.conversation_id, MIN(n.id), MAX(n.id), "
    f"COALESCE((SELECT s.upto FROM {STATE} s WHERE s.conversation_id = n.conversation_id), -1) "
    "FROM new_rows n GROUP BY n.conversation_id LOOP "
    "IF first_id <= mark THEN "
    f"INSERT INTO {PG_TEXTS} (conversation_id, id, body) SELECT n.conversation_id, n.id, t.body "
    f"FROM new_rows n CROSS JOIN LATERAL (SELECT {PG_BODY_OF.format(e='n')} AS body) t "
    f"WHERE n.conversation_id = conv AND n.id <= mark AND {_searched('n')} AND t.body IS NOT NULL; "
    "END IF; "
    f"IF last_id >= mark + {PG_FLUSH_AT} THEN "
    f"INSERT INTO {PG_TEXTS} (conversation_id, id, body) SELECT e.conversation_id, e.id, t.body "
    f"FROM event e CROSS JOIN LATERAL (SELECT {PG_BODY_OF.format(e='e')} AS body) t "
    "WHERE e.conversation_id = conv AND e.id > mark AND e.id <= last_id "
    f"AND {_searched('e')} AND t.body IS NOT NULL; "
    f"INSERT INTO {STATE} (conversation_id, upto) VALUES (conv, last_id) "
    "ON CONFLICT (conversation_id) DO UPDATE SET upto = excluded.upto; "
    "END IF; "
    "END LOOP; "
    "RETURN NULL; "
    "END $$",
    # An event at or below the watermark whose kind or payload changes is spelled again.
    "CREATE OR REPLACE FUNCTION ohm_search_update() RETURNS trigger LANGUAGE plpgsql AS $$ "
    "BEGIN "
    f"IF old.id <= COALESCE((SELECT upto FROM {STATE} WHERE conversation_id = old.conversation_id), -1) THEN "
    f"DELETE FROM {PG_TEXTS} WHERE conversation_id = old.conversation_id AND id = old.id; "
    f"INSERT INTO {PG_TEXTS} (conversation_id, id, body) SELECT new.conversation_id, new.id, t.body "
    f"FROM (SELECT {PG_BODY_OF.format(e='new')} AS body) t "
    f"WHERE {_searched('new')} AND t.body IS NOT NULL; "
    "END IF; "
    "RETURN NULL; "
    "END $$",
)
PG_TRIGGERS = (
    "CREATE TRIGGER event_search_flush AFTER INSERT ON event REFERENCING NEW TABLE AS new_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION ohm_search_flush()",
    "CREATE TRIGGER event_search_update AFTER UPDATE OF kind, payload ON event "
    "FOR EACH ROW EXECUTE FUNCTION ohm_search_update()",
)
PG_TABLES = (
    f"CREATE TABLE {PG_TEXTS} (conversation_id text NOT NULL, id integer NOT NULL, body text NOT NULL, "
    "PRIMARY KEY (conversation_id, id), FOREIGN KEY (conversation_id, id) REFERENCES event (conversation_id, id) "
    "ON DELETE CASCADE)",
    f"CREATE TABLE {STATE} (conversation_id text PRIMARY KEY REFERENCES conversation (id) ON DELETE CASCADE, "
    "upto integer NOT NULL)",
)
# Both indexes lead with the id's block of ``2 ** PG_BLOCK_BITS`` ids (btree_gin), so that a
# search reads the newest blocks first and each block's postings alone: as an equal key, a
# block lets GIN skip through a term's posting tree to the block's rows, where a range of ids
# is a partial match (every id its own key), which reads every term's whole posting list for
# each window (45 ms at 1M events, against 0.6 ms).
# * Words: windows of the newest blocks, then four times as many each time, each window's
#   blocks one list (``PG_WORDS_WINDOW``). The window's bounds are no index condition
#   (``+ 0``): the planner cannot know that the blocks are that range, and read the key's
#   range with the blocks alone, testing the words of each row.
# * Trigrams: the newest ``PG_GRAMS_NEAR`` blocks one by one, each an equal key (a LATERAL
#   probe), newest first under an incremental sort, so that the statement stops at the block
#   that fills the limit (the Postgres session's ``search_grams``): 3-5 ms for a common
#   fragment at 1M, 0.1 ms a block for a rare one. Given a list of blocks instead, the
#   planner, which cannot know how rare a LIKE pattern is, took a common fragment for rare
#   and left the list out of the index (2 s at 1M). Matches older than those blocks are read
#   in one statement, without blocks (a fragment still unmatched after 32,768 events is rare,
#   and a rare fragment's trigrams have short posting lists).
# CAST: psycopg sends a small int as int2, which btree_gin's int4 class cannot compare; the
# planner then reads every candidate of the text in the table.
PG_BLOCK_BITS = 10
PG_GRAMS_NEAR = 32
PG_WORDS_INDEX, PG_GRAMS_INDEX = "ix_event_text_words", "ix_event_text_grams"
PG_INDEXES = (
    f"CREATE INDEX {PG_WORDS_INDEX} ON {PG_TEXTS} USING gin ((id >> {PG_BLOCK_BITS}), {PG_WORDS_OF.format(t=PG_TEXTS)})",
    f"CREATE INDEX {PG_GRAMS_INDEX} ON {PG_TEXTS} USING gin ((id >> {PG_BLOCK_BITS}), body gin_trgm_ops)",
)
PG_WORDS_WINDOW = (f"(t.id >> {PG_BLOCK_BITS}) = ANY(CAST(? AS integer[])) "
                   "AND t.id + 0 BETWEEN CAST(? AS integer) AND CAST(? AS integer)")


def _index_chunk_postgres(run: Run, cid: str, key: Any, lo: int, hi: int) -> None:
    run(f"INSERT INTO {PG_TEXTS} (conversation_id, id, body) SELECT e.conversation_id, e.id, t.body "
        f"FROM event e CROSS JOIN LATERAL (SELECT {PG_BODY_OF.format(e='e')} AS body) t "
        f"WHERE e.conversation_id = ? AND e.id BETWEEN ? AND ? AND {_searched('e')} AND t.body IS NOT NULL",
        (cid, lo, hi))


def backfill_postgres(run: Run, progress: Progress | None = None, chunk: int = 20_000) -> int:
    return _backfill(run, _index_chunk_postgres, progress, chunk)


def create_postgres(run: Run, progress: Progress | None = None,
                    functions: tuple[str, str] = (PG_FUNCTION, PG_WORDS_FUNCTION)) -> None:
    """The texts, filled from every stored event (with ``progress``), then their indexes
    (built once over the texts: faster than growing them row by row) and the triggers.
    ``functions``: how texts and their words are spelled (a migration passes its revision's,
    ``search_text_v1``)."""
    run("CREATE EXTENSION IF NOT EXISTS pg_trgm", ())
    run("CREATE EXTENSION IF NOT EXISTS btree_gin", ())
    for statement in (*functions, *PG_TABLES):
        run(statement, ())
    backfill_postgres(run, progress)
    for statement in (*PG_INDEXES, *PG_TRIGGER_FUNCTIONS, *PG_TRIGGERS):
        run(statement, ())


def drop_postgres(run: Run) -> None:
    run("DROP TRIGGER IF EXISTS event_search_flush ON event", ())
    run("DROP TRIGGER IF EXISTS event_search_update ON event", ())
    run(f"DROP TABLE IF EXISTS {PG_TEXTS}", ())
    run(f"DROP TABLE IF EXISTS {STATE}", ())
    for function in ("ohm_search_flush()", "ohm_search_update()", "ohm_words(text)", "ohm_search_text(text, text)"):
        run(f"DROP FUNCTION IF EXISTS {function}", ())


def postgres_on(run: Run) -> bool:
    return _scalar(run, "SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema() "
                        f"AND tablename = '{PG_TEXTS}'") == 1


def postgres_problems(run: Run) -> list[str]:
    """What ``doctor --full`` finds wrong with PostgreSQL's search index: a trigger missing,
    or searchable events up to the watermarks without their text. (A text without its event
    cannot be: the foreign key.)"""
    tables = {r[0] for r in run("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                                f"AND tablename IN ('{PG_TEXTS}', '{STATE}')", ()).fetchall()}
    found = _parts_problems(tables, (PG_TEXTS, STATE))
    if not postgres_on(run) or found:
        return found
    found += _behind(run, PG_FLUSH_AT)
    names = {r[0] for r in run("SELECT tgname FROM pg_trigger WHERE tgrelid = 'event'::regclass", ()).fetchall()}
    dropped = [n for n in ("event_search_flush", "event_search_update") if n not in names]
    if dropped:
        found.append(f"search: trigger(s) {', '.join(dropped)} missing: new events are not indexed")
    upto = f"COALESCE((SELECT upto FROM {STATE} s WHERE s.conversation_id = e.conversation_id), -1)"
    # An event without a text may have none to index (no string under the searched keys):
    # only those are spelled (the function's cost puts it last), not every event.
    unindexed = _scalar(run, f"SELECT COUNT(*) FROM event e WHERE {_searched('e')} AND e.id <= {upto} "
                             f"AND NOT EXISTS (SELECT 1 FROM {PG_TEXTS} t WHERE t.conversation_id = e.conversation_id "
                             f"AND t.id = e.id) AND {PG_TEXT_OF.format(e='e')} IS NOT NULL") or 0
    if unindexed:
        found.append(f"search: {unindexed:,} searchable event(s) at or below their conversation's watermark have "
                     f"no text in {PG_TEXTS}: a search cannot find them")
    return found


def problems(conn: Any) -> list[str]:
    """What ``doctor --full`` finds wrong with SQLite's search index (a raw connection): a
    trigger missing (a copy of the event table dropped it), a conversation without its key,
    or documents that do not match the searchable events one for one. An index switched off
    (no tables) is no problem."""
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    tables = {r[0] for r in conn.execute(f"SELECT name FROM sqlite_master WHERE type = 'table' "
                                         f"AND name IN ('{WORDS}', '{GRAMS}', '{STATE}')")}
    found = _parts_problems(tables, (WORDS, GRAMS, STATE))
    if not sqlite_on(conn.execute):
        left = [n for n in TRIGGER_NAMES if n in names]
        if left:
            found.append(f"search: the index is off, but trigger(s) {', '.join(left)} remain: appends will fail")
        return found
    if found:  # the counts below read every table
        return found
    found += _behind(conn.execute, FLUSH_AT)
    missing = [n for n in TRIGGER_NAMES if n not in names]
    if missing:
        found.append(f"search: trigger(s) {', '.join(missing)} missing: new events are not indexed")
    keyless = conn.execute("SELECT COUNT(*) FROM conversation WHERE search_key IS NULL").fetchone()[0]
    if keyless:
        found.append(f"search: {keyless} conversation(s) have no search_key: their events are not indexed")
    events = conn.execute(f"SELECT COUNT(*) FROM event WHERE kind IN ({KIND_LIST})").fetchone()[0]
    indexed = conn.execute(f"SELECT COUNT(*) FROM event e WHERE {_indexed('e')}").fetchone()[0]
    for t in (WORDS, GRAMS):
        docs = conn.execute(f"SELECT COUNT(*) FROM {t}_docsize").fetchone()[0]
        if docs != indexed:
            found.append(f"search: {t} indexes {docs:,} events, but {indexed:,} of the {events:,} searchable "
                         "are at or below their conversation's watermark")
    return found


def _parts_problems(present: set[str], parts: tuple[str, ...]) -> list[str]:
    """The index's tables are all there (on) or none (off). Switching it on or off is one
    transaction; some of them without the others is a drop or a build that stopped half
    way outside one (a table dropped by hand, a file written through two names at once):
    an index said to be on (its first table) that cannot work, or pieces that make
    ``search-index on`` fail."""
    if not present or len(present) == len(parts):
        return []
    missing = ", ".join(t for t in parts if t not in present)
    left = ", ".join(t for t in parts if t in present)
    if parts[0] in present:
        return [f"search: the index is on but incomplete: table(s) {missing} missing ({left} still there), "
                "so a search cannot use it; switch the index off and on again to rebuild it"]
    return [f"search: the index is off, but table(s) {left} of it remain ({missing} dropped): a drop that "
            "stopped half way; switching the index on fails until they are dropped by hand"]


def _behind(run: Run, flush_at: int) -> list[str]:
    """Conversations whose newest event is ``flush_at`` or more past their watermark. The
    flush trigger moves the watermark before that can happen, so these events were written
    while it was missing, and the index is behind them for good: a search scans only the
    newest waiting events."""
    rows = run(f"SELECT e.conversation_id, e.last, {upto_of('e.conversation_id')} FROM "
               "(SELECT conversation_id, MAX(id) AS last FROM event GROUP BY conversation_id) e "
               f"WHERE e.last >= {upto_of('e.conversation_id')} + {flush_at} ORDER BY e.conversation_id",
               ()).fetchall()
    if not rows:
        return []
    shown = ", ".join(f"{cid} (indexed to {upto}, events to {last})" for cid, last, upto in rows[:3])
    more = f" and {len(rows) - 3} more" if len(rows) > 3 else ""
    return [f"search: the index is behind the events of {len(rows)} conversation(s): {shown}{more}; "
            f"{flush_at} or more events past a watermark were never indexed (switch the index off and on "
            "to rebuild it)"]
