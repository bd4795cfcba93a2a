"""Search reads U+0000 as a space; a text too large for a tsvector gives the words that fit

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27

Until now SQLite's JSON functions ended an indexed string at a NUL (``\\u0000`` in the event's
JSON): the words after it were never found. PostgreSQL's ``ohm_search_text`` failed on it
(``jsonb`` refuses ``\\u0000``), and so did the flush of its conversation, every append's from
then on, every search of it and ``search-index on``; ``ohm_words`` failed the same way on a
text whose words do not fit in a ``tsvector`` (1 MB). Now both backends spell a NUL as a space
(``searchable.NUL_AS``, ``storage/search.py``'s ``nul_folded``), in texts and in queries, and
``ohm_words`` gives the words of as much of a text as fits. The events are unchanged.

Upgrade. SQLite: the triggers are made again with the new spelling, and each indexed event
whose JSON holds the escape is taken out of both FTS5 tables with the text it was indexed
with (a contentless table must be told it: ``search_text_v1``) and put back with today's.
PostgreSQL: the two functions are replaced; no indexed text holds a NUL (its flush failed)
nor words past the limit. Downgrade: the reverse. An index switched off has nothing to change.
"""
from typing import Callable, Sequence, Union

from alembic import op

revision: str = '0015'
down_revision: Union[str, None] = '0014'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def _sqlite(bind, old: Callable[[str], str], new: Callable[[str], str], triggers: Sequence[str]) -> None:
    from openhands_memory.storage import search_watermark as search

    run = bind.exec_driver_sql
    if not search.sqlite_on(lambda sql, params=(): run(sql)):
        return
    for name in search.TRIGGER_NAMES:
        run(f"DROP TRIGGER IF EXISTS {name}")
    held = (f"FROM conversation c JOIN event e ON e.conversation_id = c.id WHERE e.kind IN ({search.KIND_LIST}) "
            f"AND e.id <= {search.upto_of('c.id')} AND instr(e.payload, char(92) || 'u0000') > 0")
    doc = f"(c.search_key << {search.SHIFT}) | e.id"
    for t in (search.WORDS, search.GRAMS):
        run(f"INSERT INTO {t}({t}, rowid, body) SELECT 'delete', {doc}, {old('e.payload')} {held}")
        run(f"INSERT INTO {t}(rowid, body) SELECT {doc}, {new('e.payload')} {held}")
    for statement in triggers:
        run(statement)


def _postgres(bind, functions: Sequence[str]) -> None:
    from openhands_memory.storage import search_watermark as search

    if search.postgres_on(lambda sql, params=(): bind.exec_driver_sql(sql)):
        for statement in functions:
            bind.exec_driver_sql(statement)


def upgrade() -> None:
    from openhands_memory.storage import search_text_v1
    from openhands_memory.storage import search_watermark as search

    bind = op.get_bind()
    if bind.dialect.name == 'sqlite':
        _sqlite(bind, search_text_v1.sqlite_text, search.sqlite_text, search.TRIGGERS)
    else:
        _postgres(bind, (search.PG_FUNCTION, search.PG_WORDS_FUNCTION))


def downgrade() -> None:
    from openhands_memory.storage import search_text_v1
    from openhands_memory.storage import search_watermark as search

    bind = op.get_bind()
    if bind.dialect.name == 'sqlite':
        _sqlite(bind, search.sqlite_text, search_text_v1.sqlite_text, search_text_v1.TRIGGERS)
    else:
        _postgres(bind, (search_text_v1.PG_FUNCTION, search_text_v1.PG_WORDS_FUNCTION))
