"""`Periodic`: the one background loop every periodic service of the bot runs on (gate
deadlines, housekeeping and retention, schedules, late events, the outbox).

A tick at once (a process that was down catches up), then one after each pause until `stop`;
`wake()` ends the pause early. `stop` lets the tick in progress finish. A tick that raises is
logged and the next one catches up: a database that blinks never ends the loop. Each completed
tick is counted and announced, so a test (or a caller) can wait for one without sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("baton.periodic")


class Periodic:
    """`tick` now and after every `pause()` seconds (a number: always that long), in one task
    named `name`, from `start` until `stop`."""

    def __init__(
        self, name: str, tick: Callable[[], Awaitable[Any]], *, pause: float | Callable[[], float],
        action: str = "periodic_failed", wake: asyncio.Event | None = None,
    ) -> None:  # fmt: skip
        """`wake`: an event others set to bring the next tick forward (as `wake()` does)."""
        self.name = name
        self._tick = tick
        self._pause = pause if callable(pause) else (lambda: pause)
        self._action = action  # the log's `action` when a tick raises
        self._stopping = asyncio.Event()
        self._wake = wake if wake is not None else asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._ticked = asyncio.Condition()
        self.ticks = 0  # ticks completed by this process

    async def start(self) -> None:
        self._stopping.clear()
        self._task = asyncio.create_task(self._loop(), name=self.name)

    async def stop(self, wait: float | None = None) -> None:
        """Stop after the tick in progress, if any; `wait`: cancel it after that many seconds."""
        self._stopping.set()
        self._wake.set()
        if self._task is not None:
            done, _ = await asyncio.wait({self._task}, timeout=wait)
            if not done:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def wake(self) -> None:
        """Tick now rather than at the end of the pause."""
        self._wake.set()

    async def wait_until(self, done: Callable[[], bool], timeout: float) -> None:
        """Until `done()` holds, asked now and after each tick; TimeoutError at the deadline."""
        async with asyncio.timeout(timeout), self._ticked:
            await self._ticked.wait_for(done)

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            try:
                await self._tick()
            except Exception:  # the database blinked: the next tick catches up
                log.exception("%s: tick failed", self.name, extra={"action": self._action})
            self.ticks += 1
            async with self._ticked:
                self._ticked.notify_all()
            if self._stopping.is_set():
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._pause())
