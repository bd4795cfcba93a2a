"""event.parent_seq and conversation.head: a conversation's history as a tree

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24

The OpenHands SDK (1.31+) keeps a conversation as a tree: each event names its parent, HEAD
(``leaf_event_id``) can be moved back (``navigate_to``), and the next event starts a branch.
A branch is nearly always a run of consecutive ids, so only the events whose parent is not
the row before them store one (``parent_seq``; -1 for a new root): a linear history stores
none, and existing files need no rewrite. A state update (never a node of the SDK's tree)
that the next event skips to name an earlier parent stays inside the path's interval but is
marked ``detached``, so that a tool loop runs across it as the SDK's path does. ``ix_event_jump`` holds exactly those rows, so
the path from a leaf to the root is one seek per branch on it (``Session.path``).
``conversation.head`` is HEAD: NULL while it is the newest row (every linear history), -1
when it is empty (``navigate_to(None)``), else the event's id. ``ix_hidden_run_path`` covers
what a view on a branch reads of the merged hidden runs of its path's condensations (from,
until, the run), so that read touches the index alone.
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = '0006'
down_revision: Union[str, None] = '0005'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    # Plain ALTER TABLE ... ADD COLUMN on both backends (alembic's batch mode does not copy
    # the table for an added nullable column): a 1M-event file upgrades in milliseconds.
    with op.batch_alter_table('event', schema=None) as batch_op:
        batch_op.add_column(sa.Column('parent_seq', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('detached', sa.Boolean(), nullable=True))
    with op.batch_alter_table('conversation', schema=None) as batch_op:
        batch_op.add_column(sa.Column('head', sa.Integer(), nullable=True))
    op.create_index(
        'ix_event_jump', 'event', ['conversation_id', 'id'], unique=False,
        sqlite_where=sa.text('parent_seq IS NOT NULL'),
        postgresql_where=sa.text('parent_seq IS NOT NULL'),
    )
    op.create_index('ix_hidden_run_path', 'hidden_run',
                    ['conversation_id', 'from_id', 'until_id', 'start_id', 'end_id'], unique=False,
                    sqlite_where=sa.text('until_id IS NOT NULL'),
                    postgresql_where=sa.text('until_id IS NOT NULL'))


def downgrade() -> None:
    op.drop_index('ix_hidden_run_path', table_name='hidden_run',
                  sqlite_where=sa.text('until_id IS NOT NULL'),
                  postgresql_where=sa.text('until_id IS NOT NULL'))
    op.drop_index('ix_event_jump', table_name='event',
                  sqlite_where=sa.text('parent_seq IS NOT NULL'),
                  postgresql_where=sa.text('parent_seq IS NOT NULL'))
    with op.batch_alter_table('conversation', schema=None) as batch_op:
        batch_op.drop_column('head')
    with op.batch_alter_table('event', schema=None) as batch_op:
        batch_op.drop_column('detached')
        batch_op.drop_column('parent_seq')
