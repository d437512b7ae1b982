"""A replica engine whose steps run on a Procrastinate worker, both in this process.

`cluster` gives the pieces of BATON_EXECUTOR=procrastinate on a fresh PostgreSQL database:
the engine hands steps to the queue, the worker (a real `procrastinate.worker.Worker`
running `bot.worker`'s task) executes them and writes the journal.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot import testing
from bot.runtime import assemble
from bot.worker import build_worker
from core.config import Settings
from core.engine.distributed import (
    DispatchConfig,
    JobQueue,
    RemoteDispatcher,
)
from core.engine.tools import ToolRegistry
from core.store.repository import SqlStore
from core.store.settled_reads import SettledReads
from core.store.worker_journal import WorkerJournal
from tests.integration.engine.harness import Harness


def worker_settings(url: str, data_dir: Path, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "database_url": url,
        "executor": "procrastinate",
        "data_dir": data_dir,
        "tool_modules": [],
        "worker_heartbeat_seconds": 0.3,
        "shutdown_grace": 5.0,
        # these tests watch steps from outside (fifos, files under tmp_path, $PPID): unsandboxed,
        # unless a test asks for the sandbox (test_distributed.py's sandbox test does)
        "step_sandbox": "none",
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@dataclass
class Cluster:
    harness: Harness
    dispatcher: RemoteDispatcher
    url: str


@pytest.fixture
async def store(migrated_queue_postgres_url: str) -> AsyncIterator[SqlStore]:
    """A migrated store on a fresh PostgreSQL database that also has the job queue's schema
    (the test's `postgres_url`: one database per test)."""
    s = SqlStore(migrated_queue_postgres_url)
    yield s
    s.close()


@pytest.fixture
async def cluster(
    tmp_path: Path, migrated_queue_postgres_url: str, request: pytest.FixtureRequest
) -> AsyncIterator[Cluster]:
    """`request.param` (indirect parametrization), when given: the worker's settings overrides."""
    postgres_url = migrated_queue_postgres_url  # with the job queue's schema
    store = SqlStore(postgres_url)
    (tmp_path / "workflows").mkdir()
    dispatcher = RemoteDispatcher(
        store.dispatch, JobQueue(postgres_url), DispatchConfig(liveness_seconds=0.3, stalled_after=1.0),
        reads=SettledReads(postgres_url),  # as `bot/app.py` builds it
    )
    baton = testing.build(tmp_path, store=store, dispatcher=dispatcher,
                          replica_id="replica", lease_seconds=5, data_dir=tmp_path / "replica")  # fmt: skip
    engine, catalog = baton.engine, baton.catalog
    harness = Harness(root=tmp_path, store=store, tools=ToolRegistry(), catalog=catalog, engine=engine)
    engine.subscribe(lambda event: _append(harness, event))

    settings = worker_settings(postgres_url, tmp_path / "worker", **getattr(request, "param", {}))
    queue = JobQueue(postgres_url, pool_size=6, worker=True)  # as `baton worker` opens it
    runtime = assemble(settings)  # the worker's own runtime, as `baton worker` assembles it
    journal = WorkerJournal(postgres_url, size=3)
    worker = build_worker(runtime, queue, journal, concurrency=3, name="test-worker")
    await queue.open()
    await journal.open()
    await dispatcher.open()
    await engine.start()
    working = asyncio.create_task(worker.run())
    try:
        yield Cluster(harness=harness, dispatcher=dispatcher, url=postgres_url)
    finally:
        await engine.stop(grace=5)
        worker.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(working, 15)
        await dispatcher.close()
        await journal.close()
        await queue.close()
        runtime.store.close()
        store.close()


async def _append(harness: Harness, event: object) -> None:
    harness.events.append(event)  # type: ignore[arg-type]
