"""The `Dispatch` role of `SqlStore`: journal methods for distributed node execution
(`BATON_EXECUTOR=procrastinate`).

The hand-off from the journal to the job queue is one PostgreSQL transaction:

    BEGIN
      INSERT INTO journal (... status='queued') RETURNING id      -- journal_queue
      procrastinate_defer_jobs_v1(...)                             -- the `defer` callback
    COMMIT

so a process that dies in between leaves neither the entry nor the job. A worker then
moves the entry `queued -> started` with a compare-and-swap (`journal_claim`) before the
step runs: of two claims (a redelivered job, a recovered replica) exactly one begins the
step. A replica that finds a `queued` entry whose job is gone settles it with
`journal_unqueue` (also a CAS: it loses to a worker that claimed it first).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from core.errors import ConfigurationError
from core.store.database import store_operation
from core.store.port import Defer
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

    @store_operation("hand a step to the job queue")
    def journal_queue(
        self,
        *,
        run_id: str,
        node_id: str,
        cache_key: str,
        components: dict[str, Any],
        attempt: int,
        idempotency_key: str | None,
        defer: Defer,
    ) -> tuple[int, int]:
        """Write a `queued` entry and defer its job in the same transaction: (entry id, job id)."""
        self._require_postgres()
        values = {
            "run_id": run_id,
            "node_id": node_id,
            "attempt": attempt,
            "cache_key": cache_key,
            "components": components,
            "status": _QUEUED,
            "started_at": self._now(),
            "idempotency_key": idempotency_key,
            "tokens_in": 0,
            "tokens_out": 0,
            "artifacts": {},
        }
        with self._engine.begin() as conn:
            inserted = conn.execute(sa.insert(JOURNAL).values(values).returning(JOURNAL.c.id))
            entry_id = int(inserted.scalar_one())
            job_id = defer(conn.connection.dbapi_connection, entry_id)
        return entry_id, job_id

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
