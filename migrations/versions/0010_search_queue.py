"""The search index's queue counts itself; FTS5 merges less often

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25

Single appends on SQLite ran at a third of their rate without the search index (revision
0008). Two things cost most of it, besides the connection's statement journals (now kept in
memory, ``database.connect``): the queue was flushed every 128 events into new FTS5 segments
that FTS5 then merged four at a time, rewriting each posting at every level; and the flush
trigger counted the whole queue on every append. Now ``search_pending`` numbers its rows
(``n``, its rowid, which the flush resets by emptying it), the trigger flushes when
``n`` reaches ``FLUSH_AT`` (1,024; ``storage/search_queue.py``, where this queue is frozen), and both FTS5 tables merge 16 segments at
a time (``AUTOMERGE``). Nothing indexed changes; a queued event stays queued.

A file whose index is switched off (no tables) has nothing to change. PostgreSQL keeps its
index in the writing transaction, as any index: nothing here applies to it.
"""
from typing import Sequence, Union

from alembic import op

revision: str = '0010'
down_revision: Union[str, None] = '0009'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

# Revision 0008's queue and flush trigger, for the downgrade.
OLD_PENDING = "CREATE TABLE search_pending (doc INTEGER PRIMARY KEY, conversation_id TEXT NOT NULL, seq INTEGER NOT NULL)"
OLD_FLUSH_AT, OLD_AUTOMERGE = 128, 4


def _indexed(bind) -> bool:
    return bind.dialect.name == 'sqlite' and bind.exec_driver_sql(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'event_words'").scalar() == 1


def _rebuild(bind, table: str, triggers: Sequence[str], automerge: int) -> None:
    """The queue made again as ``table`` says (its rows kept, in document order), the
    triggers made again, and FTS5's merge width set."""
    from openhands_memory.storage import search_queue as search

    for name in search.TRIGGER_NAMES:
        bind.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}")
    bind.exec_driver_sql(f"ALTER TABLE {search.PENDING} RENAME TO search_pending_old")
    bind.exec_driver_sql(table)
    bind.exec_driver_sql(f"INSERT INTO {search.PENDING} (doc, conversation_id, seq) "
                         "SELECT doc, conversation_id, seq FROM search_pending_old ORDER BY doc")
    bind.exec_driver_sql("DROP TABLE search_pending_old")
    for statement in triggers:
        bind.exec_driver_sql(statement)
    for t in (search.WORDS, search.GRAMS):
        bind.exec_driver_sql(f"INSERT INTO {t}({t}, rank) VALUES ('automerge', {automerge})")


def upgrade() -> None:
    from openhands_memory.storage import search_queue as search

    bind = op.get_bind()
    if _indexed(bind):
        _rebuild(bind, search.PENDING_TABLE, search.TRIGGERS, search.AUTOMERGE)


def downgrade() -> None:
    from openhands_memory.storage import search_queue as search

    bind = op.get_bind()
    if _indexed(bind):
        old_flush = (f"CREATE TRIGGER search_pending_flush AFTER INSERT ON {search.PENDING} "
                     f"WHEN (SELECT COUNT(*) FROM {search.PENDING}) >= {OLD_FLUSH_AT} BEGIN {search._FLUSH}END")
        triggers = [old_flush if t.startswith("CREATE TRIGGER search_pending_flush") else t for t in search.TRIGGERS]
        _rebuild(bind, OLD_PENDING, triggers, OLD_AUTOMERGE)
