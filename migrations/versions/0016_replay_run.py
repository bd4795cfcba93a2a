"""replay_run: replays saved by ``replay --save``, for the web inspector to draw

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27

A replay computes, at every recorded model call, what other strategies would have sent and
cost; ``replay --save`` keeps that report in the database it read, so that the web inspector
(which never calls a model) can list and draw it.
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = '0016'
down_revision: Union[str, None] = '0015'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        'replay_run',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('conversation_id', sa.String(), nullable=False),
        sa.Column('created_at', sa.String(), nullable=False),
        sa.Column('strategies', sa.String(), nullable=False),
        sa.Column('report', sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(['conversation_id'], ['conversation.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('replay_run', schema=None) as batch_op:
        batch_op.create_index('ix_replay_run_conversation', ['conversation_id', 'id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('replay_run', schema=None) as batch_op:
        batch_op.drop_index('ix_replay_run_conversation')
    op.drop_table('replay_run')
