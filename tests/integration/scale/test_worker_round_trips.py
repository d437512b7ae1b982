"""A node job's round trips on `baton worker` (issue 34): Procrastinate's fetch claims the job's
journal entry in the same statement, and the result statement finishes the job, so a step
costs two statements where it cost four (fetch, claim, result, finish). What is durable before
a step runs does not change: the claim is committed with the fetch, before the task starts.

Through the real connector (`JobQueue(worker=True)`, as `baton worker` opens it), the real
`WorkerJournal` and jobs deferred the way replicas defer them, on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
from procrastinate.jobs import Status

from core.engine.distributed import WorkerConnector
from core.engine.distributed.jobs import NodeJob
from core.engine.distributed.queue import JobQueue, defer_many_on
from core.engine.nodes import RenderedNode
from core.store.port import StepEntry
from core.store.records import NodeStatus
from core.store.repository import SqlStore
from core.store.worker_journal import WorkerJournal
from core.workflows.model import OutputContract
from tests.integration.store.conftest import run_factory

pytestmark = pytest.mark.postgres


@pytest.fixture
def store(migrated_queue_postgres_url: str) -> Iterator[SqlStore]:
    with SqlStore(migrated_queue_postgres_url) as opened:  # the test's `postgres_url`
        yield opened


@pytest.fixture
async def queue(store: SqlStore, postgres_url: str) -> AsyncIterator[JobQueue]:
    opened = JobQueue(postgres_url, pool_size=2, worker=True)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def journal(store: SqlStore, postgres_url: str, queue: JobQueue) -> AsyncIterator[WorkerJournal]:
    async with WorkerJournal(postgres_url, size=2) as opened:
        assert isinstance(queue.connector, WorkerConnector)
        queue.connector.finished = opened.finished  # as bot.worker.build_worker shares them
        yield opened


def _hand_off(store: SqlStore, run_id: str, *nodes: str) -> list[tuple[int, int]]:
    """`queued` entries and their node jobs in one transaction, as a replica hands steps off:
    (entry id, job id) per node."""
    handoffs = [
        StepEntry(
            run_id=run_id, node_id=n, cache_key=f"k-{n}", components={}, attempt=1, idempotency_key=None
        )
        for n in nodes
    ]

    def defer(connection: Any, entry_ids: list[int]) -> list[int]:
        jobs = [
            NodeJob(entry_id=entry_id, run_id=run_id, node_id=node, attempt=1, idempotency_key=None,
                    timeout=60.0, rendered=RenderedNode("tool", tool="noop"), output=OutputContract())
            for entry_id, node in zip(entry_ids, nodes, strict=True)
        ]  # fmt: skip
        return defer_many_on(connection, jobs)

    return store.dispatch.journal_queue_many(handoffs, defer)


async def test_the_fetch_claims_the_entry_and_the_result_finishes_the_job(
    store: SqlStore, queue: JobQueue, journal: WorkerJournal
) -> None:
    run = run_factory(store)()
    [(entry_id, job_id)] = _hand_off(store, run.id, "a")
    connector = queue.connector
    assert isinstance(connector, WorkerConnector)
    manager = queue.app.job_manager
    worker_id = await manager.register_worker()

    job = await manager.fetch_job(queues=None, worker_id=worker_id)

    assert job is not None and job.id == job_id
    # committed with the fetch, before any task runs: another connection reads it `started`
    assert store.dispatch.journal_entries([entry_id])[entry_id].status is NodeStatus.STARTED
    assert connector.claimed(job_id) is True
    assert connector.claimed(job_id) is None  # read once

    await journal.settle(entry_id, status=NodeStatus.COMPLETED, output=b"ok", job_id=job_id)

    entry = store.dispatch.journal_entries([entry_id])[entry_id]
    assert entry.status is NodeStatus.COMPLETED
    assert await queue.status(job_id) is None  # finished (deleted) by the same statement
    assert journal.finished == {job_id}
    # Procrastinate then finishes the job as usual: skipped (it would find no job and raise)
    await manager.finish_job(job=job, status=Status.SUCCEEDED, delete_job=True)
    assert journal.finished == set()
    await manager.unregister_worker(worker_id)


async def test_a_job_whose_entry_is_not_queued_is_fetched_unclaimed_and_finished_by_procrastinate(
    store: SqlStore, queue: JobQueue, journal: WorkerJournal
) -> None:
    run = run_factory(store)()
    [(entry_id, job_id)] = _hand_off(store, run.id, "a")
    assert store.dispatch.journal_unqueue(entry_id, "withdrawn by the replica") is True
    manager = queue.app.job_manager
    worker_id = await manager.register_worker()

    job = await manager.fetch_job(queues=None, worker_id=worker_id)

    assert job is not None and job.id == job_id
    assert isinstance(queue.connector, WorkerConnector) and queue.connector.claimed(job_id) is False
    assert store.dispatch.journal_entries([entry_id])[entry_id].status is not NodeStatus.STARTED
    await manager.finish_job(job=job, status=Status.SUCCEEDED, delete_job=True)  # a real finish
    assert await queue.status(job_id) is None
    await manager.unregister_worker(worker_id)


async def test_a_result_for_a_job_no_longer_running_settles_the_entry_and_leaves_the_job_alone(
    store: SqlStore, queue: JobQueue, journal: WorkerJournal
) -> None:
    """The finish is conditional: a job the queue no longer runs never costs the step its result."""
    run = run_factory(store)()
    [(entry_id, job_id)] = _hand_off(store, run.id, "a")
    manager = queue.app.job_manager
    worker_id = await manager.register_worker()
    job = await manager.fetch_job(queues=None, worker_id=worker_id)
    assert job is not None
    await manager.finish_job(job=job, status=Status.FAILED, delete_job=False)  # ended meanwhile

    await journal.settle(entry_id, status=NodeStatus.COMPLETED, output=b"kept", job_id=job_id)

    assert store.dispatch.journal_entries([entry_id])[entry_id].status is NodeStatus.COMPLETED
    assert await queue.status(job_id) is Status.FAILED
    assert journal.finished == set()
    await manager.unregister_worker(worker_id)


class _Statements:
    """Every statement this process sends to PostgreSQL on an async connection (each is one
    round trip: `baton worker`'s connections autocommit, no BEGIN/COMMIT of their own), but
    the pools' connection checks (an empty query when a connection is first lent, or after
    `pg_pool.CHECK_AFTER_IDLE` unused: not one per step while jobs flow)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[str] = []
        execute = psycopg.AsyncCursor.execute

        async def counted(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            if str(query):
                self.sent.append(str(query))
            return await execute(cursor, query, *args, **kwargs)

        monkeypatch.setattr(psycopg.AsyncCursor, "execute", counted)

    def take(self) -> list[str]:
        sent, self.sent = self.sent, []
        return sent


async def test_a_node_job_costs_the_worker_two_statements_fetch_with_claim_and_result_with_finish(
    store: SqlStore, queue: JobQueue, journal: WorkerJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Procrastinate's own worker makes two per job (fetch, finish); a node job used to cost
    four (fetch, claim, result, finish). Its inputs travel in the job's arguments (no read
    before it runs: a step with artifacts to restore is the exception)."""
    run = run_factory(store)()
    first, (entry_id, job_id) = _hand_off(store, run.id, "a", "b")
    manager = queue.app.job_manager
    worker_id = await manager.register_worker()
    assert isinstance(queue.connector, WorkerConnector)
    # the first job warms the pools up (a connection is checked when first lent: start-up only)
    warm = await manager.fetch_job(queues=None, worker_id=worker_id)
    assert warm is not None and warm.id == first[1] and queue.connector.claimed(first[1]) is True
    await journal.settle(first[0], status=NodeStatus.COMPLETED, output=b"ok", job_id=first[1])
    await manager.finish_job(job=warm, status=Status.SUCCEEDED, delete_job=True)
    statements = _Statements(monkeypatch)

    job = await manager.fetch_job(queues=None, worker_id=worker_id)
    assert job is not None and job.id == job_id and queue.connector.claimed(job_id) is True
    fetched = statements.take()
    await journal.settle(entry_id, status=NodeStatus.COMPLETED, output=b"ok", job_id=job_id)
    await manager.finish_job(job=job, status=Status.SUCCEEDED, delete_job=True)
    settled = statements.take()

    [fetch] = fetched  # the fetch and the claim
    assert "procrastinate_fetch_job_v2" in fetch and "UPDATE journal" in fetch
    [result] = settled  # the result and the finish; Procrastinate's own finish is skipped
    assert "procrastinate_finish_job_v1" in result and "UPDATE journal" in result
    assert store.dispatch.journal_entries([entry_id])[entry_id].status is NodeStatus.COMPLETED
    assert await queue.status(job_id) is None
    await manager.unregister_worker(worker_id)


async def test_a_job_of_another_task_is_fetched_as_procrastinate_fetches_it_and_claims_nothing(
    store: SqlStore, queue: JobQueue, journal: WorkerJournal
) -> None:
    run = run_factory(store)()
    [(entry_id, node_job_id)] = _hand_off(store, run.id, "a")
    other = await queue.app.configure_task("other.task", queue="other").defer_async(entry_id=entry_id)
    manager = queue.app.job_manager
    worker_id = await manager.register_worker()

    job = await manager.fetch_job(queues=["other"], worker_id=worker_id)

    assert job is not None and job.id == other and job.task_name == "other.task"
    assert job.task_kwargs == {"entry_id": entry_id}
    assert isinstance(queue.connector, WorkerConnector) and queue.connector.claimed(other) is None
    # the node job's entry, whose id the other job's arguments happen to carry, is untouched
    assert store.dispatch.journal_entries([entry_id])[entry_id].status is NodeStatus.QUEUED
    assert await queue.status(node_job_id) is Status.TODO
    await manager.finish_job(job=job, status=Status.SUCCEEDED, delete_job=True)  # a real finish
    assert await queue.status(other) is None
    await manager.unregister_worker(worker_id)


def test_node_jobs_are_deferred_as_procrastinate_defers_them_in_the_order_asked(
    store: SqlStore, postgres_url: str
) -> None:
    """`defer_many_on` calls Procrastinate's defer function with one JSON array: each job row is
    the one Procrastinate's own `batch_defer_jobs` writes for the same task (queue, task,
    priority, lock, queueing lock, arguments: JSON with quotes, backslashes, newlines and
    non-ASCII, which its composite text once escaped), and the ids come back in order."""
    import procrastinate

    from core.engine.distributed.jobs import TASK_NAME, queueing_lock
    from core.store.database import pg_conninfo

    run = run_factory(store)()
    tricky = 'say "hi" \\ back\n\tthen ü, €, {"a": [1]}'
    rendered = RenderedNode("tool", tool="noop", kwargs={"text": tricky}, stdin=tricky.encode())
    jobs = [
        NodeJob(entry_id=entry_id, run_id=run.id, node_id=f"n{entry_id}", attempt=2, idempotency_key=tricky,
                timeout=30.0, rendered=rendered, output=OutputContract(), env={"K": tricky})
        for entry_id in (7, 3, 5)
    ]  # fmt: skip
    theirs = procrastinate.App(connector=procrastinate.SyncPsycopgConnector())
    columns = "queue_name, task_name, priority, lock, queueing_lock, args, scheduled_at, status"
    with psycopg.connect(pg_conninfo(postgres_url)) as conn:
        ids = defer_many_on(conn, jobs, "q1")
        mine = {i: conn.execute(f"SELECT {columns} FROM procrastinate_jobs WHERE id = %s", (i,)).fetchone()
                for i in ids}  # fmt: skip
        conn.rollback()
        pending = [
            theirs.configure_task(
                TASK_NAME, queue="q1", queueing_lock=queueing_lock(job.entry_id)
            ).make_new_job(job=job.to_args())
            for job in jobs
        ]
        reference = [int(j.id) for j in theirs.job_manager.batch_defer_jobs(pending, connection=conn) if j.id]
        expected = [conn.execute(f"SELECT {columns} FROM procrastinate_jobs WHERE id = %s", (i,)).fetchone()
                    for i in reference]  # fmt: skip
        conn.rollback()

    assert len(ids) == 3 and ids == sorted(ids)
    assert [mine[i] for i in ids] == expected
    assert [NodeJob.from_args(mine[i][5]["job"]) for i in ids] == jobs  # type: ignore[index]
    assert [mine[i][4] for i in ids] == ["baton-entry-7", "baton-entry-3", "baton-entry-5"]  # type: ignore[index]
