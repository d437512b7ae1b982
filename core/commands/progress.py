"""Background replies: one progress message per run, edited in place, and the final reply.

Subscribed to the engine's events. Bursts of node events are coalesced: at most one
progress reply per run is in flight, and it always shows the latest node table. When the
run comes to rest the progress message gets its last edit and the final reply follows
(`run_completed`, `run_failed`, `gate_waiting`, `needs_attention`, `run_cancelled`), in the
run's platform / conversation / thread, through the outbox that platform registered.

Those two are state-carrying: the engine wrote them as a row of the durable outbox in the
unit of work that brought the run to rest, and they are sent from that row (`deliver`,
driven by `core/delivery/outbox.py`): at once by this process when it saw the run come to
rest, else (a retry after a failure, a process that died or stopped meanwhile) by whichever
replica's outbox loop claims the row, rendered from the store as it is then.

Threads. On a platform registered with `threads=True` a command answered outside a thread
starts its run's thread with the reply it gets back (`Reply.how.starts_thread`); the delivery
service posts it and reports the thread with `Handler.attach_thread`. The run is already running
by then, so its first progress could be produced before the thread exists. Such a run's
background replies wait (at most `thread_wait` seconds) until the thread is attached, then
re-read the run and go to its thread: while a command is being handled in a conversation
(`starting`), and after it for each run it announced with `starts_thread` (`expect_thread`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from cachetools import FIFOCache, LRUCache

from core.commands import queueing, replies
from core.commands.deadlines import TIMED_OUT
from core.commands.messages import Outbox, Reply
from core.commands.notices import DIGEST, NOTICE, Notices, NoticesStore
from core.commands.offers import GateOffers
from core.config import Access
from core.delivery.edits import Edits, NotDelivered, urgent
from core.delivery.outbox import Deliverer, once_of
from core.engine.engine import Engine
from core.engine.events import EngineEvent, EventKind, NodeState, RunSummary
from core.engine.notify import NOTICED
from core.engine.subruns import item_child, waiting_child
from core.errors import BatonError
from core.store.port import Deliveries
from core.store.records import Delivery, Gate, GateStatus, Run, RunStatus
from core.workflows.notify_spec import DEFAULT_DIGEST

log = logging.getLogger("baton.progress")

#: Executions whose nodes are noted for "Ran:" at most (the oldest are forgotten first).
RAN_MEMORY = 10_000


@dataclass(slots=True)
class _RunState:
    """One run's pending background work; exists only while its worker task does."""

    dirty: bool = False  # node events came since the last progress edit
    #: the run came to rest: each event, and whether a command's reply already tells it
    finished: list[tuple[EngineEvent, bool]] = field(default_factory=list)
    worker: asyncio.Task[None] | None = None
    wake: asyncio.Event = field(default_factory=asyncio.Event)  # set when the run comes to rest


GATE_NOTICES = {"gate_reminder": replies.gate_reminder, "gate_escalated": replies.gate_escalated}


class ProgressStore(NoticesStore, Protocol):
    """The store roles `ProgressReporter` and what it builds (offers, notices, the deliverer) use."""

    @property
    def outbox(self) -> Deliveries: ...


