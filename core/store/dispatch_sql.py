"""The `Dispatch` role of `SqlStore`: journal methods for distributed node execution
(`BATON_EXECUTOR=procrastinate`).

The hand-off from the journal to the job queue is one PostgreSQL transaction:

    BEGIN
      INSERT INTO journal (... status='queued') RETURNING id      -- journal_queue_many
      procrastinate_defer_jobs_v1(...)                             -- the `defer` callback
    COMMIT

(one transaction for every step that became ready in the same scheduling tick), so a
process that dies in between leaves neither the entry nor the job. A worker then moves
the entry `queued -> started` with a compare-and-swap (`journal_claim`) before the step
runs: of two claims (a redelivered job, a recovered replica) exactly one begins the
step. A replica that finds a `queued` entry whose job is gone settles it with
`journal_unqueue` (also a CAS: it loses to a worker that claimed it first).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import sqlalchemy as sa

from core.errors import ConfigurationError
from core.store.database import store_operation
from core.store.port import Defer, Handoff
from core.store.records import JournalEntry, NodeStatus
from core.store.rows import journal_from_row
from core.store.sql_base import SqlBase
from core.store.tables import JOURNAL

_QUEUED = NodeStatus.QUEUED.value


class DispatchSql(SqlBase):
    def _require_postgres(self) -> None:
        if self.dialect != "postgresql":
            raise ConfigurationError(
                "BATON_EXECUTOR=procrastinate needs PostgreSQL; BATON_DATABASE_URL is SQLite",
                hint="Set BATON_DATABASE_URL=postgresql://… or BATON_EXECUTOR=local.",
            )

    @store_operation("hand steps to the job queue")
    def journal_queue_many(self, handoffs: Sequence[Handoff], defer: Defer) -> list[tuple[int, int]]:
        """Write a `queued` entry per hand-off and defer each one's job, all in one transaction
        (one commit for every step that became ready together): (entry id, job id) each, in
        order. Either every entry and job is written or none is."""
        self._require_postgres()
        if not handoffs:
            return []
        now = self._now()
        rows = [
            {
                "run_id": h.run_id,
                "node_id": h.node_id,
                "attempt": h.attempt,
                "cache_key": h.cache_key,
                "components": h.components,
                "status": _QUEUED,
                "started_at": now,
                "idempotency_key": h.idempotency_key,
                "tokens_in": 0,
                "tokens_out": 0,
                "artifacts": {},
            }
            for h in handoffs
        ]
        statement = sa.insert(JOURNAL).returning(JOURNAL.c.id, sort_by_parameter_order=True)
        with self._engine.begin() as conn:
            entry_ids = [int(i) for i in conn.execute(statement, rows).scalars()]
            job_ids = defer(conn.connection.dbapi_connection, entry_ids)
        return list(zip(entry_ids, job_ids, strict=True))

    @store_operation("claim a queued step")
    def journal_claim(self, entry_id: int) -> JournalEntry | None:
        """CAS `queued -> started`; the claimed entry, or None when it was not queued."""
        statement = (
            sa.update(JOURNAL)
            .where(JOURNAL.c.id == entry_id, JOURNAL.c.status == _QUEUED)
            .values(status=NodeStatus.STARTED.value, started_at=self._now())
            .returning(*JOURNAL.c)
        )
        with self._engine.begin() as conn:
            row = conn.execute(statement).first()
        return journal_from_row(row) if row is not None else None

    @store_operation("withdraw a queued step")
    def journal_unqueue(self, entry_id: int, error: str) -> bool:
        """CAS `queued -> failed` (the step never started); False when a worker claimed it first."""
        statement = (
            sa.update(JOURNAL)
            .where(JOURNAL.c.id == entry_id, JOURNAL.c.status == _QUEUED)
            .values(status=NodeStatus.FAILED.value, finished_at=self._now(), error=error)
        )
        with self._engine.begin() as conn:
            return int(conn.execute(statement).rowcount) == 1

    @store_operation("read journal entries")
    def journal_entries(self, entry_ids: Iterable[int]) -> dict[int, JournalEntry]:
        """These entries by id, in one query (ids that do not exist are absent)."""
        wanted = sorted(set(entry_ids))
        if not wanted:
            return {}
        query = sa.select(JOURNAL).where(JOURNAL.c.id.in_(wanted))
        with self._single.connect() as conn:
            return {entry.id: entry for entry in map(journal_from_row, conn.execute(query))}
