"""The outbox loop: delivers the durable outbox's due rows every `every` seconds, and at once
when a platform connects (the deliverer's nudge): retries after their backoff, rows of a process
that died (their claims lapse), rows written while no platform was connected. Started and
stopped with the engine (`bot/app.py`), flushed on shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from bot.periodic import Periodic
from core.delivery.outbox import Deliverer
from core.errors import StoreError

log = logging.getLogger("baton.outbox")


class OutboxLoop:
    def __init__(self, deliverer: Deliverer, *, every: float = 2.0) -> None:
        self.deliverer = deliverer
        self.every = every
        self._periodic = Periodic("baton-outbox", deliverer.deliver_due, pause=lambda: self.every,
                                  action="outbox", wake=deliverer.nudged)  # fmt: skip

    @property
    def passes(self) -> int:
        """Passes over the due rows completed by this process."""
        return self._periodic.ticks

    def wake(self) -> None:
        self._periodic.wake()

    async def start(self) -> None:
        try:
            self.deliverer.release_dead()
        except StoreError:  # the database blinked: their claims lapse instead
            log.exception("outbox claims of dead processes not released", extra={"action": "outbox"})
        await self._periodic.start()

    async def stop(self, wait: float = 1.0) -> None:
        """Stop after the pass in progress (cancelled after `wait` seconds: a send that hangs),
        and stop the sends still in flight: their rows stay in the outbox for the next process
        or a peer."""
        await self._periodic.stop(wait=wait)
        await self.deliverer.cancel()

    async def flush(self, timeout: float) -> int:
        """Deliver every due row now, for at most `timeout` seconds (shutdown); how many."""
        delivered = 0
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, timeout)):
                await self.deliverer.idle()
                delivered = await self.deliverer.deliver_due()
        return delivered
