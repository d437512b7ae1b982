"""`Executions`: this process's executions of runs, one background task per running run.

    executions.launch(run, ready)     a `RunExecutor` over the engine's step runner, as a task
    executions.stop_local(id, note)   cancel ours (with a person's note: steps settle `failed`)
    executions.wait(id)               until the run rests (ours, or executed elsewhere)
    executions.emit(kind, run_id, …)  the engine's events to its subscribers

When an execution ends, its `Outcome` is applied with a compare-and-swap (`running ->
completed | failed | paused | needs_attention`); a run cancelled or taken over meanwhile
keeps what the other change made.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from core.engine.config import EngineConfig
from core.engine.events import ENGINE_ACTOR, EngineEvent, EventBus, EventKind, Subscriber
from core.engine.executor import Children, ExecutionStore, Outcome, RunExecutor, RunnerFactory, Setup
from core.engine.notify import Notifier
from core.engine.providers import ProviderRegistry
from core.engine.readiness import Ready
from core.engine.rendering import StepRenderer
from core.engine.workdirs import run_dirs
from core.errors import BatonError
from core.store.port import Runs, Transition
from core.store.records import Run, RunStatus

log = logging.getLogger("baton.engine")


@dataclass(slots=True)
class _Active:
    task: asyncio.Task[None]
    executor: RunExecutor


class ExecutionsStore(ExecutionStore, Protocol):
    """The store roles `Executions` uses: an execution's, and the runs it starts and settles."""

    @property
    def runs(self) -> Runs: ...


class Executions:
    def __init__(
        self, *, store: ExecutionsStore, config: EngineConfig, providers: ProviderRegistry,
        runners: RunnerFactory, notifier: Notifier,
        children: Children | None = None,
    ) -> None:
        """`children`: starts and waits for the child runs of `workflow:` steps (the engine's)."""
        self.store = store
        self.notifier = notifier  # a run coming to rest tells its notices in the same unit
        self.config = config
        self.providers = providers
        self.runners = runners  # each execution's step runner: local, or the queue's
        self.children = children
        self._bus = EventBus()
        self._active: dict[str, _Active] = {}
        self._renderer = StepRenderer(config.render)

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        return self._bus.subscribe(fn)

    async def emit(
        self,
        kind: EventKind,
        run_id: str,
        node_id: str | None = None,
        *,
        run_status: str | None = None,
        **detail: Any,
    ) -> None:
        if self._bus:
            await self._bus.emit(EngineEvent(kind, run_id, node_id, run_status=run_status, detail=detail))

    def active_ids(self) -> set[str]:
        return set(self._active)

    async def launch(self, run: Run, ready: Ready) -> None:
        """Execute `run` (won by this process: `running`, our lease) in a background task."""
        # a run not resumed from another is its whole lineage: no query
        lineage = (run.id,) if run.resumed_from is None else tuple(self.store.steps.lineage(run.id))
        config = self.config
        try:
            setup = Setup(
                store=self.store, prepared=ready.prepared, definitions=ready.definitions, run=run,
                args=ready.args, lineage=lineage, dirs=run_dirs(config.data_dir, run.id),
                providers=self.providers, tools=ready.tools, bus=self._bus, environment=config.environment,
                max_parallel=config.max_parallel, group_commit=config.group_commit, renderer=self._renderer,
                max_output=config.max_output, max_output_file=config.max_output_file,
                max_artifacts=config.max_artifacts,
                cache_retention=config.cache_retention,
                children=self.children,
            )  # fmt: skip
            executor = RunExecutor(setup, self.runners)
        except Exception as exc:  # e.g. its run directory cannot be made: it fails, saying why,
            # rather than staying `running` under our lease with nothing executing it
            log.exception("execution could not start", extra={"action": "execute", "run_id": run.id})
            why = f"Baton could not start executing it: {type(exc).__name__}: {exc}"
            await self._rest(run, Outcome(RunStatus.FAILED, why))
            return
        task = asyncio.create_task(self._drive(run, executor), name=f"baton-run-{run.id}")
        self._active[run.id] = _Active(task, executor)
        await self.emit(EventKind.RUN_STARTED, run.id, run_status=RunStatus.RUNNING.value)

    async def _drive(self, run: Run, executor: RunExecutor) -> None:
        try:
            outcome = await executor.execute()
        except asyncio.CancelledError:
            self._active.pop(run.id, None)
            if executor.cancel_note is not None:
                await self.emit(
                    EventKind.RUN_FINISHED,
                    run.id,
                    run_status=RunStatus.CANCELLED.value,
                    reason=executor.cancel_note,
                    keyed=run.concurrency is not None,
                    parent=run.parent_run,
                )
            return
        except Exception as exc:
            log.exception("execution failed", extra={"action": "execute", "run_id": run.id})
            outcome = Outcome(RunStatus.FAILED, f"Baton failed while executing: {type(exc).__name__}: {exc}")
        await self._rest(run, outcome)

    async def _rest(self, run: Run, outcome: Outcome) -> None:
        """Settle the run as `outcome` says (unless cancelled or taken over meanwhile) and say so."""
        try:  # the status, its reply in the outbox (and a needs_attention audit row): one unit
            with self.store.transaction() as tx:
                rested = tx.transition(Transition(
                    run.id,
                    outcome.status,
                    actor=ENGINE_ACTOR,
                    reason=outcome.reason,
                    expected_version=run.version,
                    allowed_from=[RunStatus.RUNNING],
                ))
                self.notifier.rest(tx, run, outcome.status, reason=outcome.reason, node=outcome.node_id)
                if outcome.status is RunStatus.NEEDS_ATTENTION:  # a side effect may have half-happened
                    tx.audit(actor=ENGINE_ACTOR, action="needs_attention", run_id=run.id,
                             details={"node": outcome.node_id, "reason": outcome.reason})  # fmt: skip
            final = rested.value
        except BatonError:
            final = self.store.runs.get_run(run.id)  # cancelled or taken over meanwhile: theirs stands
        finally:
            self._active.pop(run.id, None)
        await self.emit(
            EventKind.RUN_FINISHED,
            run.id,
            run_status=final.status.value,
            reason=final.reason,
            node=outcome.node_id,
            keyed=run.concurrency is not None,
            parent=run.parent_run,
            on_child=outcome.on_child and final.status is RunStatus.PAUSED,
        )

    async def stop_local(self, run_id: str, note: str | None) -> None:
        """Cancel our execution of `run_id` (its subprocesses are killed) and wait for it."""
        active = self._active.get(run_id)
        if active is None:
            return
        active.executor.cancel_note = note
        active.task.cancel()
        await asyncio.wait([active.task])

    async def stop(self, grace: float) -> None:
        """Let our executions finish for `grace` seconds, then cancel them (no note: their
        steps stay open, the lease lapses, a peer recovers them)."""
        tasks = [a.task for a in self._active.values()]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def wait(self, run_id: str, timeout: float | None = None) -> Run:
        """Until the run rests (completed, failed, paused, needs_attention, cancelled)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            active = self._active.get(run_id)
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if active is not None:
                await asyncio.wait_for(asyncio.shield(active.task), left)
                continue
            run = self.store.runs.get_run(run_id)
            if run.status.resting:
                return run
            if left is not None and left <= 0:
                raise TimeoutError(f"run {run_id} is still {run.status.value}")
            await asyncio.sleep(0.05 if left is None else min(0.05, left))  # executed by another process
