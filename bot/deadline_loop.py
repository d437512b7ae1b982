"""The bot's own loop over gate deadlines (`core/commands/deadlines.py`): every
`BATON_DEADLINE_POLL_SECONDS` (5 s) it fires the reminders, escalations and timeouts that are
due. Deadlines are rows in the store, so a restart loses none (the first tick after it fires
what fell due while the bot was down), and each fires on exactly one replica (a compare-and-
swap per deadline), so every replica may run this loop. A tick runs on the event loop: its
store calls are short, and deciding a gate goes through the engine like a click would.

The same tick tells `queued_long` (`core/commands/queue_watch.py`): runs that have waited in
their concurrency queue past `BATON_QUEUED_LONG_AFTER` get their notices, once per run per
queue episode (the outbox's unique keys and a place kept in the store: restarts and replicas
tell none twice).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from core.commands.deadlines import Fired, GateDeadlines
from core.commands.queue_watch import QueueWatch

log = logging.getLogger("baton.deadlines")


class DeadlineLoop:
    """Started and stopped with the engine (`Baton.running`)."""

    def __init__(self, deadlines: GateDeadlines, *, every: float, queue: QueueWatch | None = None) -> None:
        self.deadlines = deadlines
        self.queue = queue  # `queued_long`, on the same pace
        self.every = every
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._stopping.clear()
        self._task = asyncio.create_task(self._loop(), name="baton-deadlines")

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def tick(self) -> list[Fired]:
        try:
            fired = await self.deadlines.tick()
        except Exception:  # the database blinked: the next tick catches up
            log.exception("gate deadlines not fired", extra={"action": "deadlines_failed"})
            return []
        for f in fired:
            log.info("gate deadline %s fired: %s", f.deadline.name, f.action,
                     extra={"action": "deadline_fired", "run_id": f.deadline.run_id,
                            "node_id": f.deadline.node_id})  # fmt: skip
        return fired

    def watch_queue(self) -> list[str]:
        """The runs queued too long told this time (none when the watch is off)."""
        if self.queue is None:
            return []
        try:
            return self.queue.tick()
        except Exception:  # the database blinked: the next tick catches up (its place is kept)
            log.exception("queued runs not watched", extra={"action": "queued_long_failed"})
            return []

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            await self.tick()
            self.watch_queue()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.every)
