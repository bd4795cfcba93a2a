"""conversation.base_state and conversation_file: what the OpenHands SDK keeps beside events

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23

An OpenHands SDK conversation persisted through ``DatabaseFileStore``
(``openhands_memory.integrations.openhands_sdk``) writes three kinds of file: its events
(rows of ``event``, as always), ``base_state.json`` (the conversation's state: agent, stats,
status; rewritten on every change, so it is a column of its conversation) and whatever else
a tool writes (``conversation_file``, one row per path). Both are empty for conversations
that never met the SDK.
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = '0005'
down_revision: Union[str, None] = '0004'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('conversation', schema=None) as batch_op:
        batch_op.add_column(sa.Column('base_state', sa.Text(), nullable=True))
    op.create_table('conversation_file',
    sa.Column('conversation_id', sa.String(), nullable=False),
    sa.Column('path', sa.String(), nullable=False),
    sa.Column('content', sa.LargeBinary(), nullable=False),
    sa.Column('updated_at', sa.String(), nullable=False),
    sa.ForeignKeyConstraint(['conversation_id'], ['conversation.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('conversation_id', 'path')
    )


def downgrade() -> None:
    op.drop_table('conversation_file')
    with op.batch_alter_table('conversation', schema=None) as batch_op:
        batch_op.drop_column('base_state')
