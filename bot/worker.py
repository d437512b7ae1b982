"""`baton worker`: execute workflow steps that `baton run` replicas hand to the job queue.

Any machine that reaches the PostgreSQL database can run workers (BATON_EXECUTOR=procrastinate
on the replicas and the workers). A worker claims a step's journal entry, runs it with the
same leaf code the in-process executor uses and writes the result to the journal; the run's
replica reads it from there (`core/engine/distributed/`).

The worker runs on the same assembled runtime as `baton run` (`bot/runtime.py`: redactor,
step environment, providers, tools) and stops through the same shutdown path
(`bot/shutdown.py`): the first SIGTERM/SIGINT stops fetching jobs; steps in flight get
`BATON_SHUTDOWN_GRACE` seconds, then are stopped (their process group killed) and stay
`started`, for the replica's replay rules. A second signal exits at once.

A worker serves `/healthz` and `/readyz` (and nothing else) on BATON_WEB_PORT when that is set
for it, with the same server code as `baton run` (bot/http.py). Unset (its default, 8080, is
`baton run`'s), `off` or `0`: nothing; a port already taken is logged and the worker goes on
without them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from procrastinate import types as pq_types
from procrastinate.job_context import JobContext, JobResult
from procrastinate.worker import Worker

from bot.health import PATHS, Health, HealthRoutes
from bot.housekeeping import pruner_from_settings
from bot.http import listen
from bot.periodic import Periodic
from bot.runtime import Runtime, assemble, require_sandbox, step_sandbox
from bot.shutdown import Shutdown
from bot.startup import started
from core.config import Settings
from core.engine.distributed import (
    TASK_NAME,
    JobQueue,
    NodeJob,
    NodeWorker,
    WorkerConnector,
    apply_queue_schema,
    stalled_after,
)
from core.errors import ConfigurationError
from core.store.worker_journal import WorkerJournal

log = logging.getLogger("baton.worker")


def require_procrastinate(settings: Settings) -> None:
    if settings.executor != "procrastinate":
        raise ConfigurationError(
            f"BATON_EXECUTOR is `{settings.executor}`: steps run inside `baton run`, "
            "so there is nothing for a worker to do",
            hint="Set BATON_EXECUTOR=procrastinate (and a PostgreSQL BATON_DATABASE_URL) "
            "on the replicas and the workers.",
        )


def worker_name(settings: Settings, name: str | None) -> str:
    return name or f"{settings.replica_id or socket.gethostname()}:{os.getpid()}"


#: Procrastinate's log actions of a job that went as planned (INFO and DEBUG lines)
_ROUTINE_ACTIONS = frozenset({"loaded_job_info", "start_job", "finish_task", "job_success"})


class NodeJobWorker(Worker):
    """Procrastinate's worker, minus the job's log context (its whole arguments, copied
    through `attrs.asdict`) built for lines its logger drops: Procrastinate builds it four
    times a job whatever the level, and `bot/logging.py` sets `procrastinate` to WARNING.
    Lines that are logged (an error, a retry, an abort, or INFO turned on) keep it."""

    def _log_extra(
        self, action: str, context: JobContext | None, job_result: JobResult | None, **kwargs: Any
    ) -> pq_types.JSONDict:
        if context is None or action not in _ROUTINE_ACTIONS or self.logger.isEnabledFor(logging.INFO):
            return super()._log_extra(action, context, job_result, **kwargs)
        return super()._log_extra(action, None, job_result, job_id=context.job.id, **kwargs)


def build_worker(
    runtime: Runtime, queue: JobQueue, journal: WorkerJournal, *, concurrency: int, name: str
) -> Worker:
    """A Procrastinate worker whose one task runs a `NodeJob` through `NodeWorker`."""
    settings = runtime.settings
    node_worker = NodeWorker(
        store=runtime.store.blobs,
        journal=journal,
        providers=runtime.providers,
        tools=runtime.tools,
        data_dir=settings.data_dir,
        environment=runtime.environment,
        name=name,
        max_output=settings.max_output_bytes,
        max_output_file=settings.max_output_file_bytes,
        max_artifacts=settings.max_artifact_bytes,
    )

    # `baton worker`'s queue (`JobQueue(worker=True)`): the fetch claims, the result finishes
    connector = queue.connector if isinstance(queue.connector, WorkerConnector) else None
    if connector is not None:  # the result statement finishes the job: Procrastinate's own finish is skipped
        connector.finished = journal.finished

    @queue.app.task(name=TASK_NAME, queue=settings.queue_name, pass_context=True)
    async def execute_node_job(context: JobContext, job: dict[str, Any]) -> str:
        job_id = context.job.id if connector is not None else None
        claimed = connector.claimed(job_id) if connector is not None and job_id is not None else None
        status = await node_worker.run(NodeJob.from_args(job), job_id=job_id, claimed=claimed)
        return status.value if status is not None else "skipped"

    return NodeJobWorker(
        app=queue.app,
        queues=[settings.queue_name],
        name=name,
        concurrency=concurrency,
        wait=True,
        listen_notify=True,
        fetch_job_polling_interval=1.0,
        shutdown_graceful_timeout=settings.shutdown_grace,
        install_signal_handlers=False,
        update_heartbeat_interval=settings.worker_heartbeat_seconds,
        stalled_worker_timeout=stalled_after(settings.worker_heartbeat_seconds),
        # the task always returns, so its job is deleted (as the result statement deletes it)
        delete_jobs="successful",
    )


async def keep_heartbeat(queue: JobQueue, worker: Worker, seconds: float) -> None:
    """Procrastinate stops a worker's heartbeat as soon as it is asked to stop; replicas
    would then take the steps it is finishing (within the grace period) for lost. This one
    beats until the worker has unregistered."""
    while True:
        await asyncio.sleep(seconds)
        if worker.worker_id is not None:
            try:
                await queue.app.job_manager.update_heartbeat(worker.worker_id)
            except Exception:  # the database blinked: the next beat may get through
                log.warning("heartbeat failed", extra={"action": "worker_heartbeat"})


@contextlib.asynccontextmanager
async def serve_health(health: Health, settings: Settings, *, stopping: asyncio.Event) -> AsyncIterator[None]:
    """`/healthz` and `/readyz` on BATON_WEB_PORT while inside (when it is set, on and free)."""
    sock = listen(settings) if "web_port" in settings.model_fields_set else None
    if sock is None:
        yield
        return
    from bot.http import serving

    async with serving([HealthRoutes(health)], sock, stopping=stopping, always=PATHS,
                       max_body=settings.http_max_body_bytes):
        yield


def directory_sweeper(runtime: Runtime, settings: Settings) -> Periodic | None:
    """With run retention set: every housekeeping period, the worker's run directories whose run
    was pruned (by `baton run`'s housekeeping or `baton prune`, which cannot reach this disk)
    are deleted (`Pruner.sweep_directories`)."""
    pruner = pruner_from_settings(runtime.store.retention, settings)
    if pruner is None or pruner.run_retention is None:
        return None

    async def sweep() -> None:
        swept = await asyncio.to_thread(pruner.sweep_directories)
        if swept:
            log.info("deleted %d directories of pruned runs", swept,
                     extra={"action": "worker_directories_swept", "directories": swept})

    return Periodic("baton-run-directories", sweep, pause=settings.housekeeping_minutes * 60,
                    action="worker_directories_failed")


async def serve_worker(
    settings: Settings,
    *,
    concurrency: int | None = None,
    name: str | None = None,
    on_ready: Callable[[], None] | None = None,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Run until SIGTERM/SIGINT (see the module docstring)."""
    require_procrastinate(settings)
    sandbox = step_sandbox(settings, environ)
    require_sandbox(sandbox, settings, "`baton worker`")
    runtime = assemble(settings, environ=environ, sandbox=sandbox)  # its store is migrated
    queue: JobQueue | None = None
    journal: WorkerJournal | None = None
    try:
        apply_queue_schema(settings.database_url)
        slots = concurrency or settings.worker_concurrency
        queue = JobQueue(settings.database_url, pool_size=slots + 3, worker=True)
        journal = WorkerJournal(settings.database_url, size=slots)
        label = worker_name(settings, name)
        worker = build_worker(runtime, queue, journal, concurrency=slots, name=label)
        await queue.open()
        await journal.open()
        shutdown = Shutdown(grace=settings.shutdown_grace, what="steps", on_first=worker.stop)
        health = Health(ping=runtime.store.ping, stopping=shutdown.stopping)
        with shutdown.signals():
            async with serve_health(health, settings, stopping=shutdown.stopping):
                health.started = True
                started(collect=True)  # what lives from here on is frozen out of later collections
                log.info(
                    "worker ready",
                    extra={"action": "worker_started", "worker": label, "queue": settings.queue_name},
                )
                if on_ready is not None:
                    on_ready()
                beat = settings.worker_heartbeat_seconds
                beating = asyncio.create_task(keep_heartbeat(queue, worker, beat))
                tidying = directory_sweeper(runtime, settings)
                if tidying is not None:
                    await tidying.start()
                try:
                    await worker.run()
                finally:
                    beating.cancel()
                    await asyncio.gather(beating, return_exceptions=True)
                    if tidying is not None:
                        await tidying.stop()
        log.info("worker stopped", extra={"action": "worker_stopped", "worker": label})
    finally:
        if journal is not None:
            await journal.close()
        if queue is not None:
            await queue.close()
        runtime.store.close()
