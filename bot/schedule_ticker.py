"""With workers (BATON_EXECUTOR=procrastinate): the schedules' tick is a Procrastinate
periodic task, as Procrastinate's docs recommend for schedules added at run time.

    every replica (`baton run`)
      a Procrastinate worker of one slot on the queue `<BATON_QUEUE>-schedules`, whose
      periodic deferrer defers `baton.schedule_tick` every second
    procrastinate_periodic_defers   one row per (task, periodic id, second): of the replicas
                                    deferring the same second, one job exists
    whichever replica fetches the job runs `Scheduler.tick()` on its own engine: it reads
    Baton's schedules table, starts each due fire's run (the fire's row, keyed (schedule,
    due time), makes that once anyway) and announces it on its chat platforms

The tick job runs on the replicas, not on `baton worker`s: a run's replica drives its DAG and
tells its chat; workers only run steps. Procrastinate is imported only in this mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from core.commands.scheduler import Scheduler
from core.store.database import pg_conninfo

log = logging.getLogger("baton.schedules")

TICK_TASK = "baton.schedule_tick"
PERIODIC_ID = "baton-schedules"


class ProcrastinateTicker:
    """Started and stopped with the engine (`Baton.running`), like `ScheduleLoop`."""

    def __init__(self, scheduler: Scheduler, *, database_url: str, queue: str) -> None:
        import procrastinate
        from procrastinate.worker import Worker

        from core.engine.distributed.queue import queue_connector

        self.scheduler = scheduler
        self.queue = f"{queue}-schedules"
        self.ticks = 0  # tick jobs this replica ran
        self.stamps: list[int] = []  # the periodic timestamps of those jobs (one second each)
        self._ticked = asyncio.Condition()
        self.app = procrastinate.App(connector=queue_connector(pg_conninfo(database_url), 2))

        @self.app.periodic(cron="* * * * * *", periodic_id=PERIODIC_ID)
        @self.app.task(name=TICK_TASK, queue=self.queue)
        async def schedule_tick(timestamp: int) -> int:
            try:
                fired = await scheduler.tick()
            finally:
                self.ticks += 1
                self.stamps.append(timestamp)
                async with self._ticked:
                    self._ticked.notify_all()
            return len(fired)

        self.worker = Worker(
            app=self.app,
            queues=[self.queue],
            name=f"schedules:{scheduler.replica}",
            concurrency=1,
            wait=True,
            listen_notify=True,
            fetch_job_polling_interval=1.0,
            install_signal_handlers=False,
            delete_jobs="always",
            shutdown_graceful_timeout=5.0,
        )
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.app.open_async()
        self._task = asyncio.create_task(self.worker.run(), name="baton-schedule-ticker")

    async def stop(self) -> None:
        if self._task is not None:
            self.worker.stop()
            with contextlib.suppress(Exception):
                await self._task
            self._task = None
        await self.app.close_async()

    async def wait_for_ticks(self, count: int, timeout: float) -> None:
        """Until this replica has run `count` tick jobs; TimeoutError at the deadline."""
        async with asyncio.timeout(timeout), self._ticked:
            await self._ticked.wait_for(lambda: self.ticks >= count)
