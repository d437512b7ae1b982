"""What a run's page reads besides the journal: methods of `SqlStore`.

A page is built from a handful of batched queries (run, journal, gates, audit, the blobs it
shows), never one per node. An open page asks `run_pulse` at a modest interval: one indexed
query whose answer changes whenever anything the page shows changes (the run's status and
version, a journal entry started, finished or invalidated, an audit row), on whichever replica
it happened; only then is the page's state read again.
"""

from __future__ import annotations

import sqlalchemy as sa

from core.store.database import store_operation
from core.store.records import Gate, NodeStatus
from core.store.rows import gate_from_row
from core.store.sql_base import SqlBase
from core.store.tables import AUDIT, GATES, JOURNAL, RUNS

Pulse = tuple[object, ...]


def _pulse_query() -> sa.Select[tuple[object, ...]]:
    journal = (
        sa.select(
            sa.func.count(),
            sa.func.count(JOURNAL.c.finished_at),
            sa.func.coalesce(sa.func.max(JOURNAL.c.id), 0),
            sa.func.coalesce(
                sa.func.sum(sa.case((JOURNAL.c.status == NodeStatus.INVALIDATED.value, 1), else_=0)), 0
            ),
        )
        .where(JOURNAL.c.run_id == sa.bindparam("run_id"))
        .subquery()
    )
    audit = (
        sa.select(sa.func.coalesce(sa.func.max(AUDIT.c.id), 0))
        .where(AUDIT.c.run_id == sa.bindparam("run_id"))
        .scalar_subquery()
    )
    return (
        sa.select(RUNS.c.status, RUNS.c.version, RUNS.c.thread, *journal.c, audit)
        .select_from(RUNS.join(journal, sa.true()))
        .where(RUNS.c.id == sa.bindparam("run_id"))
    )


_PULSE = _pulse_query()


class ViewsSql(SqlBase):
    @store_operation("read a run's gates")
    def run_gates(self, run_id: str) -> list[Gate]:
        """Every approval gate of `run_id` (waiting or decided), oldest first, in one query."""
        query = sa.select(GATES).where(GATES.c.run_id == run_id).order_by(GATES.c.created_at)
        with self._single.connect() as conn:
            return [gate_from_row(row) for row in conn.execute(query)]

    @store_operation("check a run for changes")
    def run_pulse(self, run_id: str) -> Pulse | None:
        """A value that changes whenever the run's page would (None: no such run)."""
        with self._single.connect() as conn:
            row = conn.execute(_PULSE, {"run_id": run_id}).first()
        return None if row is None else tuple(row)
