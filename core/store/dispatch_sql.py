"""The `Dispatch` role of `SqlStore`: journal methods for distributed node execution
(`BATON_EXECUTOR=procrastinate`).

The hand-off from the journal to the job queue is one PostgreSQL transaction (on the hot
path's connection, `HotPath.transact`):

    BEGIN
      INSERT INTO journal (... status='queued') RETURNING id      -- journal_queue_many
      procrastinate_defer_jobs_v1(...)                             -- the `defer` callback
    COMMIT

(one transaction for every step that became ready in the same scheduling tick), so a
process that dies in between leaves neither the entry nor the job. A worker then moves
the entry `queued -> started` with a compare-and-swap (`WorkerJournal.claim`) before the step
runs: of two claims (a redelivered job, a recovered replica) exactly one begins the
step. A replica that finds a `queued` entry whose job is gone settles it with
`journal_unqueue` (also a CAS: it loses to a worker that claimed it first).

The worker's two writes, the claim and then its result (output and artifact blobs and the
settled entry, one statement), are `WorkerJournal`'s (`worker_journal.py`), on the worker's
event loop. The replica waits for results with `journal_settled`: one query for every
step it waits for, returning only the entries settled since, with their output bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa

from core.errors import ConfigurationError
from core.store.database import store_operation
from core.store.port import Defer, StepEntry
from core.store.records import JournalEntry, NodeStatus, stored
from core.store.rows import JOURNAL_FIELDS, journal_from_row, journal_from_values
from core.store.sql_base import SqlDatabase
from core.store.tables import BLOBS, JOURNAL

_QUEUED = NodeStatus.QUEUED.value
_OPEN = (NodeStatus.QUEUED.value, NodeStatus.STARTED.value)
#: The `queued` entries of a hand-off batch in one statement (PostgreSQL, through the driver):
#: their ids come back with the step attempt each belongs to.
_QUEUE_SQL = """
    INSERT INTO journal (run_id, node_id, attempt, cache_key, components, status, started_at,
                         idempotency_key, tokens_in, tokens_out, artifacts)
    SELECT r, n, a, k, CAST(c AS json), %(status)s, %(now)s, i, 0, 0, CAST('{}' AS json)
      FROM unnest(CAST(%(run_ids)s AS text[]), CAST(%(node_ids)s AS text[]), CAST(%(attempts)s AS integer[]),
                  CAST(%(cache_keys)s AS text[]), CAST(%(components)s AS text[]),
                  CAST(%(idempotency_keys)s AS text[])) AS h(r, n, a, k, c, i)
    RETURNING id, run_id, node_id, attempt
"""
#: the journal's columns (JSON ones as text, decoded by `rows.json_object`), then the
#: output blob's bytes
_SETTLED_COLUMNS = [
    *(
        sa.type_coerce(c, sa.Text).label(c.name) if isinstance(c.type, sa.JSON) else c
        for c in (JOURNAL.c[name] for name in JOURNAL_FIELDS)
    ),
    BLOBS.c.data,
]
#: the ids as one array parameter (`= ANY(:ids)`): the statement is the same whatever their
#: number, so it is compiled once, where `IN (…)` is expanded again for every read
_SETTLED = (
    sa.select(*_SETTLED_COLUMNS)
    .select_from(JOURNAL.outerjoin(BLOBS, BLOBS.c.digest == JOURNAL.c.output_digest))
    .where(
        JOURNAL.c.id == sa.func.any(sa.bindparam("ids", type_=sa.ARRAY(sa.Integer))),
        JOURNAL.c.status.not_in(_OPEN),
    )
)


class DispatchSql:
    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    def _require_postgres(self) -> None:
        if self._db.dialect != "postgresql":
            raise ConfigurationError(
                "BATON_EXECUTOR=procrastinate needs PostgreSQL; BATON_DATABASE_URL is SQLite",
                hint="Set BATON_DATABASE_URL=postgresql://… or BATON_EXECUTOR=local.",
            )

    def journal_queue_many(self, handoffs: Sequence[StepEntry], defer: Defer) -> list[tuple[int, int]]:
        """Write a `queued` entry per hand-off and defer each one's job, all in one transaction
        (one commit for every step that became ready together): (entry id, job id) each, in
        order. Either every entry and job is written or none is."""
        self._require_postgres()
        if not handoffs:
            return []
        now = self._db.now()
        columns: dict[str, list[Any]] = {
            "run_ids": [h.run_id for h in handoffs],
            "node_ids": [h.node_id for h in handoffs],
            "attempts": [h.attempt for h in handoffs],
            "cache_keys": [h.cache_key for h in handoffs],
            "components": [json.dumps(stored(h.components, h.notes)) for h in handoffs],
            "idempotency_keys": [h.idempotency_key for h in handoffs],
        }
        keys = [(h.run_id, h.node_id, h.attempt) for h in handoffs]
        if len(set(keys)) != len(keys):
            raise ValueError("a batch of hand-offs names one step attempt twice")

        def write(conn: Any) -> list[tuple[int, int]]:
            with conn.cursor() as cursor:
                cursor.execute(_QUEUE_SQL, {**columns, "status": _QUEUED, "now": now})
                written = {(r, n, a): int(i) for i, r, n, a in cursor.fetchall()}
            entry_ids = [written[key] for key in keys]
            return list(zip(entry_ids, defer(conn, entry_ids), strict=True))

        return self._db.hot.transact(write, operation="hand steps to the job queue")

    @store_operation("withdraw a queued step")
    def journal_unqueue(self, entry_id: int, error: str) -> bool:
        """CAS `queued -> failed` (the step never started); False when a worker claimed it first."""
        statement = (
            sa.update(JOURNAL)
            .where(JOURNAL.c.id == entry_id, JOURNAL.c.status == _QUEUED)
            .values(status=NodeStatus.FAILED.value, finished_at=self._db.now(), error=error)
        )
        with self._db.engine.begin() as conn:
            return int(conn.execute(statement).rowcount) == 1

    @store_operation("read journal entries")
    def journal_entries(self, entry_ids: Iterable[int]) -> dict[int, JournalEntry]:
        """These entries by id, in one query (ids that do not exist are absent)."""
        wanted = sorted(set(entry_ids))
        if not wanted:
            return {}
        query = sa.select(JOURNAL).where(JOURNAL.c.id.in_(wanted))
        with self._db.single.connect() as conn:
            return {entry.id: entry for entry in map(journal_from_row, conn.execute(query))}

    @store_operation("read settled journal entries")
    def journal_settled(self, entry_ids: Iterable[int]) -> dict[int, tuple[JournalEntry, bytes | None]]:
        """Those of these entries that are settled, with their output bytes, in one query:
        a replica waiting for many steps decodes only the entries that have news."""
        wanted = sorted(set(entry_ids))
        if not wanted:
            return {}
        out: dict[int, tuple[JournalEntry, bytes | None]] = {}
        with self._db.single.connect() as conn:
            for row in conn.execute(_SETTLED, {"ids": wanted}):
                entry = journal_from_values(row[:-1])
                out[entry.id] = (entry, bytes(row[-1]) if row[-1] is not None else None)
        return out
