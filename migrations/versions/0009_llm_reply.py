"""llm_reply: model replies kept for reuse, by a hash of the request

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25

A replay (``openhands_memory/replay``) that summarizes with a real model sends the same
summarizer input again on every run of the same history and strategy. Its scratch database
keeps each reply under a hash of the request (``llm/cache.py``), so that a second replay
calls no model and costs nothing. The ledger (``llm_call``) records only calls made.
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = '0009'
down_revision: Union[str, None] = '0008'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        'llm_reply',
        sa.Column('key', sa.String(), nullable=False),
        sa.Column('model', sa.String(), nullable=False),
        sa.Column('reply', sa.String(), nullable=False),
        sa.Column('created_at', sa.String(), nullable=False),
        sa.PrimaryKeyConstraint('key'),
    )


def downgrade() -> None:
    op.drop_table('llm_reply')
