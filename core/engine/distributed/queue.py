"""The Procrastinate side of distributed execution: connection info, schema, job lookups.

- `defer_many_on`: node jobs deferred on a connection Baton already holds (the hand-off
  transaction of `SqlStore.journal_queue_many`), by Procrastinate's own defer function,
  called with the jobs' arguments as one JSON array;
- `JobQueue` (a `procrastinate.App` opened async, small pool): job status and stalled-worker
  lookups for the replicas, and the app `baton worker` runs (`bot/worker.py`).

`apply_queue_schema(url)` installs Procrastinate's tables once (advisory lock, then a
no-op when they exist), like `SqlStore.migrate` does for Baton's own.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any, LiteralString

import procrastinate
import psycopg
from procrastinate import exceptions as pq_errors
from procrastinate.jobs import Status
from procrastinate.schema import SchemaManager
from procrastinate.sql import queries as pq_queries

from core.engine.distributed.jobs import DEFAULT_QUEUE, TASK_NAME, NodeJob, queueing_lock
from core.errors import StoreError
from core.store.database import describe, pg_conninfo
from core.store.pg_pool import lively_pool

log = logging.getLogger("baton.queue")

#: pg_advisory_lock key for installing Procrastinate's schema ("bqueue" in ASCII).
SCHEMA_LOCK_KEY = 0x627175657565
#: Job states after which a journal entry still `queued`/`started` will never be settled by it.
ENDED = frozenset({Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.ABORTED, Status.ABORTING})


def apply_queue_schema(database_url: str) -> bool:
    """Install Procrastinate's schema unless it is there; True when this call installed it.
    Safe when several processes start at once."""
    try:
        with psycopg.connect(pg_conninfo(database_url), autocommit=True) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK_KEY,))
            try:
                present = conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()
                if present is not None and present[0] is not None:
                    return False
                with conn.transaction():
                    conn.execute(SchemaManager.get_schema())  # type: ignore[arg-type]
                log.info("job queue schema installed", extra={"action": "queue_schema"})
                return True
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK_KEY,))
    except psycopg.Error as exc:
        raise StoreError(f"The job queue schema could not be installed ({describe(exc)}).") from exc


#: Procrastinate's `defer_jobs` (`procrastinate_defer_jobs_v1`, the function its `defer` calls)
#: for a batch of node jobs, their arguments sent as ONE JSON array: Procrastinate's own call
#: sends an array of `procrastinate_job_to_defer_v1` composites in text, whose every JSON
#: argument the driver escapes in Python, character class by character class (the largest
#: cost of a replica's hand-off, issue 34). The same rows: the node job's task, the queue,
#: the default priority, no lock, the entry's queueing lock, the task's arguments
#: (`{"job": …}`), no schedule. Job ids in order (the function inserts the jobs in the array's order).
_DEFER_NODE_JOBS: LiteralString = """
    SELECT unnest(procrastinate_defer_jobs_v1(ARRAY(
        SELECT ROW(%(queue)s, %(task)s, 0, NULL, job ->> 'lock', job -> 'args', NULL)
                   ::procrastinate_job_to_defer_v1
          FROM jsonb_array_elements(CAST(%(jobs)s AS jsonb)) WITH ORDINALITY AS j(job, n)
         ORDER BY n
    ))) AS id
