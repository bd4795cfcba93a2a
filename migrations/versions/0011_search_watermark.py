"""The search index keeps a watermark per conversation instead of a queue of events

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25

Revision 0010 queued every searchable event in ``search_pending`` (a row and an index entry
per append, written by a trigger) until 1,024 waited. A conversation's events are already one
run of the primary key, in id order, so the queue only repeated what the ids say. Now
``search_state`` keeps each conversation's watermark (every searchable event up to it is
indexed, none above it), and an append writes nothing for the index until its conversation is
``FLUSH_AT`` events past the watermark (``storage/search_watermark.py``, frozen as this
revision and the next ones built it).

Upgrade: what waited in the queue is indexed now, the watermark of each conversation is its
newest event, and the queue goes. Downgrade: the events above each watermark are queued again,
as revision 0010 expects. A file whose index is switched off (no tables) has nothing to change;
nor has PostgreSQL, which keeps its index in the writing transaction, as any index.
"""
from typing import Sequence, Union

from alembic import op

revision: str = '0011'
down_revision: Union[str, None] = '0010'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def _indexed(bind) -> bool:
    return bind.dialect.name == 'sqlite' and bind.exec_driver_sql(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'event_words'").scalar() == 1


def upgrade() -> None:
    from openhands_memory.storage import search_queue, search_text_v1
    from openhands_memory.storage import search_watermark as search

    bind = op.get_bind()
    if not _indexed(bind):
        return
    run = bind.exec_driver_sql
    for name in search_queue.TRIGGER_NAMES:
        run(f"DROP TRIGGER IF EXISTS {name}")
    for t in (search.WORDS, search.GRAMS):
        run(f"INSERT INTO {t}(rowid, body) SELECT p.doc, {search_text_v1.sqlite_text('e.payload')} "
            f"FROM {search_queue.PENDING} p JOIN event e ON e.conversation_id = p.conversation_id AND e.id = p.seq")
    run(f"DROP TABLE {search_queue.PENDING}")
    run(search.STATE_TABLE)
    run(f"INSERT INTO {search.STATE}(conversation_id, upto) SELECT conversation_id, MAX(id) FROM event "
        "GROUP BY conversation_id")
    for statement in search_text_v1.TRIGGERS:  # the text as this revision spelled it
        run(statement)


def downgrade() -> None:
    from openhands_memory.storage import search_queue
    from openhands_memory.storage import search_watermark as search

    bind = op.get_bind()
    if not _indexed(bind):
        return
    run = bind.exec_driver_sql
    for name in search.TRIGGER_NAMES:
        run(f"DROP TRIGGER IF EXISTS {name}")
    run(search_queue.PENDING_TABLE)
    run(f"INSERT INTO {search_queue.PENDING}(doc, conversation_id, seq) "
        f"SELECT (c.search_key << {search.SHIFT}) | e.id, e.conversation_id, e.id FROM conversation c "
        f"JOIN event e ON e.conversation_id = c.id WHERE e.kind IN ({search.KIND_LIST}) "
        f"AND e.id > {search.upto_of('c.id')} ORDER BY c.search_key, e.id")
    run(f"DROP TABLE {search.STATE}")
    for statement in search_queue.TRIGGERS:
        run(statement)
