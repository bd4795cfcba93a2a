"""ix_event_loop_edge's predicate as comparisons, not an IN list

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26

Revision 0003 spelled the partial index's predicate ``kind NOT IN (<the four tool kinds>) OR
has_thinking``. SQLite codes an IN list of more than two constants as a small table it
builds once per run of a statement, and a bulk insert runs its statement once per row: every
inserted event built that table again to decide whether it belongs in the index, 1.6 us of
the 6.3 an SDK event's insert cost. The same predicate as four comparisons costs next to
nothing. The rows the index holds are the same (``kind`` is never NULL).

Upgrade and downgrade build the index again with the other spelling (a scan of ``event``);
the view's queries spell the predicate as the index does (``storage/session.py``
``LOOP_EDGE``), which is how both databases' planners know that the index serves them.
"""
from typing import Sequence, Union

from alembic import op

revision: str = '0014'
down_revision: Union[str, None] = '0013'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

# Frozen here, as each revision built it (``schema.LOOP_EDGE_WHERE`` may move on).
_KINDS = ('ActionEvent', 'AgentErrorEvent', 'ObservationEvent', 'UserRejectObservation')
OLD = f"kind NOT IN ({', '.join(repr(k) for k in _KINDS)}) OR has_thinking"
NEW = f"({' AND '.join(f'kind <> {k!r}' for k in _KINDS)}) OR has_thinking"


def _rebuild(where: str) -> None:
    op.execute("DROP INDEX ix_event_loop_edge")
    op.execute(f"CREATE INDEX ix_event_loop_edge ON event (conversation_id, id) WHERE {where}")


def upgrade() -> None:
    _rebuild(NEW)


def downgrade() -> None:
    _rebuild(OLD)
