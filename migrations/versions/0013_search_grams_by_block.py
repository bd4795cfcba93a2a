"""PostgreSQL's trigram index leads with the id's block, as the words' index does

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25

Revision 0012 led the trigram index of ``event_text`` with the id itself, so that a search
could cut a window of ids inside it. A range of ids is a partial match in GIN (each id its
own key), which reads every trigram's whole posting list for each window: a fragment search
took ~100 ms at 1M events. Led by the id's block (``id >> 10``), the index is probed block by
block, newest first, and GIN skips through each trigram's posting tree to the block's rows
(``storage/search.py``).

Upgrade: the index is built again with its new key (a database whose index is switched off,
or built by 0012 after this change, has nothing to do); downgrade: with the old one. Nothing
changes on SQLite.
"""
from typing import Sequence, Union

from alembic import op

revision: str = '0013'
down_revision: Union[str, None] = '0012'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

#: The index as revision 0012 built it (frozen here: ``search.PG_INDEXES`` has moved on).
OLD_GRAMS = "CREATE INDEX ix_event_text_grams ON event_text USING gin (id, body gin_trgm_ops)"


def _definition(bind) -> str | None:
    return bind.exec_driver_sql(
        "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'ix_event_text_grams'"
    ).scalar()


def _rebuild(bind, statement: str) -> None:
    bind.exec_driver_sql("DROP INDEX ix_event_text_grams")
    bind.exec_driver_sql(statement)


def upgrade() -> None:
    from openhands_memory.storage import search_watermark as search

    bind = op.get_bind()
    if bind.dialect.name != 'postgresql':
        return
    definition = _definition(bind)
    if definition is not None and "(id >>" not in definition:
        _rebuild(bind, search.PG_INDEXES[1])


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != 'postgresql':
        return
    definition = _definition(bind)
    if definition is not None and "(id >>" in definition:
        _rebuild(bind, OLD_GRAMS)
