"""hidden runs: canonical, temporal rows replace condensation.hidden; a loop-edge index

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

``condensation.hidden`` stored, on every condensation row, the union of everything hidden so
far: quadratic in the number of condensations, and fragmented by the Condensation rows that
SDK histories never list as forgotten. ``hidden_run`` stores each canonical run once, with the
condensation that made it and the one that merged it away. The upgrade computes it from
``forgotten_range`` (the record of what each condensation forgot); the downgrade writes
``hidden`` back from it.

The logic is written out here rather than imported, so that this revision keeps doing what
it did when the library changes.
"""
import json
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = '0003'
down_revision: Union[str, None] = '0002'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

# Columns this revision removes; tests/test_migrations.py leaves them out of its row checks
# and checks what replaced them instead.
dropped_columns = {'condensation': ['hidden']}

_LIVE_WHERE = sa.text('until_id IS NULL')
# Rows that end or start a tool loop (non-tool kinds, thinking actions): the view seeks the
# nearest one before each visible interval instead of walking back through tool events.
_LOOP_EDGE_WHERE = sa.text(
    "kind NOT IN ('ActionEvent', 'AgentErrorEvent', 'ObservationEvent', 'UserRejectObservation') "
    "OR has_thinking"
)
_ANY_VISIBLE = sa.text(
    "SELECT 1 FROM event WHERE conversation_id = :cid AND id BETWEEN :lo AND :hi AND llm_visible LIMIT 1"
)


def _merge(runs):
    out = []
    for s, e in sorted(r for r in runs if r[0] <= r[1]):
        if out and s <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _fill(bind) -> None:
    """Replay every conversation's forgotten ranges into canonical hidden runs."""
    conditions = bind.execute(sa.text(
        "SELECT c.conversation_id, c.id, r.start_id, r.end_id FROM condensation c "
        "LEFT JOIN forgotten_range r ON r.conversation_id = c.conversation_id "
        "AND r.condensation_id = c.id ORDER BY c.conversation_id, c.id, r.start_id"
    )).fetchall()
    by_cond: dict[tuple[str, int], list] = {}
    for cid, cond, start, end in conditions:
        runs = by_cond.setdefault((cid, cond), [])
        if start is not None and end is not None and start <= end:
            runs.append((start, end))
    rows = []
    live: dict[str, dict[tuple[int, int], int]] = {}  # conversation -> live run -> from_id
    for (cid, cond), forgotten in by_cond.items():
        if not forgotten:
            continue
        current = live.setdefault(cid, {})
        before = sorted(current)
        merged = _merge(before + forgotten)
        after = []
        for s, e in merged:
            if after:
                ps, pe = after[-1]
                settled = (ps, pe) in current and (s, e) in current
                if not settled and bind.execute(_ANY_VISIBLE, {'cid': cid, 'lo': pe + 1, 'hi': s - 1}).first() is None:
                    after[-1] = (ps, e)
                    continue
            after.append((s, e))
        for run in set(before) - set(after):
            rows.append({'conversation_id': cid, 'from_id': current.pop(run), 'start_id': run[0],
                         'end_id': run[1], 'until_id': cond})
        for run in set(after) - set(before):
            current[run] = cond
    for cid, current in live.items():
        rows += [{'conversation_id': cid, 'from_id': f, 'start_id': s, 'end_id': e, 'until_id': None}
                 for (s, e), f in current.items()]
    if rows:
        table = sa.table('hidden_run', *(sa.column(c) for c in
                         ('conversation_id', 'from_id', 'start_id', 'end_id', 'until_id')))
        bind.execute(table.insert(), rows)


def upgrade() -> None:
    op.create_table('hidden_run',
    sa.Column('conversation_id', sa.String(), nullable=False),
    sa.Column('from_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('start_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('end_id', sa.Integer(), nullable=False),
    sa.Column('until_id', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['conversation_id', 'from_id'], ['condensation.conversation_id', 'condensation.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('conversation_id', 'from_id', 'start_id')
    )
    with op.batch_alter_table('hidden_run', schema=None) as batch_op:
        batch_op.create_index('ix_hidden_run_live', ['conversation_id', 'start_id'], unique=False, sqlite_where=_LIVE_WHERE, postgresql_where=_LIVE_WHERE)
    with op.batch_alter_table('event', schema=None) as batch_op:
        batch_op.create_index('ix_event_loop_edge', ['conversation_id', 'id'], unique=False, sqlite_where=_LOOP_EDGE_WHERE, postgresql_where=_LOOP_EDGE_WHERE)
    _fill(op.get_bind())
    with op.batch_alter_table('condensation', schema=None) as batch_op:
        batch_op.drop_column('hidden')


def downgrade() -> None:
    with op.batch_alter_table('condensation', schema=None) as batch_op:
        batch_op.add_column(sa.Column('hidden', sa.JSON(), nullable=False, server_default='[]'))
    bind = op.get_bind()
    conds = bind.execute(sa.text("SELECT conversation_id, id FROM condensation")).fetchall()
    for cid, cond in conds:
        runs = bind.execute(sa.text(
            "SELECT start_id, end_id FROM hidden_run WHERE conversation_id = :cid AND from_id <= :c "
            "AND (until_id IS NULL OR until_id > :c) ORDER BY start_id"), {'cid': cid, 'c': cond}
        ).fetchall()
        bind.execute(
            sa.text("UPDATE condensation SET hidden = :h WHERE conversation_id = :cid AND id = :c"),
            {'h': json.dumps([[s, e] for s, e in runs]), 'cid': cid, 'c': cond},
        )
    with op.batch_alter_table('condensation', schema=None) as batch_op:
        batch_op.alter_column('hidden', server_default=None)
    with op.batch_alter_table('hidden_run', schema=None) as batch_op:
        batch_op.drop_index('ix_hidden_run_live', sqlite_where=_LIVE_WHERE, postgresql_where=_LIVE_WHERE)
    op.drop_table('hidden_run')
    with op.batch_alter_table('event', schema=None) as batch_op:
        batch_op.drop_index('ix_event_loop_edge', sqlite_where=_LOOP_EDGE_WHERE, postgresql_where=_LOOP_EDGE_WHERE)
