"""The bot's own loop over gate deadlines (`core/commands/deadlines.py`): every
`BATON_DEADLINE_POLL_SECONDS` (5 s) it fires the reminders, escalations and timeouts that are
due. Deadlines are rows in the store, so a restart loses none (the first tick after it fires
what fell due while the bot was down), and each fires on exactly one replica (a compare-and-
swap per deadline), so every replica may run this loop. A tick runs on the event loop: its
store calls are short, and deciding a gate goes through the engine like a click would.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from core.commands.deadlines import Fired, GateDeadlines

log = logging.getLogger("baton.deadlines")


class DeadlineLoop:
    """Started and stopped with the engine (`Baton.running`)."""

    def __init__(self, deadlines: GateDeadlines, *, every: float) -> None:
        self.deadlines = deadlines
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

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            await self.tick()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.every)
