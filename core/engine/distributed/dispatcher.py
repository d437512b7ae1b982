"""The replica side of distributed execution: hand a step to the queue, wait for its result.

    entry_id, job_id = await dispatcher.hand_off(...)  # `queued` entry + job, one transaction
                                                       # with the other steps ready at once
    settled = await dispatcher.settle(entry_id, job_id)

`settle` returns when the journal entry is settled (a worker wrote `completed`/`failed`)
(one watcher reads every waiting entry in one query: on the replica's event loop through
`SettledReads` when one is given, as `bot/app.py` does, else `Dispatch.journal_settled` in a
thread; either way the loop keeps scheduling while the database answers)
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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from procrastinate.jobs import Status

from core.engine.distributed.jobs import DEFAULT_QUEUE, NodeJob
from core.engine.distributed.queue import ENDED, JobQueue, defer_many_on
from core.errors import StoreError
from core.store.port import Dispatch, StepEntry
from core.store.records import JournalEntry, NodeStatus

log = logging.getLogger("baton.queue")

NEVER_STARTED = "withdrawn before any worker started it; dispatched again"


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
    output: bytes | None = None  # the output blob's bytes, when read with the entry

    @property
    def never_started(self) -> bool:
        return self.lost and self.entry.status is NodeStatus.FAILED


#: A hand-off's (entry id, job id), once its transaction committed.
Ticket = asyncio.Future[tuple[int, int]]
_Request = tuple[StepEntry, Callable[[int], NodeJob], Callable[[], None], Ticket]


class SettledReads(Protocol):
    """`Dispatch.journal_settled` on the replica's event loop (`core/store/settled_reads.py`)."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def settled(self, entry_ids: Iterable[int]) -> dict[int, tuple[JournalEntry, bytes | None]]: ...


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
        reads: SettledReads | None = None,
    ) -> None:
        """`reads`: the watcher's reads of settled entries on the event loop (None: the
        store's `journal_settled`, in a thread)."""
        self.store = store
        self.queue = queue
        self.config = config
        self.reads = reads
        self.between_writes = between_writes
        self._waiting: dict[int, list[asyncio.Future[Settled]]] = {}  # entry id -> settle() calls
        self._watcher: asyncio.Future[None] | None = None
        self._poked = False  # a step started waiting since the last read: read again soon
        self._handoffs: list[_Request] = []  # asked for, not yet written
        self._hander: asyncio.Future[None] | None = None
        self.handoff_batches = 0  # hand-off transactions so far (one per batch)

    async def open(self) -> None:
        await self.queue.open()
        if self.reads is not None:
            await self.reads.open()

    async def close(self) -> None:
        if self._hander is not None:
            self._hander.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._hander
        for _, _, _, ticket in self._handoffs:
            ticket.cancel()  # never written: the steps asking for them are being stopped
        self._handoffs = []
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        if self.reads is not None:
            await self.reads.close()
        await self.queue.close()

    def hand_off(
        self, handoff: StepEntry, job_for: Callable[[int], NodeJob], before: Callable[[], None]
    ) -> Ticket:
        """Ask for `handoff` to be written (its `queued` entry and its job, atomically): a
        future of (entry id, job id). Every hand-off asked for before the event loop runs
        dry is written in the same transaction (`_hand_off_batch`, in a thread); `before`
        (flushing the run's pending results) runs first, so a hand-off is never durable
        before the results it follows. `job_for` builds the job on the event loop when the
        batch is taken (given any entry id: the written entry's replaces it). A ticket
        cancelled before its batch is written is left out of it."""
        ticket: Ticket = asyncio.get_running_loop().create_future()
        self._handoffs.append((handoff, job_for, before, ticket))
        if self._hander is None or self._hander.done():
            self._hander = asyncio.ensure_future(self._hand_off_batches())
        return ticket

    async def _hand_off_batches(self) -> None:
        while self._handoffs:
            seen = -1
            while seen != len(self._handoffs):  # let every step that is becoming ready join
                seen = len(self._handoffs)
                await asyncio.sleep(0)
            batch = [request for request in self._handoffs if not request[3].done()]
            self._handoffs = []
            ready = self._flush_before(batch)
            if not ready:
                continue
            try:
                await self._hand_off_batch(ready)
            except asyncio.CancelledError:
                for request in ready:  # written or not, nobody waits for these any more
                    request[3].cancel()
                raise

    @staticmethod
    def _flush_before(batch: list[_Request]) -> list[_Request]:
        """Each run's pending results, flushed once per batch (on the event loop, which owns
        them): the requests whose flush succeeded; the others' tickets get its error."""
        flushed: dict[Callable[[], None], BaseException | None] = {}
        ready: list[_Request] = []
        for request in batch:
            before, ticket = request[2], request[3]
            if before not in flushed:
                try:
                    before()
                    flushed[before] = None
                except Exception as exc:
                    flushed[before] = exc
            failure = flushed[before]
            if failure is None:
                ready.append(request)
            else:
                ticket.set_exception(failure)
        return ready

    async def _hand_off_batch(self, ready: list[_Request]) -> None:
        """One transaction, in a thread: the `queued` entries, then their jobs. The jobs'
        arguments are built here, on the event loop (they read the runs' state)."""
        jobs = [request[1](0) for request in ready]  # the entry ids are known once written

        def defer(connection: Any, entry_ids: list[int]) -> list[int]:
            if self.between_writes is not None:
                for entry_id in entry_ids:
                    self.between_writes(entry_id)
            numbered = [replace(job, entry_id=eid) for job, eid in zip(jobs, entry_ids, strict=True)]
            return defer_many_on(connection, numbered, self.config.queue)

        self.handoff_batches += 1
        handoffs = [request[0] for request in ready]
        try:
            written = await asyncio.to_thread(self.store.journal_queue_many, handoffs, defer)
        except Exception as exc:
            for request in ready:
                if not request[3].done():
                    request[3].set_exception(exc)
            return
        for request, ids in zip(ready, written, strict=True):
            if not request[3].done():
                request[3].set_result(ids)

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
        """Wait until the entry is settled, or until nobody will settle it (see module doc).
        An entry settled already is found by the watcher's next read, like any other."""
        loop = asyncio.get_running_loop()
        while True:
            waiter: asyncio.Future[Settled] = loop.create_future()
            self._waiting.setdefault(entry_id, []).append(waiter)
            self._wake_watcher()
            try:
                settled = await asyncio.wait_for(asyncio.shield(waiter), self.config.liveness_seconds)
            except TimeoutError:
                settled = None
            finally:
                self._forget(entry_id, waiter)
            if settled is not None:
                return settled
            if await self._job_lost(entry_id, job_id):
                given_up = self._give_up(entry_id)
                if given_up is not None:
                    return given_up

    # -- one journal read for every step waiting on this replica ---------------------------

    def _wake_watcher(self) -> None:
        self._poked = True
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.ensure_future(self._watch())

    def _forget(self, entry_id: int, waiter: asyncio.Future[Settled]) -> None:
        waiters = self._waiting.get(entry_id)
        if waiters is not None and waiter in waiters:
            waiters.remove(waiter)
            if not waiters:
                del self._waiting[entry_id]

    async def _watch(self) -> None:
        """While steps wait: read those of their entries that are settled (with their
        outputs) in one query, in a thread, and wake their waiters. The wait between reads
        starts at `poll_min`, doubles while nothing settles (up to `poll_max`) and starts
        over when something does or a new step starts waiting."""
        delay = self.config.poll_min
        while self._waiting:
            await asyncio.sleep(delay)
            self._poked = False
            try:
                found = await self._read_settled(list(self._waiting))
            except Exception:  # the database blinked: the next read may get through
                log.warning("reading waiting steps failed", extra={"action": "settle_poll"})
                found = {}
            for entry, output in found.values():
                for waiter in self._waiting.pop(entry.id, []):
                    if not waiter.done():
                        waiter.set_result(Settled(entry, output=output))
            fresh = found or self._poked
            delay = self.config.poll_min if fresh else min(delay * 2, self.config.poll_max)

    async def _read_settled(self, entry_ids: list[int]) -> dict[int, tuple[JournalEntry, bytes | None]]:
        if self.reads is not None:
            return await self.reads.settled(entry_ids)
        return await asyncio.to_thread(self.store.journal_settled, entry_ids)

    def _give_up(self, entry_id: int) -> Settled | None:
        settled = self.store.journal_settled([entry_id]).get(entry_id)
        if settled is not None:  # it was settled after all (the watcher had not read it yet)
            return Settled(settled[0], output=settled[1])
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
