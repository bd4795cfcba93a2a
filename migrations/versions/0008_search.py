"""Full-text search over every event's text (recall)

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25

What is indexed is ``openhands_memory.searchable``'s rule: the strings under its keys, for its
kinds. The index is kept in the transaction that writes the events, by the database itself:

* SQLite: two contentless FTS5 tables, ``event_words`` (porter over unicode61: words, stems)
  and ``event_grams`` (trigrams, ``detail=none``: identifiers, paths, any substring of three
  characters or more; a match is confirmed against the text). Their document id is
  ``conversation.search_key << 32 | event.id`` (``storage/search.py``): stable whatever
  VACUUM does to rowids, and a conversation's documents are one range of ids. Triggers on
  ``event`` index an insert, unindex a delete (a conversation's cascade too) and re-index a
  payload update; they spell the text in SQL (``json_tree``), so that any connection, the
  ``sqlite3`` shell included, keeps the index right.
* PostgreSQL: ``ohm_search_text(kind, payload)``, an immutable function spelling the same
  text, and two GIN expression indexes on ``event``: ``to_tsvector('english', ...)`` and
  ``pg_trgm``'s trigrams, each with the event id first (``btree_gin``: a search reads windows of
  the newest ids); the extensions are created when missing.

``conversation.search_key`` numbers conversations for the SQLite document ids (PostgreSQL has
the column too, so that the tables are the same, and leaves it NULL for new conversations). The backfill of an existing file reports its
progress through ``openhands_memory.migrate.progress``. A later revision that copies the
``event`` table (batch mode) must create the triggers again: ``storage.search.TRIGGERS``.
(The queue this revision made is frozen in ``storage/search_queue.py``, 0011 replaced it; its
PostgreSQL indexes, in ``storage/search_expression.py``, 0012 replaced them.)
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = '0008'
down_revision: Union[str, None] = '0007'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('conversation', schema=None) as batch_op:
        batch_op.add_column(sa.Column('search_key', sa.Integer(), nullable=True))
    bind = op.get_bind()
    bind.exec_driver_sql(
        "UPDATE conversation SET search_key = n.k FROM "
        "(SELECT id, ROW_NUMBER() OVER (ORDER BY created_at, id) AS k FROM conversation) n WHERE n.id = conversation.id"
    )
    op.create_index('ux_conversation_search_key', 'conversation', ['search_key'], unique=True)
    from openhands_memory import migrate

    if bind.dialect.name == 'sqlite':
        from openhands_memory.storage import search_queue

        search_queue.create(bind.exec_driver_sql, migrate.progress)
    else:
        from openhands_memory.storage import search_expression

        search_expression.create(bind.exec_driver_sql, migrate.progress)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == 'sqlite':
        from openhands_memory.storage import search_queue

        search_queue.drop(bind.exec_driver_sql)
    else:
        from openhands_memory.storage import search_expression

        search_expression.drop(bind.exec_driver_sql)
    op.drop_index('ux_conversation_search_key', table_name='conversation')
    with op.batch_alter_table('conversation', schema=None) as batch_op:
        batch_op.drop_column('search_key')
