"""The replica side of distributed execution: hand a step to the queue, wait for its result.

    entry_id, job_id = dispatcher.hand_off(...)      # one transaction: `queued` entry + job
    settled = await dispatcher.settle(entry_id, job_id)

`settle` returns when the journal entry is settled (a worker wrote `completed`/`failed`)
or when nobody will settle it any more (`Settled.lost`):

- the entry is still `queued` and its job ended, vanished or sits with a dead worker: the
  step never started; the entry is withdrawn (`queued -> failed`, a CAS that loses to a
  worker claiming it) and the caller dispatches the step again;
- the entry is `started` and its job ended or its worker stopped sending heartbeats: the
  step may have run; the caller applies the replay rules (pure/idempotent re-run, unsafe
  stops the run in `needs_attention`).

The journal is the source of truth; job states are only consulted to tell "still coming"
from "never coming".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from procrastinate.jobs import Status

from core.engine.distributed.jobs import DEFAULT_QUEUE, NodeJob
from core.engine.distributed.queue import ENDED, JobQueue, defer_on, deferrer
from core.errors import StoreError
from core.store.port import Dispatch
from core.store.records import JournalEntry, NodeStatus

log = logging.getLogger(__name__)

NEVER_STARTED = "withdrawn before any worker started it; dispatched again"
_OPEN = (NodeStatus.QUEUED, NodeStatus.STARTED)



@dataclass(frozen=True, slots=True)
class DispatchConfig:
    queue: str = DEFAULT_QUEUE
    poll_min: float = 0.005  # first wait between journal reads; doubled up to poll_max
    poll_max: float = 0.25
    liveness_seconds: float = 1.0  # how often the job behind a waiting entry is checked
    stalled_after: float = 5.0  # a worker silent this long (heartbeats) is taken for dead


@dataclass(frozen=True, slots=True)
class Settled:
    entry: JournalEntry
    lost: bool = False  # nobody settled it: withdrawn (`failed`, never ran) or still `started`

    @property
    def never_started(self) -> bool:
        return self.lost and self.entry.status is NodeStatus.FAILED


#: Called inside the hand-off transaction, after the entry is written and before the job
#: is deferred (entry id). An observation point: a test kills the process here.
HandOffHook = Callable[[int], None]


class RemoteDispatcher:
    def __init__(
        self,
        store: Dispatch,
        queue: JobQueue,
        config: DispatchConfig = DispatchConfig(),
        *,
        between_writes: HandOffHook | None = None,
    ) -> None:
        self.store = store
        self.queue = queue
        self.config = config
        self._deferrer = deferrer()
        self.between_writes = between_writes
        self._waiting: dict[int, list[asyncio.Future[JournalEntry]]] = {}  # entry id -> settle() calls
        self._watcher: asyncio.Future[None] | None = None
        self._poked = False  # a step started waiting since the last read: read again soon

    async def open(self) -> None:
        await self.queue.open()

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        await self.queue.close()

    def hand_off(
        self,
        *,
        run_id: str,
        node_id: str,
        cache_key: str,
        components: dict[str, Any],
        attempt: int,
        idempotency_key: str | None,
        job_for: Callable[[int], NodeJob],
    ) -> tuple[int, int]:
        """Write the `queued` entry and defer its job atomically: (entry id, job id)."""

        def defer(connection: Any, entry_id: int) -> int:
            if self.between_writes is not None:
                self.between_writes(entry_id)
            return defer_on(self._deferrer, connection, job_for(entry_id), self.config.queue)

        return self.store.journal_queue(
            run_id=run_id,
            node_id=node_id,
            cache_key=cache_key,
            components=components,
            attempt=attempt,
            idempotency_key=idempotency_key,
            defer=defer,
        )

    async def withdraw(self, entry_id: int, job_id: int | None, reason: str) -> None:
        """The run was cancelled: a `queued` step is withdrawn (it never runs); the job of a
        `started` one is asked to stop (its entry stays `started`, like any interrupted step)."""
        if self.store.journal_unqueue(entry_id, reason):
            return
        jobs = [job_id] if job_id is not None else [jid for jid, _ in await self.queue.find(entry_id)]
        for jid in jobs:
            try:
                await self.queue.abort(jid)
            except StoreError:
                log.warning("could not stop a job", extra={"action": "abort_job", "job_id": jid})

    def _read(self, entry_id: int) -> JournalEntry:
        entry = self.store.journal_entries([entry_id]).get(entry_id)
        if entry is None:
            raise StoreError(f"Journal entry {entry_id} disappeared.", hint="This is a bug in Baton.")
        return entry

    async def settle(self, entry_id: int, job_id: int | None = None) -> Settled:
        """Wait until the entry is settled, or until nobody will settle it (see module doc)."""
        entry = self._read(entry_id)
        if entry.status not in _OPEN:
            return Settled(entry)
        loop = asyncio.get_running_loop()
        while True:
            waiter: asyncio.Future[JournalEntry] = loop.create_future()
            self._waiting.setdefault(entry_id, []).append(waiter)
            self._wake_watcher()
            try:
                settled = await asyncio.wait_for(asyncio.shield(waiter), self.config.liveness_seconds)
            except TimeoutError:
                settled = None
            finally:
                self._forget(entry_id, waiter)
            if settled is not None:
                return Settled(settled)
            if await self._job_lost(entry_id, job_id):
                given_up = self._give_up(entry_id)
                if given_up is not None:
                    return given_up

    # -- one journal read for every step waiting on this replica ---------------------------

    def _wake_watcher(self) -> None:
        self._poked = True
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.ensure_future(self._watch())

    def _forget(self, entry_id: int, waiter: asyncio.Future[JournalEntry]) -> None:
        waiters = self._waiting.get(entry_id)
        if waiters is not None and waiter in waiters:
            waiters.remove(waiter)
            if not waiters:
                del self._waiting[entry_id]

    async def _watch(self) -> None:
        """While steps wait: read all their entries in one query, wake those settled. The
        wait between reads starts at `poll_min`, doubles while nothing settles (up to
        `poll_max`) and starts over when something does or a new step starts waiting."""
        delay = self.config.poll_min
        while self._waiting:
            await asyncio.sleep(delay)
            self._poked = False
            try:
                entries = self.store.journal_entries(list(self._waiting))
            except Exception:  # the database blinked: the next read may get through
                log.warning("reading waiting steps failed", extra={"action": "settle_poll"})
                entries = {}
            settled = [e for e in entries.values() if e.status not in _OPEN]
            for entry in settled:
                for waiter in self._waiting.pop(entry.id, []):
                    if not waiter.done():
                        waiter.set_result(entry)
            fresh = settled or self._poked
            delay = self.config.poll_min if fresh else min(delay * 2, self.config.poll_max)

    def _give_up(self, entry_id: int) -> Settled | None:
        entry = self._read(entry_id)
        if entry.status is NodeStatus.QUEUED:
            if self.store.journal_unqueue(entry_id, NEVER_STARTED):
                log.info("withdrew a queued step", extra={"action": "unqueue", "run_id": entry.run_id})
                return Settled(self._read(entry_id), lost=True)
            return None  # a worker claimed it just now: keep waiting
        if entry.status is NodeStatus.STARTED:
            log.warning(
                "the worker running a step is gone",
                extra={"action": "worker_lost", "run_id": entry.run_id, "node_id": entry.node_id},
            )
            return Settled(entry, lost=True)
        return Settled(entry)

    async def _job_lost(self, entry_id: int, job_id: int | None) -> bool:
        """True when the job behind the entry will never settle it."""
        if job_id is not None:
            status = await self.queue.status(job_id)
            jobs = [] if status is None else [(job_id, status)]
        else:
            jobs = await self.queue.find(entry_id)
        if not jobs:
            return True
        statuses = {status for _, status in jobs}
        if Status.TODO in statuses:
            return False
        doing = {jid for jid, status in jobs if status is Status.DOING}
        if doing:
            return doing <= await self.queue.stalled(self.config.stalled_after)
        return statuses <= ENDED
