"""The bot's own loop over schedules (`core/commands/scheduler.py`): a tick evaluates every
schedule, then the loop sleeps until the soonest due time (at most
`BATON_SCHEDULE_POLL_SECONDS`, so schedules another replica added are seen), or until a
schedule changes here (`schedule add`, `resume`). Fires are rows keyed (schedule, due time),
so every replica may run this loop: each fire starts one run. A restart loses nothing: the
first tick after it finds what fell due meanwhile and follows each schedule's `catchup`.
"""

from __future__ import annotations

import logging
import math

from bot.periodic import Periodic
from core.commands.scheduler import Fired, Scheduler

log = logging.getLogger("baton.schedules")


class ScheduleLoop:
    """Started and stopped with the engine (`Baton.running`)."""

    def __init__(self, scheduler: Scheduler, *, every: float) -> None:
        self.scheduler = scheduler
        self.every = every  # the longest sleep between two ticks
        self._periodic = Periodic("baton-schedules", self.tick, pause=self._pause, action="schedules_failed")
        scheduler.on_change = self._periodic.wake

    @property
    def ticks(self) -> int:
        """Ticks completed by this process."""
        return self._periodic.ticks

    async def start(self) -> None:
        await self._periodic.start()

    async def stop(self) -> None:
        await self._periodic.stop()

    async def tick(self) -> list[Fired]:
        try:
            return await self.scheduler.tick()
        except Exception:  # the database blinked: the next tick catches up
            log.exception("schedules not evaluated", extra={"action": "schedules_failed"})
            return []

    async def wait_for_ticks(self, count: int, timeout: float) -> None:
        """Until this process has completed `count` ticks; TimeoutError at the deadline."""
        await self._periodic.wait_until(lambda: self.ticks >= count, timeout)

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
