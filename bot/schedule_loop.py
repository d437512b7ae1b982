"""The bot's own loop over schedules (`core/commands/scheduler.py`): a tick evaluates every
schedule, then the loop sleeps until the soonest due time (at most
`BATON_SCHEDULE_POLL_SECONDS`, so schedules another replica added are seen), or until a
schedule changes here (`schedule add`, `resume`). Fires are rows keyed (schedule, due time),
so every replica may run this loop: each fire starts one run. A restart loses nothing: the
first tick after it finds what fell due meanwhile and follows each schedule's `catchup`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math

from core.commands.scheduler import Fired, Scheduler

log = logging.getLogger("baton.schedules")


class ScheduleLoop:
    """Started and stopped with the engine (`Baton.running`)."""

    def __init__(self, scheduler: Scheduler, *, every: float) -> None:
        self.scheduler = scheduler
        self.every = every  # the longest sleep between two ticks
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._ticked = asyncio.Condition()
        self.ticks = 0  # ticks completed by this process
        scheduler.on_change = self._wake.set

    async def start(self) -> None:
        self._stopping.clear()
        self._task = asyncio.create_task(self._loop(), name="baton-schedules")

    async def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def tick(self) -> list[Fired]:
        try:
            return await self.scheduler.tick()
        except Exception:  # the database blinked: the next tick catches up
            log.exception("schedules not evaluated", extra={"action": "schedules_failed"})
            return []

    async def wait_for_ticks(self, count: int, timeout: float) -> None:
        """Until this process has completed `count` ticks; TimeoutError at the deadline."""
        async with asyncio.timeout(timeout), self._ticked:
            await self._ticked.wait_for(lambda: self.ticks >= count)

    def _pause(self) -> float:
        """Seconds until the soonest due time, at most `every`."""
        try:
            soonest = self.scheduler.next_due()
        except Exception:
            log.exception("next due time not read", extra={"action": "schedules_failed"})
            return self.every
        if soonest is None or math.isinf(soonest):
            return self.every
        return min(self.every, max(0.0, soonest - self.scheduler.clock()))

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            await self.tick()
            self.ticks += 1
            async with self._ticked:
                self._ticked.notify_all()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._pause())
