"""Distributed node execution through Procrastinate (`BATON_EXECUTOR=procrastinate`).

    replica (`baton run`)                              worker (`baton worker`, any machine)
    QueueStepRunner ─── hand_off ─┐                    NodeWorker (WorkerJournal: async, its loop)
      BEGIN                       │                      claim          queued -> started (CAS)
        INSERT journal 'queued'   │   procrastinate      execute_node   the same leaf code
        defer job (same conn)     ├──── job ─────────►   settle         completed | failed
      COMMIT                      │
    settle: read the journal ◄────┴──── journal (the source of truth)

    jobs.py             NodeJob: the step, rendered, as JSON job arguments (pure)
    queue.py            Procrastinate apps, schema, job status / stalled-worker lookups
    dispatcher.py       replica side: the transactional hand-off; waiting for a result
    queue_runner.py     QueueStepRunner: the StepRunner whose steps go to workers; adopts open entries
    node_worker.py      worker side: claim, run, settle one job

The in-process `LocalStepRunner` stays the default; `Engine(runners=queue_runner_factory(d))`
plugs this one into the same scheduler (`RunExecutor`).
"""

from __future__ import annotations

from core.engine.distributed.dispatcher import DispatchConfig, RemoteDispatcher, Settled
from core.engine.distributed.jobs import DEFAULT_QUEUE, TASK_NAME, NodeJob
from core.engine.distributed.node_worker import NodeWorker
from core.engine.distributed.queue import JobQueue, WorkerConnector, apply_queue_schema
from core.engine.distributed.queue_runner import QueueStepRunner, queue_runner_factory

__all__ = [
    "DEFAULT_QUEUE",
    "TASK_NAME",
    "DispatchConfig",
    "JobQueue",
    "NodeJob",
    "NodeWorker",
    "QueueStepRunner",
    "RemoteDispatcher",
    "Settled",
    "WorkerConnector",
    "apply_queue_schema",
    "queue_runner_factory",
    "stalled_after",
]


def stalled_after(heartbeat_seconds: float) -> float:
    """How long a worker may stay silent before replicas take it for dead (3 heartbeats)."""
    return 3 * heartbeat_seconds