class ProgressReporter:
    def __init__(
        self, *, store: ProgressStore, engine: Engine, thread_wait: float = 10.0, edits: Edits | None = None,
        pages: bool = False, access: Access | None = None, notify_window: float = DEFAULT_DIGEST,
        outbox_lease_seconds: float = 60.0, clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._clock = clock  # when a waiting gate's policy state is read (its escalation)
        self.pages = pages  # runs have pages: progress messages offer "Open run"
        self._engine = engine
        self._outboxes: dict[str, Outbox] = {}
        self._threaded: set[str] = set()  # platforms whose runs live in a thread the adapter opens
        self._runs: dict[str, _RunState] = {}
        self._posts: set[asyncio.Task[bool]] = set()  # `post`s being sent
        self._starting: Counter[tuple[str, str]] = Counter()  # (platform, conversation) -> commands
        self._expected: set[str] = set()  # runs announced with `starts_thread`, thread not attached yet
        self._threads_changed = asyncio.Condition()
        self.thread_wait = thread_wait
        #: the one edit-in-place component: a run's progress is edited at most once per its
        #: `interval` (a node table costs a journal read, and a run of many quick steps must not
        #: pay one per step); the state at rest is always sent at once. A run that never comes to
        #: rest here (another replica took it over) is forgotten by its sweep.
        self.edits = edits or Edits()
        #: run id -> the nodes its current execution (a start, resume, approval) ran, as the
        #: engine's events say; the final reply's "Ran:" names those, not an earlier attempt's
        #: (bounded: runs another replica took over never finish here)
        self._ran: LRUCache[str, set[str]] = LRUCache(RAN_MEMORY)
        #: runs a cancel/abandon command is ending; its reply tells the cancellation, so the
        #: background one is skipped. An entry lives from the command's start until the engine
        #: emits the run's cancellation (the command awaits it) or the command fails; the event
        #: takes it out at once, whatever becomes of the report, so none outlives its command.
        self.announced: set[str] = set()
        #: messages offering a gate's buttons, withdrawn once it is decided (on the platform
        #: each was sent on: a reminder's DM may be on another platform than the run's)
        self.offers = GateOffers(store, self._outboxes.get, self._outboxes.keys)
        #: the run's events told to the conversations that subscribed (`notices.py`)
        self.notices = Notices(store=store, engine=engine, access=access or Access.everyone(),
                               offers=self.offers, outbox_of=self._outboxes.get, pages=pages,
                               window=notify_window)
        #: cancelled runs whose cancelling command's own reply tells it (newest last, bounded)
        self._told: FIFOCache[str, None] = FIFOCache(RAN_MEMORY)
        #: the outbox rows: the final edit and the final reply of each run that came to rest
        self.deliverer = Deliverer(store.outbox, self.deliver, self._outboxes.keys, owner=engine.owner,
                                   lease_seconds=outbox_lease_seconds)
        self.unsubscribe = engine.subscribe(self.on_event)

    @property
    def interval(self) -> float:
        """Seconds between two progress edits of one run (the edit component's pace)."""
        return self.edits.interval

    @interval.setter
    def interval(self, seconds: float) -> None:
        self.edits.interval = seconds

    def hurry(self) -> None:
        """Shutting down: every progress edit waiting for its turn is sent now."""
        self.edits.hurry()
        for state in self._runs.values():
            state.wake.set()

    def platforms(self) -> frozenset[str]:
        """The platforms whose outbox this process registered (that it can post on)."""
        return frozenset(self._outboxes)

    def register_outbox(self, platform: str, outbox: Outbox, *, threads: bool = False) -> None:
        self._outboxes[platform] = outbox
        self.deliverer.nudge()  # what waits for this platform goes out now
        if threads:
            self._threaded.add(platform)
        else:
            self._threaded.discard(platform)

    # -- threads ---------------------------------------------------------------------------
    @asynccontextmanager
    async def starting(self, platform: str, conversation: str) -> AsyncIterator[list[Reply]]:
        """Around a command handled outside a thread: thread-less runs there wait until it is
        answered; the replies put in the yielded list that start a thread are then expected."""
        if platform not in self._threaded:
            yield []
            return
        key = (platform, conversation)
        answered: list[Reply] = []
        self._starting[key] += 1
        try:
            yield answered
        finally:
            self.expect_thread(answered)  # before the count drops: no window between the two
            self._starting[key] -= 1
            if self._starting[key] <= 0:
                del self._starting[key]
            await self._notify()

    def expect_thread(self, answered: Sequence[Reply]) -> None:
        for reply in answered:
            if reply.how.starts_thread and reply.run_id and reply.to.thread is None:
                self._expected.add(reply.run_id)

    async def thread_attached(self, run_id: str) -> None:
        self._expected.discard(run_id)
        await self._notify()

    async def _notify(self) -> None:
        async with self._threads_changed:
            self._threads_changed.notify_all()

    def _thread_pending(self, run: Run) -> bool:
        return (
            run.thread is None
            and run.platform in self._threaded
            and (run.id in self._expected or (run.platform, run.conversation) in self._starting)
        )

    async def _await_thread(self, run: Run) -> Run:
        """The run, re-read once its thread is known (or after `thread_wait` seconds). A child
        run (`workflow:` step) started before its parent's thread existed reports in the
        parent's thread: it takes it once the parent has one."""
        if run.thread is None and run.parent_run is not None:
            parent = await self._await_thread(self._store.runs.get_run(run.parent_run))
            if parent.thread is not None and parent.platform == run.platform:
                return self._store.runs.set_thread(run.id, parent.thread)
        if not self._thread_pending(run):
            return run
        deadline = time.monotonic() + self.thread_wait
        async with self._threads_changed:
            while self._thread_pending(self._store.runs.get_run(run.id)):
                left = deadline - time.monotonic()
                if left <= 0:
                    self._expected.discard(run.id)
                    log.warning("run thread not attached in time; reporting in the conversation",
                                extra={"action": "thread_wait", "run_id": run.id})
                    break
                try:
                    await asyncio.wait_for(self._threads_changed.wait(), left)
                except TimeoutError:
                    continue
        return self._store.runs.get_run(run.id)

    async def on_event(self, event: EngineEvent) -> None:
        """Called by the engine for every event, inside the step that caused it, so it only
        marks the run: while the run's worker is alive (pending, or waiting out `interval`) a
        node event costs a dict lookup and a flag. The worker builds the node table, at most
        once per `interval` plus once when the run comes to rest, never once per event."""
        if event.kind is EventKind.GATE_DECIDED:
            await self.offers.on_event(event)
            return
        self._note_ran(event)
        told = False
        if event.kind is EventKind.RUN_FINISHED and event.run_status == "cancelled":
            told = event.run_id in self.announced  # emitted while the command awaits the engine
            self.announced.discard(event.run_id)
            if told:
                self._told[event.run_id] = None
        if not self._outboxes:
            return  # no platform to report to (yet): nothing to build
        state = self._runs.get(event.run_id)
        if state is None:  # not `setdefault(.., _RunState())`: that builds one per event
            state = self._runs[event.run_id] = _RunState()
        if event.kind is EventKind.RUN_FINISHED:
            state.finished.append((event, told))
            state.wake.set()
        else:
            state.dirty = True
        if state.worker is None or state.worker.done():
            work = self._work(event.run_id, state)
            state.worker = asyncio.create_task(work, name=f"progress-{event.run_id}")

    def _note_ran(self, event: EngineEvent) -> None:
        if event.kind is EventKind.RUN_STARTED:
            self._ran[event.run_id] = set()
        elif event.node_id is not None and (
            event.kind in (EventKind.NODE_QUEUED, EventKind.NODE_FAILED)
            or (event.kind is EventKind.NODE_COMPLETED and "approved_by" in event.detail)
        ):
            ran = self._ran.get(event.run_id)
            if ran is not None:
                ran.add(event.node_id)

    async def drain(self) -> None:
        """Wait until every pending progress and final reply has been handed to its outbox."""
        while workers := [s.worker for s in self._runs.values() if s.worker and not s.worker.done()] + [
                t for t in self._posts if not t.done()]:
            await asyncio.gather(*workers, return_exceptions=True)
        await self.deliverer.idle()
        await self.offers.drain()

    async def _work(self, run_id: str, state: _RunState) -> None:
        key = f"progress:{run_id}"
        while state.dirty or state.finished:
            if state.finished:
                state.finished.pop(0)  # its reply is the run's outbox row: delivered from there
                if not state.finished:  # told: a later wait is woken by a later rest only
                    state.wake.clear()
                state.dirty = False
                self.edits.rested(key)
                await self.deliverer.deliver_run(run_id)
            else:
                pause = self.edits.due_in(key)
                if pause > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(state.wake.wait(), pause)
                    if state.finished or self.edits.due_in(key) > 0:
                        continue  # the final report shows the latest table anyway; or not due yet
                state.dirty = False
                self.edits.edited(key)
                if not await self._report(run_id):
                    if self.edits.closing.is_set():  # refused while shutting down: every edit is
                        break  # due at once, so retrying spins; the run's outbox row tells it later
                    state.dirty = True  # not taken for now: the newest state at the next turn
        if self._runs.get(run_id) is state:
            del self._runs[run_id]

    async def _report(self, run_id: str) -> bool:
        """The progress edit of a run still moving (the one at rest goes with the run's outbox
        row, `deliver`). False when it was not taken for now (it is sent again at the next turn)."""
        try:
            run = self._store.runs.get_run(run_id)
            outbox = self._outboxes.get(run.platform)
            if outbox is None or item_child(run):  # a map item's child: the parent's map line
                return True
            run = await self._await_thread(run)
            summary = self._engine.summary(run)  # the run just read: not read again
            queue = queueing.waiting(self._store, run, time.time())  # a queued run: why it waits
            if not await self._send(outbox, replies.progress(run, summary, page=self.pages, queue=queue)):
                return False
        except BatonError as exc:
            extra = {"action": "progress", "run_id": run_id}
            log.warning("progress not reported: %s", exc.message, extra=extra)
        except Exception:
            log.exception("progress failed", extra={"action": "progress", "run_id": run_id})
        return True

    async def deliver(self, row: Delivery) -> None:
        """Send one outbox row (`core/delivery/outbox.py`): the run's progress message gets its
        final edit, then the final reply follows (a completion, a failure, a gate waiting …),
        rendered now from the store, through the platform's outbox. Raises when the platform
        did not take them for now (`NotDelivered`): the row is retried after a backoff, also by
        another process. A row whose run has moved on since (resumed, decided) is not sent:
        what the run does now is told by its later replies. A gate's reminder, escalation or
        timeout (`deadlines.py`) is a row too, told in the run's thread."""
        if row.kind in GATE_NOTICES:
            await self._deliver_notice(row)
            return
        if row.kind == TIMED_OUT:
            await self._deliver_timed_out(row)
            return
        if row.kind == NOTICE:
            await self.notices.deliver(row)
            return
        if row.kind == DIGEST:
            await self.notices.deliver_digest(row)
            return
        if row.kind != EventKind.RUN_FINISHED.value:
            log.warning("outbox row of unknown kind %s skipped", row.kind,
                        extra={"action": "outbox", "run_id": row.run_id})
            return
        run = self._store.runs.get_run(row.run_id)
        self.notices.fan_out(row, run)  # only a row whose unit did not write its notices (before the
        # run's own reply: a failure to send it here must not hold them up)
        send = self._outboxes.get(run.platform)
        if send is None:
            raise BatonError(f"no outbox for {run.platform} in this process")
        if run.status.value != row.payload.get("status"):
            log.info("outbox row superseded: the run is %s now", run.status.value,
                     extra={"action": "outbox_superseded", "run_id": run.id})
            return
        quiet = item_child(run)  # a map item's child: only what needs a person is told
        if quiet and run.status in (RunStatus.COMPLETED, RunStatus.CANCELLED):
            return
        run = await self._await_thread(run)
        summary = self._engine.summary(run)  # the run just read: not read again
        if not quiet:
            await send(replies.progress(run, summary, page=self.pages))
        told = run.id in self.announced or run.id in self._told
        if told and run.status is RunStatus.CANCELLED:
            self._told.pop(run.id, None)
            return
        event = EngineEvent(EventKind.RUN_FINISHED, run.id, run_status=run.status.value,
                            detail={k: v for k, v in row.payload.items()
                                    if k not in ("status", NOTICED) and v is not None})
        final = self._final(run, summary, event, self._ran.get(run.id))
        await send(final.sent(once=once_of(row)))
        self._ran.pop(run.id, None)

    async def _deliver_notice(self, row: Delivery) -> None:
        """A fired reminder or escalation (`deadlines.py`): in the run's thread, then to each
        person it names directly (on their platform), each kept as an offer of the gate's
        buttons first, so that deciding the gate withdraws them everywhere. Not sent when the
        gate no longer waits in that opening (decided since: its buttons would be stale)."""
        self.notices.fan_out(row)  # a reminder row from before `gate_overdue` was told in its unit
        run = self._store.runs.get_run(row.run_id)
        send = self._outboxes.get(run.platform)
        if send is None:
            raise BatonError(f"no outbox for {run.platform} in this process")
        gate = self._store.gates.get_gate(row.run_id, row.payload["node"])
        if gate.status is not GateStatus.WAITING or gate.created_at != row.payload.get("opened_at"):
            log.info("outbox row superseded: gate %s no longer waits", gate.node_id,
                     extra={"action": "outbox_superseded", "run_id": run.id})
            return
        to = list(row.payload.get("to") or [])
        notice = GATE_NOTICES[row.kind](run, gate, to, row.payload.get("left"))
        notice = notice.sent(once=once_of(row))
        await send(self.offers.offer(notice, platform=run.platform, conversation=run.conversation,
                                     thread=run.thread))
        for part, person in enumerate(to, start=1):
            direct = replies.told_directly(notice, person)
            dm = None if direct is None else self._outboxes.get(direct.to.platform or "")
            if direct is None or dm is None:
                log.info("no outbox for %s in this process: %s not told directly",
                         None if direct is None else direct.to.platform, person,
                         extra={"action": "direct_skipped", "run_id": run.id})
                continue
            direct = direct.sent(once=once_of(row, part))
            kept = self.offers.offer(direct, platform=direct.to.platform or "",
                                     conversation=direct.to.conversation, thread=None)
            await dm(kept)

    async def _deliver_timed_out(self, row: Delivery) -> None:
        """A gate's timeout (`deadlines.py`), in the run's thread: nobody decided in time and
        what its `on_timeout` did. Sent whatever became of the run since: it tells what happened
        (before the run's final reply, the row after it)."""
        run = self._store.runs.get_run(row.run_id)
        send = self._outboxes.get(run.platform)
        if send is None:
            raise BatonError(f"no outbox for {run.platform} in this process")
        run = await self._await_thread(run)
        gate = self._store.gates.get_gate(row.run_id, row.payload["node"])
        told = replies.gate_timed_out(run, gate, str(row.payload["outcome"]), str(row.payload["waited"]))
        await send(told.sent(once=once_of(row, look=False)))

    async def post(self, reply: Reply) -> bool:
        """Hand `reply` to the outbox of its platform (`reply.to.platform`), in the background (a
        reply the platform cannot take for now is sent again: the caller does not wait for
        that; `drain` does); False when that platform registered none in this process."""
        outbox = self._outboxes.get(reply.to.platform or "")
        if outbox is None:
            return False
        task = asyncio.create_task(self._send(outbox, reply), name=f"post-{reply.run_id}")
        self._posts.add(task)
        task.add_done_callback(self._posts.discard)
        return True

    def _final(self, run: Run, summary: RunSummary, event: EngineEvent, ran: set[str] | None) -> Reply:
        gate = self._engine.gates.waiting(run)
        attention = event.detail.get("node") or next(
            (n.node_id for n in summary.nodes if n.state is NodeState.ATTENTION), None
        )
        state = self._gate_state(run, gate) if gate is not None else None
        paused = gate is None and run.status is RunStatus.PAUSED
        child = waiting_child(self._store.runs, run) if paused else None
        # a gate waiting: its buttons are offered
        final = replies.final(run, summary, gate, attention, ran, state, child)
        return self.offers.offer(final, platform=run.platform, conversation=run.conversation,
                                 thread=run.thread)

    def _gate_state(self, run: Run, gate: Gate) -> dict[str, Any] | None:
        """The policy state a waiting gate's message shows, as the engine counts it (None: it
        cannot be read now; the message goes without it)."""
        try:
            return self._engine.gates.live_state(run, gate, self._clock())
        except BatonError:
            return None

    async def _send(self, outbox: Outbox, reply: Reply) -> bool:
        """Hand `reply` to `outbox`. When the platform cannot take it for now (`NotDelivered`,
        after the platform library's own retries: the one retry layer of a reply that is no
        outbox row) a progress edit of a run still moving is left to the next turn (False: it
        will show a newer state); any other reply is logged as not delivered (the state of a
        run at rest goes with its outbox row, which the deliverer sends again)."""
        try:
            await outbox(reply)
        except NotDelivered as exc:
            if not urgent(reply):
                return False
            log.error("reply not delivered: %s", exc, extra={"action": "undelivered", "run_id": reply.run_id})
        except Exception:
            log.exception("outbox failed", extra={"action": "outbox", "run_id": reply.run_id})
        return True
