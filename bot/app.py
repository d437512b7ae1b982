"""Application wiring: settings -> store, catalog, engine, handler; and the process lifecycle.

    baton = build_baton(settings)
    async with baton.running():          # engine started (recovery, heartbeat), signals handled
        ...                              # adapters take input until `baton.stopping` is set
    # engine stopped: in-flight steps got `grace` seconds to finish

SIGTERM / SIGINT set `baton.stopping` (adapters stop taking input); a second signal
cancels the task that entered `running()` for a fast exit.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.engine import make_url

from adapters.web import page_links
from bot.housekeeping import Housekeeping
from core.commands.handler import Handler
from core.config import Settings
from core.engine.engine import Engine, EngineConfig, ExecutorFactory
from core.engine.providers import ProviderRegistry
from core.engine.tools import ToolRegistry
from core.redaction import Redactor
from core.store.port import Store
from core.store.repository import SqlStore
from core.workflows.catalog import Catalog

if TYPE_CHECKING:  # procrastinate is imported only when BATON_EXECUTOR=procrastinate
    from core.engine.distributed import RemoteDispatcher

log = logging.getLogger("baton.app")

DEFAULT_TOOL_MODULE = "workflows/tools.py"


@dataclass
class _Lifecycle:
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    signals: int = 0
    main_task: asyncio.Task[object] | None = None


@dataclass(frozen=True)
class Baton:
    """Everything one Baton process runs on. Built once by `build_baton`."""

    settings: Settings
    store: Store
    catalog: Catalog
    engine: Engine
    handler: Handler
    #: hides every secret the process knows, wherever stored text is shown to people
    redactor: Redactor = field(default_factory=Redactor)
    #: set when BATON_EXECUTOR=procrastinate: steps go to `baton worker` processes
    dispatcher: RemoteDispatcher | None = None
    #: prunes processed_events and platform_state; started and stopped with the engine
    housekeeping: Housekeeping | None = None
    _life: _Lifecycle = field(default_factory=_Lifecycle, repr=False)

    @property
    def stopping(self) -> asyncio.Event:
        """Set when the process was asked to stop: adapters stop taking input."""
        return self._life.stopping

    def request_stop(self) -> None:
        self._life.stopping.set()

    def _on_signal(self, signum: int) -> None:
        self._life.signals += 1
        name = signal.Signals(signum).name
        if self._life.signals == 1:
            log.info(
                "stopping: no new input; in-flight steps get %.0fs",
                self.settings.shutdown_grace,
                extra={"action": "shutdown", "signal": name},
            )
            self.request_stop()
        elif self._life.main_task is not None:
            log.warning("second %s: stopping now", name, extra={"action": "shutdown_forced"})
            self._life.main_task.cancel()

    @asynccontextmanager
    async def running(
        self, *, grace: float | None = None, handle_signals: bool = True
    ) -> AsyncIterator[Baton]:
        """Start the engine (recovery of lapsed runs, heartbeat); stop it on exit: in-flight
        steps get `grace` seconds (default BATON_SHUTDOWN_GRACE), then the leases of runs still
        running here are released so that a peer replica recovers them at once."""
        grace = self.settings.shutdown_grace if grace is None else grace
        loop = asyncio.get_running_loop()
        self._life.main_task = asyncio.current_task()
        installed: list[signal.Signals] = []
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                try:
                    loop.add_signal_handler(sig, self._on_signal, sig)
                except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
                    continue
                installed.append(sig)
        if self.dispatcher is not None:
            await self.dispatcher.open()
        await self.engine.start()
        log.info("engine started", extra={"action": "engine_started", "owner": self.engine.owner})
        if self.housekeeping is not None:
            await self.housekeeping.start()
        try:
            yield self
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
            if self.housekeeping is not None:
                await self.housekeeping.stop()
            await self.engine.stop(grace=0.0 if self._life.signals > 1 else grace)
            released = self.store.release_leases(self.engine.owner)  # type: ignore[attr-defined]
            if self.dispatcher is not None:
                await self.dispatcher.close()
            log.info("engine stopped", extra={"action": "engine_stopped", "released": released})

    def close(self) -> None:
        self.store.close()


def ensure_sqlite_dir(database_url: str) -> None:
    """SQLite needs the directory of its file to exist (`./.baton/` by default)."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        Path(url.database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def load_tools(modules: Sequence[str], base: Path | None = None) -> ToolRegistry:
    """Register the `@tool` functions of `modules` (module names or `.py` paths relative to
    `base`, the current directory by default). The default `workflows/tools.py` may be
    absent; any other missing module is a configuration error (raised by the registry)."""
    base = base if base is not None else Path.cwd()
    wanted = [m for m in modules if not (m == DEFAULT_TOOL_MODULE and not (base / m).is_file())]
    registry = ToolRegistry()
    found = registry.load(wanted, base)
    log.debug("tools loaded: %s", ", ".join(found) or "none", extra={"action": "tools_loaded"})
    return registry


def build_baton(settings: Settings) -> Baton:
    """Wire the parts; the schema is migrated before anything else touches the database."""
    ensure_sqlite_dir(settings.database_url)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    store = SqlStore(settings.database_url)
    store.migrate()
    catalog = Catalog(settings.workflow_dirs)
    dispatcher = distributed_dispatcher(settings, store)
    engine = Engine(
        store=store,
        catalog=catalog,
        config=EngineConfig(
            data_dir=settings.data_dir,
            max_parallel=settings.max_parallel,
            lease_seconds=settings.lease_seconds,
            group_commit=settings.group_commit_ms / 1000,
            replica_id=settings.replica_id,
        ),
        providers=ProviderRegistry.from_settings(settings),
        tools=load_tools(settings.tool_modules),
        executor_factory=_remote_factory(dispatcher),
    )
    handler = Handler(store=store, engine=engine, catalog=catalog, access=settings.access_policy,
                      event_stale_after=settings.event_stale_seconds, pages=page_links(settings, store))
    return Baton(
        settings=settings,
        store=store,
        catalog=catalog,
        engine=engine,
        handler=handler,
        redactor=Redactor(settings.secrets()),
        dispatcher=dispatcher,
        housekeeping=Housekeeping.from_settings(store, settings),
    )


def distributed_dispatcher(settings: Settings, store: SqlStore) -> RemoteDispatcher | None:
    """With BATON_EXECUTOR=procrastinate: the job queue's schema is installed and steps are
    handed to workers through the returned dispatcher; None for the in-process executor."""
    if settings.executor != "procrastinate":
        return None
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
    return RemoteDispatcher(store, JobQueue(settings.database_url), config)


def _remote_factory(dispatcher: RemoteDispatcher | None) -> ExecutorFactory | None:
    if dispatcher is None:
        return None  # the in-process executor; procrastinate is never imported
    from core.engine.distributed import remote_executor_factory

    return remote_executor_factory(dispatcher)
