"""PostgreSQL keeps the texts it searches in a table, indexed behind a watermark

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25

Revision 0008 indexed two expressions over ``event`` on PostgreSQL, so every append spelled
the event's text twice (once per GIN index) and fed both indexes, some 0.7 ms of an append
that otherwise costs 0.35 ms; and a fragment search spelled each candidate's text again to
confirm it. Now ``event_text`` keeps each searchable event's text, with the two GIN indexes
on it, and ``search_state`` each conversation's watermark, as SQLite keeps it since 0011: a
statement trigger spells the texts of a conversation once it is ``PG_FLUSH_AT`` events past
its watermark, in that transaction, and a search reads the events above the watermark
directly (``storage/search.py``).

Upgrade: the texts of every event are spelled (a progress bar), the watermark of each
conversation is its newest event, and the expression indexes go. Downgrade: the expression
indexes are built again and the texts go. A database whose index is switched off has nothing
to change; nor has SQLite.
"""
from typing import Sequence, Union

from alembic import op

revision: str = '0012'
down_revision: Union[str, None] = '0011'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def _runner(bind):
    """Runs one statement with ``?`` placeholders (the library's SQL) on psycopg."""
    from openhands_memory.storage.search_watermark import pyformat as _pyformat

    return lambda sql, params=(): bind.exec_driver_sql(_pyformat(sql), tuple(params)) if params \
        else bind.exec_driver_sql(sql)


def upgrade() -> None:
    from openhands_memory import migrate
    from openhands_memory.storage import search_expression, search_text_v1
    from openhands_memory.storage import search_watermark as search

    bind = op.get_bind()
    if bind.dialect.name != 'postgresql':
        return
    run = _runner(bind)
    if not search_expression.on(run):
        return
    search_expression.drop_indexes(run)
    # The functions as this revision spelled texts and words (0015 moved on).
    search.create_postgres(run, migrate.progress, (search_text_v1.PG_FUNCTION, search_text_v1.PG_WORDS_FUNCTION))


def downgrade() -> None:
    from openhands_memory.storage import search_expression
    from openhands_memory.storage import search_watermark as search

    bind = op.get_bind()
    if bind.dialect.name != 'postgresql':
        return
    run = _runner(bind)
    if not search.postgres_on(run):
        return
    search.drop_postgres(run)
    search_expression.create(run)
