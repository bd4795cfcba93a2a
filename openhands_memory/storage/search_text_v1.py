"""How revisions 0008 to 0014 spelled an event's searchable text, before U+0000 read as a space.

Then SQLite's JSON functions ended a string at a NUL (the rest of it was never indexed), and
PostgreSQL's ``ohm_search_text`` failed on one (``jsonb`` refuses ``\\u0000``), and with it the
flush of the event's conversation, every append's; ``ohm_words`` failed on a text whose words
do not fit in a ``tsvector``. Revision 0015 moved to ``search_watermark.py``'s spelling
(``searchable.NUL_AS``).

Frozen here for the migrations that built the index with it (0008 and 0010 through
``search_queue``, 0011, 0012, ``search_expression``) and for 0015, which moves from it: a
migration must build what its revision built, not what the code builds today, and a
contentless FTS5 table must be told the very text it indexed to take a document out.
"""

from __future__ import annotations

from .search_watermark import KEY_LIST, KIND_LIST, sqlite_triggers


def sqlite_text(payload: str) -> str:
    """The searchable text of a payload column, as SQLite's SQL spelled it until 0015."""
    return (f"(SELECT group_concat(value, char(10)) FROM json_tree({payload}) "
            f"WHERE type = 'text' AND key IN ({KEY_LIST}))")


#: The triggers of revisions 0011 to 0014 (their structure is 0015's: only the text moved).
TRIGGERS = sqlite_triggers(sqlite_text)

PG_FUNCTION = (
    "CREATE OR REPLACE FUNCTION ohm_search_text(kind text, payload text) RETURNS text "
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
PG_WORDS_FUNCTION = (
    "CREATE OR REPLACE FUNCTION ohm_words(body text) RETURNS tsvector "
    "LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE COST 1000 AS $$ "
    "BEGIN RETURN to_tsvector('english'::regconfig, body); END $$"
)
