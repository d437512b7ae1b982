"""Application wiring: the assembled runtime (`bot/runtime.py`) -> store, engine, handler;
and the process lifecycle.

    baton = build_baton(settings)
    async with baton.running():          # engine started (recovery, heartbeat), signals handled
        ...                              # adapters take input until `baton.stopping` is set
    # engine stopped: in-flight steps got `grace` seconds to finish

SIGTERM / SIGINT go through the one shutdown path (`bot/shutdown.py`): the first sets
`baton.stopping` (adapters stop taking input); a second cancels the task that entered
`running()` for a fast exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from adapters.web import page_links
from bot.deadline_loop import DeadlineLoop
from bot.health import Health, Probe
from bot.housekeeping import Housekeeping
from bot.late_events import LateEvents
from bot.outbox_loop import OutboxLoop
from bot.runtime import Runtime, assemble, ensure_sqlite_dir, load_tools
from bot.schedule_loop import ScheduleLoop
from bot.schedule_ticker import ProcrastinateTicker
from bot.shutdown import Shutdown
from core.commands import authz
from core.commands.deadlines import GateDeadlines
from core.commands.handler import Handler
from core.commands.pages import RunPages
from core.commands.queue_watch import QueueWatch
from core.commands.voting import AccessApprovers
from core.config import Settings
from core.engine.engine import Engine, EngineConfig, RunnerFactory
from core.redaction import Redactor
from core.store.port import Store
from core.store.repository import SqlStore
from core.workflows.catalog import Catalog

if TYPE_CHECKING:  # procrastinate is imported only when BATON_EXECUTOR=procrastinate
    from core.engine.distributed import RemoteDispatcher

__all__ = ["Baton", "build_baton", "ensure_sqlite_dir", "load_tools", "wire"]

log = logging.getLogger("baton.app")

FLUSH_MIN = 2.0  # seconds the outbox gets on shutdown even when the steps used all the grace


@dataclass(frozen=True)
class Baton:
    """Everything one Baton process runs on. Built once by `build_baton`."""

    settings: Settings
    store: Store
    catalog: Catalog
    engine: Engine
    handler: Handler
    #: the runtime's one redactor: replies on every platform, logs, audit, steps' stderr
    redactor: Redactor
    #: what /readyz checks (bot/health.py): started, database reachable, platforms connected
    health: Health
    #: set when BATON_EXECUTOR=procrastinate: steps go to `baton worker` processes
    dispatcher: RemoteDispatcher | None = None
    #: prunes processed_events and platform_state; started and stopped with the engine
    housekeeping: Housekeeping | None = None
    #: fires gate reminders, escalations and timeouts; started and stopped with the engine
    deadlines: DeadlineLoop | None = None
    #: fires the schedules (YAML and chat); started and stopped with the engine
    schedules: ScheduleLoop | ProcrastinateTicker | None = None
    #: delivers the durable outbox's due rows (retries, rows of a replica that died or stopped);
    #: started and stopped with the engine, flushed on shutdown (`settle`)
    outbox: OutboxLoop | None = None
    #: handles commands recorded before their acknowledgement whose process died before
    #: answering (`late_events.py`); started and stopped with the engine
    late_events: LateEvents | None = None
    #: set once `settle` has run: in-flight steps got their grace and the outbox was flushed
    settled: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    shutdown: Shutdown = field(default_factory=lambda: Shutdown(grace=10.0, what="input"), repr=False)

    @property
    def stopping(self) -> asyncio.Event:
        """Set when the process was asked to stop: adapters stop taking input."""
        return self.shutdown.stopping

    def request_stop(self) -> None:
        self.shutdown.request()

    def watch_platform(self, platform: str, probe: Probe) -> None:
        """An adapter is connected; `await probe()` tells /readyz whether it still is."""
        self.health.watch(platform, probe)

    @asynccontextmanager
    async def running(
        self, *, grace: float | None = None, handle_signals: bool = True, schedules: bool = True
    ) -> AsyncIterator[Baton]:
        """Start the engine (recovery of lapsed runs, heartbeat); stop it on exit: in-flight
        steps get `grace` seconds (default BATON_SHUTDOWN_GRACE), then the leases of runs still
        running here are released so that a peer replica recovers them at once. `schedules`:
        fire the schedules meanwhile (a one-shot `baton say` does not)."""
        grace = self.settings.shutdown_grace if grace is None else grace
        self.shutdown.grace = grace
        with self.shutdown.signals(enabled=handle_signals):
            # every service is stopped by this one stack, in the reverse order of its start (also
            # when a later one fails to start): the loops first, then the engine (`settle`: steps'
            # grace, the outbox flushed and stopped), then the dispatcher
            async with contextlib.AsyncExitStack() as started:
                if self.dispatcher is not None:
                    await self.dispatcher.open()
                    started.push_async_callback(self.dispatcher.close)
                await self.engine.start()
                log.info("engine started", extra={"action": "engine_started", "owner": self.engine.owner})
                started.push_async_callback(self._stop_engine)
                services = (self.housekeeping, self.deadlines, self.outbox, self.late_events,
                            self.schedules if schedules else None)
                for service in services:
                    if service is not None:
                        await service.start()
                        if service is not self.outbox:  # stopped by `settle`, after its last flush
                            started.push_async_callback(service.stop)
                self.health.started = True
                started.callback(setattr, self.health, "started", False)
                yield self

    async def _stop_engine(self) -> None:
        await self.settle()
        released = self.store.leases.release_leases(self.engine.owner)
        log.info("engine stopped", extra={"action": "engine_stopped", "released": released})

    async def settle(self) -> None:
        """The first part of stopping, while the chat clients can still send: in-flight steps
        get the grace period (BATON_SHUTDOWN_GRACE), then the replies of the runs that came to
        rest (the outbox: final progress edits, completions, gates waiting) are sent within
        what is left of it (at least `FLUSH_MIN` seconds). What is still unsent stays in the
        outbox, its claims released, for the next process or a peer. Runs once."""
        if self.settled.is_set():
            return
        grace = 0.0 if self.shutdown.forced else self.shutdown.grace
        began = time.monotonic()
        try:
            await self.engine.stop(grace=grace)
            if self.outbox is not None:
                left = max(FLUSH_MIN, grace - (time.monotonic() - began))
                flushed = 0
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):
                        await self.handler.drain()  # replies of runs that just came to rest
                        flushed = await self.outbox.flush(left)
                await self.outbox.stop()
                released = self.outbox.deliverer.release()
                unsent = len(self.store.outbox.undelivered(limit=1000))
                log.info("outbox flushed: %d sent, %d left for the next process", flushed, unsent,
                         extra={"action": "outbox_flushed", "sent": flushed, "unsent": unsent,
                                "released": released})
        finally:
            self.settled.set()

    def close(self) -> None:
        self.store.close()


def build_baton(
    settings: Settings, *, environ: Mapping[str, str] | None = None, runtime: Runtime | None = None
) -> Baton:
    """Wire the engine and the handler on the assembled runtime (`bot.runtime.assemble(settings,
    environ=…)` unless one is given: its store is migrated already)."""
    runtime = runtime if runtime is not None else assemble(settings, environ=environ)
    store = runtime.store
    try:
        pages = page_links(settings, runtime.redactor)  # its key hidden before any step runs
    except BaseException:
        store.close()
        raise
    return wire(runtime, pages=pages, dispatcher=distributed_dispatcher(settings, store))


def wire(
    runtime: Runtime,
    *,
    pages: RunPages | None = None,
    dispatcher: RemoteDispatcher | None = None,
    runners: RunnerFactory | None = None,
    clock: Callable[[], float] = time.time,
    config: EngineConfig | None = None,
) -> Baton:
    """The composition root: the engine, the handler, its delivery and the loops of one
    process, on `runtime` (its store migrated). `build_baton` and the test builder
    (`bot/testing.py`) both wire through here. `dispatcher`: steps go to `baton worker`s
    (BATON_EXECUTOR=procrastinate); `runners`: another executor of the steps (the
    dispatcher's by default, else this process); `clock`: when votes are cast and deadlines
    are due; `config`: the engine's (`engine_config(runtime)` by default)."""
    settings, store = runtime.settings, runtime.store
    engine = Engine(
        store=store,
        catalog=runtime.catalog,
        config=config if config is not None else engine_config(runtime),
        providers=runtime.providers,
        tools=runtime.tools,
        runners=runners if runners is not None else _queue_runners(dispatcher),
        approvers=AccessApprovers(settings.access_policy),
    )
    handler = Handler(store=store, engine=engine, catalog=runtime.catalog, access=settings.access_policy,
                      redactor=runtime.redactor, event_stale_after=settings.event_stale_seconds,
                      pages=pages, clock=clock, notify_window=settings.notify_digest_seconds,
                      outbox_lease_seconds=settings.outbox_lease_seconds)
    shutdown = Shutdown(grace=settings.shutdown_grace, what="input")
    outbox = OutboxLoop(handler.progress.deliverer, every=settings.outbox_poll_seconds)  # woken by a platform
    return Baton(
        settings=settings,
        store=store,
        catalog=runtime.catalog,
        engine=engine,
        handler=handler,
        redactor=runtime.redactor,
        dispatcher=dispatcher,
        housekeeping=Housekeeping.from_settings(store, settings),
        deadlines=DeadlineLoop(GateDeadlines(
            store=store, engine=engine, replica=engine.owner, deliver=handler.progress.deliverer.deliver_run,
            clock=clock,
        ), every=settings.deadline_poll_seconds,
           queue=QueueWatch(store=store, engine=engine, after=settings.queued_long_after, clock=clock)),
        outbox=outbox,
        late_events=LateEvents(store.events, handler, stale=settings.event_stale_seconds,
                               every=max(1.0, min(settings.event_stale_seconds / 2, 30.0))),
        schedules=schedule_ticks(settings, handler),
        shutdown=shutdown,
        health=Health(ping=store.ping, stopping=shutdown.stopping),
    )


def engine_config(runtime: Runtime) -> EngineConfig:
    """The engine's settings, from the runtime's."""
    settings = runtime.settings
    return EngineConfig(
        data_dir=settings.data_dir,
        environment=runtime.environment,
        max_parallel=settings.max_parallel,
        lease_seconds=settings.lease_seconds,
        group_commit=settings.group_commit_ms / 1000,
        replica_id=settings.replica_id,
        render=settings.render_limits(),
        max_output=settings.max_output_bytes,
        max_output_file=settings.max_output_file_bytes,
        max_artifacts=settings.max_artifact_bytes,
        cache_retention=settings.cache_retention,
        may_run=functools.partial(authz.may_run, settings.access_policy),
    )


def schedule_ticks(settings: Settings, handler: Handler) -> ScheduleLoop | ProcrastinateTicker:
    """What ticks the schedules: a Procrastinate periodic task with workers (one tick job a
    second across replicas), else the bot's own loop."""
    if settings.executor == "procrastinate":
        return ProcrastinateTicker(handler.scheduler, database_url=settings.database_url,
                                   queue=settings.queue_name)
    return ScheduleLoop(handler.scheduler, every=settings.schedule_poll_seconds)


def distributed_dispatcher(settings: Settings, store: Store) -> RemoteDispatcher | None:
    """With BATON_EXECUTOR=procrastinate: the job queue's schema is installed and steps are
    handed to workers through the returned dispatcher; None for the in-process executor."""
    if settings.executor != "procrastinate":
        return None
    if not isinstance(store, SqlStore):  # `assemble` opens the database; only a test could differ
        raise TypeError("BATON_EXECUTOR=procrastinate hands steps to workers through the database store")
    from core.engine.distributed import (
        DispatchConfig,
        JobQueue,
        RemoteDispatcher,
        apply_queue_schema,
        stalled_after,
    )

    apply_queue_schema(settings.database_url)
    config = DispatchConfig(
        queue=settings.queue_name,
        liveness_seconds=settings.worker_heartbeat_seconds,
        stalled_after=stalled_after(settings.worker_heartbeat_seconds),
    )
    from core.store.settled_reads import SettledReads

    reads = SettledReads(settings.database_url)
    return RemoteDispatcher(store.dispatch, JobQueue(settings.database_url), config, reads=reads)


def _queue_runners(dispatcher: RemoteDispatcher | None) -> RunnerFactory | None:
    if dispatcher is None:
        return None  # steps run in this process; procrastinate is never imported
    from core.engine.distributed import queue_runner_factory

    return queue_runner_factory(dispatcher)
