"""Distributed node execution through Procrastinate (`BATON_EXECUTOR=procrastinate`).

    replica (`baton run`)                              worker (`baton worker`, any machine)
    RemoteRunExecutor ─ hand_off ─┐                    NodeWorker
      BEGIN                       │                      journal_claim  queued -> started (CAS)
        INSERT journal 'queued'   │   procrastinate      execute_node   the same leaf code
        defer job (same conn)     ├──── job ─────────►   journal_finish completed | failed
      COMMIT                      │
    settle: read the journal ◄────┴──── journal (the source of truth)

    jobs.py             NodeJob: the step, rendered, as JSON job arguments (pure)
    queue.py            Procrastinate apps, schema, job status / stalled-worker lookups
    dispatcher.py       replica side: the transactional hand-off; waiting for a result
    remote_executor.py  RunExecutor whose steps go to workers; adopts open entries on recovery
    node_worker.py      worker side: claim, run, settle one job

The in-process executor stays the default; `executor_factory` plugs this one into `Engine`.
"""

from __future__ import annotations

from collections.abc import Callable

from core.engine.distributed.dispatcher import DispatchConfig, RemoteDispatcher, Settled
from core.engine.distributed.jobs import DEFAULT_QUEUE, TASK_NAME, NodeJob
from core.engine.distributed.node_worker import NodeWorker
from core.engine.distributed.queue import JobQueue, apply_queue_schema
from core.engine.distributed.remote_executor import RemoteRunExecutor
from core.engine.executor import RunExecutor, Setup

__all__ = [
    "DEFAULT_QUEUE",
    "TASK_NAME",
    "DispatchConfig",
    "JobQueue",
    "NodeJob",
    "NodeWorker",
    "RemoteDispatcher",
    "RemoteRunExecutor",
    "Settled",
    "apply_queue_schema",
    "remote_executor_factory",
    "stalled_after",
]


def stalled_after(heartbeat_seconds: float) -> float:
    """How long a worker may stay silent before replicas take it for dead (3 heartbeats)."""
    return 3 * heartbeat_seconds


def remote_executor_factory(dispatcher: RemoteDispatcher) -> Callable[[Setup], RunExecutor]:
    """An `Engine(executor_factory=…)` whose steps run on workers through `dispatcher`."""

    def build(setup: Setup) -> RunExecutor:
        return RemoteRunExecutor(setup, dispatcher)

    return build
