"""The bot's own loop over gate deadlines (`core/commands/deadlines.py`): every
`BATON_DEADLINE_POLL_SECONDS` (5 s) it fires the reminders, escalations and timeouts that are
due. Deadlines are rows in the store, so a restart loses none (the first tick after it fires
what fell due while the bot was down), and each fires on exactly one replica (a compare-and-
swap per deadline), so every replica may run this loop. A tick runs on the event loop: its
store calls are short, and deciding a gate goes through the engine like a click would.
"""

from __future__ import annotations

import logging

from bot.periodic import Periodic
from core.commands.deadlines import Fired, GateDeadlines

log = logging.getLogger("baton.deadlines")


class DeadlineLoop:
    """Started and stopped with the engine (`Baton.running`)."""

    def __init__(self, deadlines: GateDeadlines, *, every: float) -> None:
        self.deadlines = deadlines
        self.every = every
        self._periodic = Periodic("baton-deadlines", self.tick, pause=lambda: self.every,
                                  action="deadlines_failed")

    async def start(self) -> None:
        await self._periodic.start()

    async def stop(self) -> None:
        await self._periodic.stop()

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