"""


def defer_many_on(connection: Any, jobs: list[NodeJob], queue: str = DEFAULT_QUEUE) -> list[int]:
    """Defer `jobs` on `connection` (a psycopg connection) in one statement, inside the caller's
    transaction, each with its own queueing lock: their job ids, in order."""
    if not jobs:
        return []
    params = {
        "queue": queue,
        "task": TASK_NAME,
        "jobs": json.dumps(
            [{"lock": queueing_lock(job.entry_id), "args": {"job": job.to_args()}} for job in jobs],
            separators=(",", ":"),
        ),
    }
    try:
        with connection.cursor() as cursor:
            cursor.execute(_DEFER_NODE_JOBS, params)
            ids = [int(row[0]) for row in cursor.fetchall()]
    except psycopg.errors.UniqueViolation as exc:  # a job of one of these entries is waiting
        raise pq_errors.AlreadyEnqueued(f"a node job is already waiting ({exc})") from exc
    if len(ids) != len(jobs):
        raise StoreError(f"{len(jobs)} node jobs were deferred as {len(ids)}.", hint="A bug in Baton.")
    return ids


def queue_connector(conninfo: str, pool_size: int) -> procrastinate.PsycopgConnector:
    """Procrastinate's async connector as Baton uses it (workers and replicas; the bench's
    Procrastinate side too, so both run the same): its pool is `lively_pool`. Procrastinate
    sends each query (a function call: fetch a job, finish it) as a transaction of its own on
    a connection checked with an empty query first, four round trips; here one, while jobs flow."""
    return procrastinate.PsycopgConnector(
        conninfo=conninfo, min_size=1, max_size=max(1, pool_size), pool_factory=lively_pool
    )


#: Procrastinate's own fetch: one `doing` job (its columns), or a row of NULLs
_FETCH_JOB: LiteralString = pq_queries["fetch_job"]
_FINISH_JOB: LiteralString = pq_queries["finish_job"]
#: the same fetch, and, when the job is a node job, its journal entry claimed (`queued ->
#: started`) in the same statement and commit: `baton_claimed` is 1 (ours), 0 (not queued any
#: more: another worker's, withdrawn) or NULL (not a node job, or no job)
_FETCH_AND_CLAIM: LiteralString = """
    WITH job AS (
        SELECT id, status, task_name, priority, lock, queueing_lock, args, scheduled_at, queue_name,
               attempts, worker_id
          FROM procrastinate_fetch_job_v2(%(queues)s::varchar[], %(worker_id)s)
    ), claimed AS (
        UPDATE journal SET status = 'started', started_at = %(baton_at)s
         WHERE id = (SELECT CAST(args -> 'job' ->> 'entry_id' AS bigint) FROM job
                      WHERE task_name = %(baton_task)s)
           AND status = 'queued'
     RETURNING id
    )
    SELECT job.*, CASE WHEN job.task_name = %(baton_task)s THEN (SELECT count(*) FROM claimed) END
           AS baton_claimed
      FROM job
"""
#: the claim alone, for a fetch whose claim found its entry not `queued`: the fetch function
#: reads the jobs with a snapshot of its own, so it can return a job whose hand-off committed
#: after the statement's snapshot was taken, and the claim in that statement cannot see the
#: entry committed with it. A statement of its own sees it (READ COMMITTED) and claims it,
#: or finds it really claimed or withdrawn.
_CLAIM_AGAIN: LiteralString = """
    UPDATE journal SET status = 'started', started_at = %(baton_at)s
     WHERE id = %(entry_id)s AND status = 'queued'
 RETURNING id
