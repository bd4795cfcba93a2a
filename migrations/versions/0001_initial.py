"""initial schema: conversation, event, condensation, forgotten_range

Revision ID: 0001
Revises: 
Create Date: 2026-11-21
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0001'
down_revision: Union[str, None] = None
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table('conversation',
    sa.Column('id', sa.String(), nullable=False),
    sa.Column('created_at', sa.String(), nullable=False),
    sa.Column('metadata', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('event',
    sa.Column('conversation_id', sa.String(), nullable=False),
    sa.Column('id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('kind', sa.String(), nullable=False),
    sa.Column('source', sa.String(), nullable=False),
    sa.Column('timestamp', sa.String(), nullable=False),
    sa.Column('uid', sa.String(), nullable=True),
    sa.Column('tool_call_id', sa.String(), nullable=True),
    sa.Column('tool_name', sa.String(), nullable=True),
    sa.Column('llm_response_id', sa.String(), nullable=True),
    sa.Column('has_thinking', sa.Boolean(), nullable=False),
    sa.Column('llm_visible', sa.Boolean(), nullable=False),
    sa.Column('token_count', sa.Integer(), nullable=True),
    sa.Column('payload', sa.Text(), nullable=False),
    sa.ForeignKeyConstraint(['conversation_id'], ['conversation.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('conversation_id', 'id')
    )
    with op.batch_alter_table('event', schema=None) as batch_op:
        batch_op.create_index('ix_event_request', ['conversation_id', 'id'], unique=False, sqlite_where=sa.text("kind = 'CondensationRequest'"), postgresql_where=sa.text("kind = 'CondensationRequest'"))
        batch_op.create_index('ix_event_response', ['llm_response_id'], unique=False, sqlite_where=sa.text("kind = 'ActionEvent'"), postgresql_where=sa.text("kind = 'ActionEvent'"))
        batch_op.create_index('ux_event_uid', ['conversation_id', 'uid'], unique=True)

    op.create_table('condensation',
    sa.Column('conversation_id', sa.String(), nullable=False),
    sa.Column('id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('summary', sa.String(), nullable=True),
    sa.Column('summary_offset', sa.Integer(), nullable=True),
    sa.Column('strategy', sa.String(), nullable=True),
    sa.Column('reason', sa.String(), nullable=True),
    sa.Column('config', sa.JSON(), nullable=True),
    sa.Column('tokens_before', sa.Integer(), nullable=True),
    sa.Column('tokens_after', sa.Integer(), nullable=True),
    sa.Column('hidden', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['conversation_id', 'id'], ['event.conversation_id', 'event.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('conversation_id', 'id')
    )
    with op.batch_alter_table('condensation', schema=None) as batch_op:
        batch_op.create_index('ix_condensation_summary', ['conversation_id', 'id'], unique=False, sqlite_where=sa.text('summary IS NOT NULL AND summary_offset IS NOT NULL'), postgresql_where=sa.text('summary IS NOT NULL AND summary_offset IS NOT NULL'))

    op.create_table('forgotten_range',
    sa.Column('conversation_id', sa.String(), nullable=False),
    sa.Column('condensation_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('start_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('end_id', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['conversation_id', 'condensation_id'], ['condensation.conversation_id', 'condensation.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('conversation_id', 'condensation_id', 'start_id')
    )


def downgrade() -> None:
    op.drop_table('forgotten_range')
    with op.batch_alter_table('condensation', schema=None) as batch_op:
        batch_op.drop_index('ix_condensation_summary', sqlite_where=sa.text('summary IS NOT NULL AND summary_offset IS NOT NULL'), postgresql_where=sa.text('summary IS NOT NULL AND summary_offset IS NOT NULL'))

    op.drop_table('condensation')
    with op.batch_alter_table('event', schema=None) as batch_op:
        batch_op.drop_index('ux_event_uid')
        batch_op.drop_index('ix_event_response', sqlite_where=sa.text("kind = 'ActionEvent'"), postgresql_where=sa.text("kind = 'ActionEvent'"))
        batch_op.drop_index('ix_event_request', sqlite_where=sa.text("kind = 'CondensationRequest'"), postgresql_where=sa.text("kind = 'CondensationRequest'"))

    op.drop_table('event')
    op.drop_table('conversation')
