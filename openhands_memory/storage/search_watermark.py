"""The search index as revisions 0011 to 0015 built it (a watermark per conversation; on
PostgreSQL, from 0012, a table of texts), frozen for their migrations.

A migration must build what its revision built, not what the code builds today: these are
copies of ``storage/search.py`` as it stood at revision 0015, its searched kinds and keys
(``searchable.py``) written out. ``search_text_v1`` keeps the spelling of texts before 0015.
While 0015 is the newest revision, what this module builds is what ``storage/search.py``
builds (``tests/test_migrations_frozen.py`` holds them equal); a change to the index there
is a new revision, which freezes what it needs beside this. Nothing else uses it.
"""

from __future__ import annotations

import re
from typing import Any, Callable

Progress = Callable[[int, int], None]  # (done, total)
#: Runs one statement: a migration's ``bind.exec_driver_sql``.
Run = Callable[..., Any]

SHIFT = 32

#: ``searchable.SEARCHED_KINDS`` and ``TEXT_KEYS`` as they were at revision 0015.
KIND_LIST = ("'MessageEvent', 'ActionEvent', 'ObservationEvent', 'AgentErrorEvent', 'UserRejectObservation', "
             "'RecallObservation', 'RecallAction'")
KEY_LIST = "'text', 'arguments', 'error', 'rejection_reason', 'reasoning_content', 'thinking', 'content', 'query'"


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
    """The searchable text of a payload column, in SQLite's SQL, as revision 0015 spelled it."""
    return (f"(SELECT group_concat(value, char(10)) FROM json_tree({nul_folded(payload)}) "
            f"WHERE type = 'text' AND key IN ({KEY_LIST}))")


def _doc(row: str) -> str:
    return (f"(((SELECT search_key FROM conversation WHERE id = {row}.conversation_id) << {SHIFT}) "
            f"| {row}.id)")


WORDS = "event_words"
GRAMS = "event_grams"
STATE = "search_state"
FLUSH_AT = 1024
AUTOMERGE = 16
STATE_TABLE = (f"CREATE TABLE {STATE} (conversation_id TEXT NOT NULL PRIMARY KEY, upto INTEGER NOT NULL) "
               "WITHOUT ROWID")
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
    column to SQL): ``sqlite_text`` from 0015, ``search_text_v1.sqlite_text`` before it (a
    contentless table must be told the text it indexed)."""
    flush = "".join(
        f"INSERT INTO {t}(rowid, body) SELECT (c.search_key << {SHIFT}) | e.id, {text('e.payload')} "
        "FROM conversation c JOIN event e ON e.conversation_id = c.id WHERE c.id = new.conversation_id "
        f"AND e.id > {upto_of('new.conversation_id')} AND e.id <= new.id AND {_searched('e')}; "
        for t in (WORDS, GRAMS)
    ) + (f"INSERT INTO {STATE}(conversation_id, upto) VALUES (new.conversation_id, new.id) "
         "ON CONFLICT(conversation_id) DO UPDATE SET upto = excluded.upto; ")
    return (
        f"CREATE TRIGGER event_search_flush AFTER INSERT ON event "
        f"WHEN new.id >= {upto_of('new.conversation_id')} + {FLUSH_AT} BEGIN {flush}END",
        f"CREATE TRIGGER event_search_late AFTER INSERT ON event WHEN {_indexed('new')} "
        f"BEGIN {_index('new', '1', text)}END",
        f"CREATE TRIGGER event_search_delete AFTER DELETE ON event WHEN {_indexed('old')} "
        f"BEGIN {_index('old', '1', text, 'delete')}END",
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


def _scalar(run: Run, text: str, params: tuple = ()) -> Any:
    rows = run(text, params).fetchall()
    return rows[0][0] if rows else None


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


def sqlite_on(run: Run) -> bool:
    """Whether the file keeps a search index (``search-index off`` drops its tables)."""
    return _scalar(run, f"SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '{WORDS}'") == 1


# --- PostgreSQL: the texts' table (revision 0012), its functions as 0015 spelled them -------

PG_FUNCTION = (
    "CREATE OR REPLACE FUNCTION ohm_search_text(kind text, payload text) RETURNS text "
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
PG_BODY_OF = "lower(ohm_search_text({e}.kind, {e}.payload))"
PG_TEXTS = "event_text"
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
PG_FLUSH_AT = 128
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
PG_BLOCK_BITS = 10
PG_WORDS_INDEX, PG_GRAMS_INDEX = "ix_event_text_words", "ix_event_text_grams"
PG_INDEXES = (
    f"CREATE INDEX {PG_WORDS_INDEX} ON {PG_TEXTS} USING gin ((id >> {PG_BLOCK_BITS}), {PG_WORDS_OF.format(t=PG_TEXTS)})",
    f"CREATE INDEX {PG_GRAMS_INDEX} ON {PG_TEXTS} USING gin ((id >> {PG_BLOCK_BITS}), body gin_trgm_ops)",
)


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


def pyformat(text: str) -> str:
    """``?`` placeholders as psycopg's ``%s`` (these statements have no ``%`` of their own and
    no ``?`` inside string literals)."""
    return re.sub(r"\?", "%s", text.replace("%", "%%"))
