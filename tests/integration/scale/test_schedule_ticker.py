"""With workers (BATON_EXECUTOR=procrastinate), the schedules tick as one Procrastinate
periodic task: two replicas (`build_baton`, as `baton run` assembles them) and a worker on one
PostgreSQL database; each second is ticked by one replica (`procrastinate_periodic_defers`),
each fire of `schedule add hello every 1s` starts one run, whose step a worker runs."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from pathlib import Path

import pytest

from bot.app import Baton, build_baton
from bot.runtime import assemble
from bot.schedule_ticker import ProcrastinateTicker
from bot.worker import build_worker
from core.commands.messages import ChatMessage
from core.engine.distributed import JobQueue
from core.store.records import RunStatus
from core.store.worker_journal import WorkerJournal
from tests.integration.bot.test_outbox import Platform
from tests.integration.scale.conftest import worker_settings

pytestmark = pytest.mark.postgres

HELLO = """
name: hello
nodes:
  - id: greet
    bash: echo hello
    replay: pure
"""


async def test_two_replicas_tick_each_second_once_and_start_one_run_per_fire(
    tmp_path: Path, postgres_url: str
) -> None:
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "hello.yaml").write_text(HELLO)
    batons: list[Baton] = []
    for name in ("r1", "r2"):
        settings = worker_settings(
            postgres_url,
            tmp_path / name,
            workflow_dirs=[tmp_path / "workflows"],
            replica_id=name,
            outbox_poll_seconds=0.2,
        )
        baton = build_baton(settings)
        baton.handler.register_outbox("console", Platform().confirm)
        batons.append(baton)
    runtime = assemble(worker_settings(postgres_url, tmp_path / "worker"))
    queue, journal = JobQueue(postgres_url, pool_size=6), WorkerJournal(postgres_url, size=3)
    worker = build_worker(runtime, queue, journal, concurrency=3, name="w1")
    await queue.open()
    await journal.open()
    working = asyncio.create_task(worker.run())
    one, two = batons
    try:
        async with one.running(handle_signals=False, grace=2), two.running(handle_signals=False, grace=2):
            assert isinstance(one.schedules, ProcrastinateTicker) and isinstance(
                two.schedules, ProcrastinateTicker
            )
            (added,) = await one.handler.handle(
                ChatMessage(
                    platform="console",
                    conversation="ops",
                    user="ana",
                    text="schedule add hello every 1s",
                    event_id="e1",
                    direct=True,
                )
            )
            sid = str(added.data["id"])
            ticker_one, ticker_two = one.schedules, two.schedules
            async with asyncio.timeout(60):
                while len(ticker_one.stamps) + len(ticker_two.stamps) < 8:
                    await asyncio.wait(
                        [
                            asyncio.ensure_future(ticker_one.wait_for_ticks(ticker_one.ticks + 1, 60)),
                            asyncio.ensure_future(ticker_two.wait_for_ticks(ticker_two.ticks + 1, 60)),
                        ],
                        return_when=asyncio.FIRST_COMPLETED,
                    )
            await one.handler.handle(
                ChatMessage(
                    platform="console",
                    conversation="ops",
                    user="ana",
                    text=f"schedule pause {sid}",
                    event_id="e2",
                    direct=True,
                )
            )
            stamps = Counter([*ticker_one.stamps, *ticker_two.stamps])
            assert max(stamps.values()) == 1  # each second ticked by one replica
            runs = [r for r in one.store.runs.recent_runs(limit=100) if r.started_by == f"schedule:{sid}"]
            assert len(runs) >= 4
            assert max(Counter(r.scheduled_for for r in runs).values()) == 1  # one run per fire
            for run in runs:
                owner = one if run.lease_owner is None or run.lease_owner == one.engine.owner else two
                with contextlib.suppress(Exception):
                    await owner.engine.wait(run.id, timeout=30)
            done = [one.store.runs.get_run(r.id).status for r in runs]
            assert done.count(RunStatus.COMPLETED) >= 3  # a worker ran their steps
    finally:
        worker.stop()
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(working, 15)
        await journal.close()
        await queue.close()
        runtime.store.close()
        for baton in batons:
            baton.close()
