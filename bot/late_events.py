"""The bot's loop over commands recorded before their acknowledgement and never handled
(`core/commands/late_events.py`): at start and every `every` seconds, each open event of a
platform this process serves that is older than `stale` seconds is re-claimed (a compare-and-
swap: of several replicas exactly one wins, and a live handler's recent claim is left alone),
handled, and answered where it was typed with a word that it comes late.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from bot.periodic import Periodic
from core.commands.handler import Handler
from core.errors import BatonError
from core.store.port import Events

log = logging.getLogger("baton.late_events")


class LateEvents:
    """Started and stopped with the engine (`Baton.running`)."""

    def __init__(
        self, events: Events, handler: Handler, *, stale: float, every: float,
        clock: Callable[[], float] = time.time,
    ) -> None:  # fmt: skip
        self.events = events
        self.handler = handler
        self.stale = stale  # seconds a claim must be unfinished before it counts as its claimer's death
        self.every = every
        self._clock = clock
        self._periodic = Periodic("baton-late-events", self._tick_logged, pause=lambda: self.every,
                                  action="late_events_failed")
        self.handled = 0  # events this process handled late

    async def start(self) -> None:
        await self._periodic.start()

    async def stop(self) -> None:
        await self._periodic.stop()

    async def tick(self) -> int:
        """Handle every open event due now; how many this process handled."""
        served = self.handler.progress.platforms()
        if not served:
            return 0
        try:
            due = self.events.open_events(self._clock() - self.stale)
        except BatonError as exc:  # the database blinked: the next tick catches up
            log.warning("open events not read: %s", exc.message, extra={"action": "late_events_failed"})
            return 0
        count = 0
        for event in due:
            if event.platform not in served:
                continue
            if not self.events.claim_event(event.platform, event.event_id, stale_after=self.stale):
                continue  # a peer took it first, or its handler finished meanwhile
            log.info("handling a command after a restart", extra={
                "action": "late_event", "platform": event.platform, "event_id": event.event_id})  # fmt: skip
            for reply in await self.handler.handle_late(event):
                await self.handler.announce(reply)
            count += 1
        self.handled += count
        return count

    async def _tick_logged(self) -> None:
        try:
            await self.tick()
        except Exception:
            log.exception("late events failed", extra={"action": "late_events_failed"})
