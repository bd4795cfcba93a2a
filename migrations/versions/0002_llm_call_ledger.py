"""llm call ledger: one row per summarizer or ranking call

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0002'
down_revision: Union[str, None] = '0001'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table('llm_call',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('conversation_id', sa.String(), nullable=False),
    sa.Column('condensation_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.String(), nullable=False),
    sa.Column('strategy', sa.String(), nullable=False),
    sa.Column('purpose', sa.String(), nullable=False),
    sa.Column('model', sa.String(), nullable=False),
    sa.Column('prompt_tokens', sa.Integer(), nullable=True),
    sa.Column('completion_tokens', sa.Integer(), nullable=True),
    sa.Column('cost_usd', sa.Float(), nullable=True),
    sa.Column('latency_s', sa.Float(), nullable=False),
    sa.Column('outcome', sa.String(), nullable=False),
    sa.Column('error', sa.String(), nullable=True),
    sa.Column('response_id', sa.String(), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['conversation_id'], ['conversation.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('llm_call', schema=None) as batch_op:
        batch_op.create_index('ix_llm_call_conversation', ['conversation_id', 'id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('llm_call', schema=None) as batch_op:
        batch_op.drop_index('ix_llm_call_conversation')

    op.drop_table('llm_call')
