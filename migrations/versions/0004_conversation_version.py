"""conversation.version: a counter every write transaction on PostgreSQL bumps

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23

A view cache must learn that another connection wrote to its conversation. SQLite says so
with ``PRAGMA data_version``; PostgreSQL has no such thing, so each write transaction there
bumps the conversation's version (and reads the new value inside the transaction). SQLite
files carry the column too, at 0: one schema for both backends.
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = '0004'
down_revision: Union[str, None] = '0003'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('conversation', schema=None) as batch_op:
        batch_op.add_column(sa.Column('version', sa.BigInteger(), server_default='0', nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('conversation', schema=None) as batch_op:
        batch_op.drop_column('version')
