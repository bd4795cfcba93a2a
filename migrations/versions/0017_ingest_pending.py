"""ingest_pending: events an agent server sent before their parents arrived

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27

The OpenHands agent server streams a conversation's events through its webhooks
(``openhands-memory serve --ingest``, ``io/agent_server.py``). Delivery is at least once and,
when its queue dropped events or a retry overtook another, may bring an event before the
event its ``parent_id`` names. The history tree stores a parent before its children
(``storage/tree.py``), so such an event waits here, as the JSON it came as, until its parent
is stored (by a later batch or by ``sync``); it is then stored as any other, and its row here
goes in the same transaction.
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = '0017'
down_revision: Union[str, None] = '0016'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        'ingest_pending',
        sa.Column('conversation_id', sa.String(), nullable=False),
        sa.Column('uid', sa.String(), nullable=False),
        sa.Column('position', sa.BigInteger(), nullable=False),
        sa.Column('parent_uid', sa.String(), nullable=False),
        sa.Column('received_at', sa.String(), nullable=False),
        sa.Column('payload', sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(['conversation_id'], ['conversation.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('conversation_id', 'uid'),
    )


def downgrade() -> None:
    op.drop_table('ingest_pending')
