"""ix_event_pin: the pins of a conversation are one seek

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25

A pin or unpin is an event row of kind ``PinEvent`` (``view/pins.py``): it needs no table of
its own, so that ``view(at=N)`` and a branch see exactly the pins made on their path. The view
reads them on every first load, so they get a partial index: with no pins it is empty, and
reading it costs one probe of an empty index.
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = '0007'
down_revision: Union[str, None] = '0006'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_index(
        'ix_event_pin', 'event', ['conversation_id', 'id'], unique=False,
        sqlite_where=sa.text("kind = 'PinEvent'"),
        postgresql_where=sa.text("kind = 'PinEvent'"),
    )


def downgrade() -> None:
    op.drop_index('ix_event_pin', table_name='event',
                  sqlite_where=sa.text("kind = 'PinEvent'"),
                  postgresql_where=sa.text("kind = 'PinEvent'"))