"""


class WorkerConnector(procrastinate.PsycopgConnector):
    """`baton worker`'s connector: `queue_connector`'s pool, and two of a node job's four round
    trips folded into the other two (issue 34):

    - fetch + claim: Procrastinate's fetch of a job also claims the node job's journal entry,
      one statement, one commit (`_FETCH_AND_CLAIM`): the claim is durable before the step
      runs, as before, and a fetch is never committed without its claim. The task reads the
      outcome with `claimed(job_id)`.
    - result + finish: the worker's result statement also finishes the job
      (`WorkerJournal.settle(job_id=…)`), which adds the job id to `finished`; Procrastinate's
      own finish of that job is then skipped here (it would find no job: it was deleted with
      the result). A job the result statement did not finish is finished by Procrastinate as
      before.
    """

    def __init__(self, *, clock: Callable[[], float] = time.time, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._clock = clock
        self._claims: dict[int, bool] = {}
        #: node jobs finished with their result (shared with the worker's `WorkerJournal`)
        self.finished: set[int] = set()

    def claimed(self, job_id: int) -> bool | None:
        """Whether the fetch of `job_id` claimed its entry (None: this fetch did not try)."""
        return self._claims.pop(job_id, None)

    async def execute_query_one_async(self, query: LiteralString, **arguments: Any) -> dict[str, Any]:
        if query != _FETCH_JOB:
            return await super().execute_query_one_async(query, **arguments)
        row = await super().execute_query_one_async(
            _FETCH_AND_CLAIM, **arguments, baton_task=TASK_NAME, baton_at=self._clock()
        )
        claimed = row.pop("baton_claimed", None)
        if row.get("id") is not None and claimed == 0:
            claimed = await self._claim_again(row)
        if row.get("id") is not None and claimed is not None:
            self._claims[int(row["id"])] = claimed == 1
        return row

    async def _claim_again(self, row: dict[str, Any]) -> int:
        """1 when the entry of a fetched node job, not seen `queued` by the fetch's statement,
        is claimed by a statement of its own (see `_CLAIM_AGAIN`); 0 when it is not queued."""
        args = row.get("args") or {}
        entry_id = (args.get("job") or {}).get("entry_id") if isinstance(args, dict) else None
        if entry_id is None:
            return 0
        found = await super().execute_query_all_async(
            _CLAIM_AGAIN, entry_id=int(entry_id), baton_at=self._clock()
        )
        return 1 if found else 0

    async def execute_query_async(self, query: LiteralString, **arguments: Any) -> None:
        if query == _FINISH_JOB and arguments.get("job_id") in self.finished:
            self.finished.discard(arguments["job_id"])
            return
        await super().execute_query_async(query, **arguments)


def worker_connector(conninfo: str, pool_size: int) -> WorkerConnector:
    return WorkerConnector(
        conninfo=conninfo, min_size=1, max_size=max(1, pool_size), pool_factory=lively_pool
    )


class JobQueue:
    """An opened async app on the Baton database, for lookups (replicas) or working (workers)."""

    def __init__(self, database_url: str, *, pool_size: int = 2, worker: bool = False) -> None:
        """`worker`: the app `baton worker` runs (its connector is `WorkerConnector`)."""
        conninfo = pg_conninfo(database_url)
        connector = worker_connector(conninfo, pool_size) if worker else queue_connector(conninfo, pool_size)
        self.connector = connector
        self.app = procrastinate.App(connector=connector)
        self._open = False

    async def open(self) -> None:
        if not self._open:
            await self.app.open_async()
            self._open = True

    async def close(self) -> None:
        if self._open:
            self._open = False
            await self.app.close_async()

    async def status(self, job_id: int) -> Status | None:
        """The job's status, or None when it no longer exists."""
        try:
            return await self.app.job_manager.get_job_status_async(job_id)
        except pq_errors.NoResult:
            return None

    async def find(self, entry_id: int) -> list[tuple[int, Status]]:
        """Jobs deferred for a journal entry: (job id, status), oldest first."""
        jobs = await self.app.job_manager.list_jobs_async(
            task=TASK_NAME, queueing_lock=queueing_lock(entry_id)
        )
        return sorted((int(j.id), Status(j.status)) for j in jobs if j.id is not None and j.status)

    async def abort(self, job_id: int) -> bool:
        """Cancel a waiting job, or ask the worker running it to stop it (the step's process
        group is killed). False when the job had already ended."""
        try:
            return await self.app.job_manager.cancel_job_by_id_async(job_id, abort=True)
        except pq_errors.ProcrastinateException as exc:
            raise StoreError(f"The job queue could not stop job {job_id} ({exc}).") from exc

    async def stalled(self, seconds_since_heartbeat: float) -> set[int]:
        """Ids of node jobs a dead worker was running (its heartbeat is older than that)."""
        jobs = await self.app.job_manager.get_stalled_jobs(
            task_name=TASK_NAME, seconds_since_heartbeat=seconds_since_heartbeat
        )
        return {int(j.id) for j in jobs if j.id is not None}

    async def depth(self) -> dict[str, int]:
        """Node jobs per status (`todo`, `doing`, …): the queue depth to monitor."""
        rows = await self.app.job_manager.list_queues_async(queue=None)
        counts: dict[str, int] = {}
        for row in rows:
            for key in ("todo", "doing", "succeeded", "failed", "cancelled", "aborted"):
                counts[key] = counts.get(key, 0) + int(row.get(key) or 0)
        return counts
