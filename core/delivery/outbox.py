"""Delivering the outbox: state-carrying replies, at least once, by one replica at a time.

    deliverer = Deliverer(store.outbox, render, platforms, owner=engine.owner)
    await deliverer.deliver_run(run_id)   # at once, when this process saw the run come to rest
    await deliverer.deliver_due()         # any due row of our platforms (retries, dead peers' rows)
    deliverer.nudge()                     # rows may be due now: the bot's outbox loop looks at once

The rows are written by the engine in the unit of work that changes the run's state
(`core.engine.events.tell_rest`). A row is claimed with a short lease (a compare-and-swap in
the store: of several replicas exactly one gets it) that the sender renews while the send lasts
(its heartbeat, every third of `claim_seconds`); a holder that died stops renewing, its claim
lapses within `claim_seconds` and a peer takes it. A process restarted after a kill -9 does not
wait even that: at start it releases the claims of its replica's processes that are no longer
running (`release_dead`). A claimed row is rendered and sent by `render` (the conversation
layer: the final edit of the run's progress message and the final reply, through the platform's
outbox, which raises `NotDelivered` when the platform could not take it for now), then settled.
A failure defers the row with exponential backoff and jitter (tenacity's
`wait_exponential_jitter`); the HTTP retries themselves are the SDKs' (slack_sdk's retry
handlers, discord.py's rate-limit handling). A row that still fails after `max_attempts` is
given up and logged as an error, never dropped silently. Replies are sent with a key stable
across redeliveries (`Delivery.key`), so a redelivery after a crash edits what the first
attempt posted where the adapter kept its id. Whether a row's messages may already have reached
the platform is decided here (`maybe_delivered_since`: the row was claimed before); a platform
that cannot deduplicate on the key itself (Slack) looks for them then, and only then, before
posting again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING

from core.delivery.envelope import Once
from core.engine.leases import owner_dead
from core.errors import StoreError
from core.store.port import Deliveries
from core.store.records import Delivery

if TYPE_CHECKING:  # tenacity is imported on the first retry only (a start stays light)
    import tenacity

log = logging.getLogger("baton.outbox")

Render = Callable[[Delivery], Awaitable[None]]

#: Seconds a claim lasts unless its sender renews it: how long a row a dead replica claimed
#: waits before a peer takes it (a restarted process of the same replica takes it at once).
CLAIM_SECONDS = 10.0


def backoff(attempts: int, wait: tenacity.wait.wait_base | None = None) -> float:
    """Seconds to wait before the next attempt after `attempts` failed ones."""
    import tenacity

    strategy = wait or tenacity.wait_exponential_jitter(initial=1, max=300, jitter=1)
    state = tenacity.RetryCallState(retry_object=tenacity.Retrying(), fn=None, args=(), kwargs={})
    state.attempt_number = max(1, attempts)
    return float(strategy(state))


def maybe_delivered_since(row: Delivery) -> float | None:
    """Since when an earlier attempt at `row` may have reached the platform (the row's creation:
    nothing of it was sent before); None on its first claim, when nothing of it can have been.

    `attempts` counts the claims: a row claimed before was sent by a process that died or was
    stopped before settling it (its lease lapsed or was released), or whose send failed in a
    way that may still have reached the platform (a timeout, a dropped answer)."""
    return row.created_at if row.attempts > 1 else None


def once_of(row: Delivery, part: int | None = None, *, look: bool = True) -> Once:
    """How the message of `row` (its `part`-th: one per person told directly) lands once;
    `look=False`: never looked for before posting again (a notice that tells what happened)."""
    key = row.key if part is None else f"{row.key}:{part}"
    return Once(key, maybe_delivered_since(row) if look else None)


class Deliverer:
    def __init__(
        self,
        outbox: Deliveries,
        render: Render,
        platforms: Callable[[], Collection[str]],
        *,
        owner: str,
        lease_seconds: float = 60.0,
        claim_seconds: float = CLAIM_SECONDS,
        max_attempts: int = 25,
        wait: tenacity.wait.wait_base | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.outbox = outbox
        self.render = render
        self.platforms = platforms  # those this process can send to (registered now)
        self.owner = owner
        self.lease_seconds = lease_seconds  # the longest one send may take
        self.claim_seconds = claim_seconds
        self.max_attempts = max_attempts
        self.wait = wait
        self.clock = clock
        self.delivered = 0  # rows this process delivered
        self._inflight: set[asyncio.Task[bool]] = set()
        #: set when rows may be due at once (a platform connected): the outbox loop's wake
        self.nudged = asyncio.Event()

    def nudge(self) -> None:
        """Rows may be due now (a platform connected): the outbox loop looks at once."""
        self.nudged.set()

    async def deliver_due(self, limit: int = 20) -> int:
        """Claim the due rows of our platforms (one per run: a run's rows go in order) and send
        them concurrently; how many were delivered. Repeats while a pass delivered something."""
        total = 0
        while True:
            rows = self._claim(limit)
            if not rows:
                return total
            done = await asyncio.gather(*(self._tracked(row) for row in rows))
            total += sum(done)
            if not any(done):
                return total

    async def deliver_run(self, run_id: str) -> int:
        """Send `run_id`'s due rows now, oldest first (this process saw it come to rest)."""
        total = 0
        while rows := self._claim(50, run_id=run_id):
            for row in rows:
                if not await self._tracked(row):
                    return total
                total += 1
        return total

    def _claim(self, limit: int, run_id: str | None = None) -> list[Delivery]:
        platforms = list(self.platforms())
        if not platforms:
            return []
        try:
            return self.outbox.claim_deliveries(
                self.owner, platforms, lease_seconds=self._claim_lease, limit=limit, run_id=run_id
            )
        except Exception:  # the database blinked: the next pass claims them
            log.exception("outbox claim failed", extra={"action": "outbox_claim"})
            return []

    @property
    def _claim_lease(self) -> float:
        return min(self.claim_seconds, self.lease_seconds)

    def release_dead(self) -> int:
        """Release at once the claims of this replica's processes that are no longer running
        (this one, restarted after a kill -9, or a sibling that died): their rows go now, not
        after their lease. A live process of the replica keeps its claims. How many."""
        replica = self.owner.rsplit(":", 2)[0]
        released = 0
        for owner in self.outbox.delivery_claimants(f"{replica}:"):
            if owner != self.owner and owner.rsplit(":", 2)[0] == replica and owner_dead(owner):
                released += self.outbox.release_deliveries(owner)
        if released:
            log.info("took over %d outbox claims of a dead process", released,
                     extra={"action": "outbox_takeover", "released": released})
        return released

    async def _keep_claim(self, row: Delivery) -> None:
        """Renew the claim on `row` while it is being sent (cancelled when the send ends)."""
        lease = self._claim_lease
        while True:
            await asyncio.sleep(lease / 3)
            try:
                if not self.outbox.renew_delivery(row.id, self.owner, lease):
                    return  # a peer took it over: its settle tells
            except StoreError:
                log.warning("outbox claim not renewed", extra={"action": "outbox", "run_id": row.run_id})

    async def _tracked(self, row: Delivery) -> bool:
        task = asyncio.ensure_future(self._one(row))
        self._inflight.add(task)
        try:
            return await asyncio.shield(task)  # a cancelled caller leaves the send to finish
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if task.cancelled() and (me is None or not me.cancelling()):
                return False  # the send was stopped (`cancel`), not us: its claim is released
            raise
        finally:
            if task.done():
                self._inflight.discard(task)

    async def idle(self) -> None:
        """Until every send in flight has finished."""
        while self._inflight:
            await asyncio.gather(*list(self._inflight), return_exceptions=True)
            self._inflight = {t for t in self._inflight if not t.done()}

    async def _one(self, row: Delivery) -> bool:
        try:
            return await self._send(row)
        except StoreError:  # the database blinked settling it: the claim lapses, it goes again
            log.exception("outbox row not settled", extra={"action": "outbox", "run_id": row.run_id})
            return False

    async def _send(self, row: Delivery) -> bool:
        extra = {"action": "outbox", "run_id": row.run_id, "delivery": row.id, "attempt": row.attempts}
        try:
            try:
                keeper = asyncio.ensure_future(self._keep_claim(row))
                try:
                    async with asyncio.timeout(self.lease_seconds * 0.8):  # a send that hangs ends
                        await self.render(row)
                finally:
                    keeper.cancel()
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise  # we are being stopped: the claim lapses, a peer or the next process sends it
                raise RuntimeError("the send was cancelled (the chat client stopped)") from None
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            if row.attempts >= self.max_attempts:
                log.error("reply given up after %d attempts: %s", row.attempts, error, extra=extra)
                self.outbox.settle_delivery(row.id, self.owner)
                return False
            delay = backoff(row.attempts, self.wait)
            log.warning("reply not delivered (%s); retrying in %.1fs", error, delay, extra=extra)
            self.outbox.defer_delivery(row.id, self.owner, due_at=self.clock() + delay, error=error)
            return False
        if not self.outbox.settle_delivery(row.id, self.owner):
            log.info("reply delivered after its claim lapsed", extra=extra)
        self.delivered += 1
        return True

    async def cancel(self) -> None:
        """Stop the sends still in flight (shutdown, after the flush had its time): their rows
        stay undelivered, and `release` lets the next process or a peer take them at once."""
        for task in self._inflight:
            task.cancel()
        await asyncio.gather(*self._inflight, return_exceptions=True)
        self._inflight.clear()

    def release(self) -> int:
        """Give up this process's claims (shutdown): a peer takes them at once."""
        return self.outbox.release_deliveries(self.owner)
