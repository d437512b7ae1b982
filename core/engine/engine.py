"""`Engine`: start, resume, approve, reject, abandon, cancel, resolve, invalidate, plan.

Every status change is a compare-and-swap in the store; the engine checks preconditions
first only to give a clear refusal (the CAS decides). Executions run as background tasks
of this process (`executor.RunExecutor`), one per run, reporting through subscribers.
Leases (`leases.LeaseKeeper`) keep runs ours and recover runs whose owner died.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.engine.events import ENGINE_ACTOR, EngineEvent, EventBus, EventKind, Plan, RunSummary, Subscriber
from core.engine.executor import Outcome, RunExecutor, Setup, input_digests
from core.engine.gates import GateKeeper
from core.engine.inspection import PLANNED, RunDetail, inspect_run
from core.engine.journal_index import JournalIndex
from core.engine.leases import LeaseKeeper, new_owner
from core.engine.planning import final_output_digest, plan_run, summarize
from core.engine.prepared import Definitions, PreparedWorkflow, prepare, read_definitions
from core.engine.providers import ProviderRegistry
from core.engine.rendering import StepRenderer
from core.engine.run_actions import RunActions
from core.engine.step_env import StepEnvironment
from core.engine.tools import ToolRegistry, unregistered
from core.engine.workdirs import run_dirs
from core.errors import BatonError, Next, RunNotResumable
from core.store.port import Store
from core.store.records import Run, RunStatus
from core.workflows.args import canonical_json, handle, validate_inputs
from core.workflows.catalog import Catalog
from core.workflows.model import Workflow
from core.workflows.render_budget import RenderLimits

log = logging.getLogger(__name__)
ExecutorFactory = Callable[[Setup], RunExecutor]


@dataclass(frozen=True)
class EngineConfig:
    data_dir: Path
    #: what steps see in their environment, the source of declared secrets, and the runtime's
    #: redactor (stderr tails and errors); built by the runtime (`bot/runtime.py`)
    environment: StepEnvironment
    max_parallel: int = 4
    lease_seconds: float = 15.0
    replica_id: str = "local"
    group_commit: float = 0.01  # seconds a pure step's result may wait for its commit (0: none)
    render: RenderLimits = field(default_factory=RenderLimits)  # each template render's budget
    max_output: int = 1_000_000  # bytes of a step's output kept; the rest stays in a file


@dataclass(frozen=True, slots=True)
class Ready:
    """A run's workflow, resolved and read, before its status changes (errors surface first)."""

    workflow: Workflow
    prepared: PreparedWorkflow
    definitions: Definitions
    args: dict[str, Any]
    tools: ToolRegistry  # the registry the keys were computed with: the execution uses it


@dataclass(slots=True)
class _Active:
    task: asyncio.Task[None]
    executor: RunExecutor


class Engine(RunActions):
    def __init__(
        self,
        *,
        store: Store,
        catalog: Catalog,
        config: EngineConfig,
        providers: ProviderRegistry,
        tools: ToolRegistry,
        executor_factory: ExecutorFactory | None = None,
    ) -> None:
        self.store = store
        self.catalog = catalog
        self.config = config
        self.providers = providers
        self.tools = tools
        self.gates = GateKeeper(store)  # which gate a run means; deciding one (`gates.py`)
        #: builds each execution's executor: in-process by default; `core.engine.distributed`
        #: supplies one whose steps run on `baton worker` processes
        self._executor_factory: ExecutorFactory = executor_factory or RunExecutor
        self.owner = new_owner(config.replica_id)
        self._bus = EventBus()
        self._active: dict[str, _Active] = {}
        self._renderer = StepRenderer(config.render)
        self._leases = LeaseKeeper(
            store=store,
            owner=self.owner,
            replica_id=config.replica_id,
            lease_seconds=config.lease_seconds,
            active=lambda: set(self._active),
            lost=self._lost,
            recovered=self._recovered,
        )

    # -- lifecycle ------------------------------------------------------------------------
    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        return self._bus.subscribe(fn)

    async def start(self) -> None:
        """Take over runs of dead local processes now, then heartbeat and recover in the background."""
        await self._leases.start()

    async def stop(self, grace: float = 10.0) -> None:
        await self._leases.stop()
        tasks = [a.task for a in self._active.values()]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace)
            for task in pending:
                task.cancel()  # no note: the steps stay `started`, the lease lapses, a peer recovers
            await asyncio.gather(*pending, return_exceptions=True)

    async def recover_now(self) -> list[str]:
        """One recovery pass (lapsed leases); the ids of the runs this process took over."""
        return await self._leases.recover_lapsed()

    async def heartbeat_now(self) -> list[str]:
        """One heartbeat; the ids of the runs it stopped because they are no longer ours."""
        return await self._leases.heartbeat()

    # -- reading -----------------------------------------------------------------------------
    def args_of(self, run: Run) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.store.get_blob(run.args_digest))
        return value

    def _workflow(self, name: str) -> Workflow:
        self.catalog.reload()
        return self.catalog.get(name)

    def _ready(self, workflow_name: str, args: Mapping[str, Any], *, to_run: bool = True) -> Ready:
        """The workflow resolved and read. `to_run`: its steps are about to execute, so every
        secret it declares must be available (`MissingSecret` otherwise: nothing starts)."""
        workflow = self._workflow(workflow_name)
        tools = self._current_tools(workflow)
        prepared = prepare(workflow, tools)
        checked = validate_inputs(workflow, args)
        if to_run:
            missing = unregistered(workflow, tools)
            if missing is not None:  # refused now, not at that step (after an approval, say)
                raise missing
            self.config.environment.require(workflow.name, workflow.declared_secrets())
        definitions = read_definitions(prepared, providers=self.providers)
        return Ready(workflow, prepared, definitions, checked, tools)

    def _current_tools(self, workflow: Workflow) -> ToolRegistry:
        """The tools as their files are now: a changed tool module is imported again, so what
        runs, and what its callers' keys say ran, is the code on disk. A module that no
        longer imports fails the workflows that call tools; the others go on."""
        try:
            self.tools = self.tools.refreshed()
        except BatonError as exc:
            if any(node.kind == "tool" for node in workflow.nodes):
                raise
            log.warning("tool modules not reloaded: %s", exc.message, extra={"action": "tools_reload"})
        return self.tools

    def plan(self, run_id: str) -> Plan:
        run = self.store.get_run(run_id)
        ready = self._ready(run.workflow, self.args_of(run), to_run=False)
        lineage = self.store.lineage(run.id)
        index = JournalIndex(run.id, self.store.journal(lineage))
        return plan_run(run, ready.prepared, ready.definitions, input_digests(ready.args), index)

    def summary(self, run_id: str | Run) -> RunSummary:
        """The run's node table and output; pass the `Run` itself to save reading it again."""
        run = run_id if isinstance(run_id, Run) else self.store.get_run(run_id)
        entries = self.store.journal([run.id])
        try:
            prepared: PreparedWorkflow | None = prepare(self.catalog.get(run.workflow), self.tools)
        except BatonError:
            prepared = None  # the workflow is gone or broken: the table still shows what ran
        digest = final_output_digest(prepared, entries)
        output = self.store.get_blob(digest).decode("utf-8", errors="replace") if digest else None
        return summarize(run, prepared, entries, output)

    def inspect(self, run: Run, *, plan: bool = True) -> RunDetail:
        """The run seen whole (its page): the node table with timing, verdicts, outputs'
        digests and dependencies; with `plan`, for a run resting failed, paused or
        needs_attention, what a resume would do. One journal read (of the lineage when
        planning); the workflow's preparation is cached."""
        try:
            prepared: PreparedWorkflow | None = prepare(self.catalog.get(run.workflow), self.tools)
        except BatonError:
            prepared = None  # the workflow is gone or broken: the page still shows what ran
        if not (plan and prepared is not None and run.status in PLANNED):
            return inspect_run(run, prepared, self.store.journal([run.id]))
        entries = self.store.journal(self.store.lineage(run.id))
        try:
            ready = self._ready(run.workflow, self.args_of(run))
            made = plan_run(run, ready.prepared, ready.definitions, input_digests(ready.args),
                            JournalIndex(run.id, entries))
        except BatonError as exc:
            return inspect_run(run, prepared, entries, plan_error=exc.message)
        return inspect_run(run, ready.prepared, entries, made)

    async def wait(self, run_id: str, timeout: float | None = None) -> Run:
        """Until the run rests (completed, failed, paused, needs_attention, cancelled)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            active = self._active.get(run_id)
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if active is not None:
                await asyncio.wait_for(asyncio.shield(active.task), left)
                continue
            run = self.store.get_run(run_id)
            if run.status.resting:
                return run
            if left is not None and left <= 0:
                raise TimeoutError(f"run {run_id} is still {run.status.value}")
            await asyncio.sleep(0.05 if left is None else min(0.05, left))  # executed by another process

    # -- starting ----------------------------------------------------------------------------
    def check_start(self, workflow: str, args: Mapping[str, Any]) -> None:
        """Raise what `start_run` would refuse these args with (inputs, tools, secrets), before
        the caller changes anything else (option 2 of the fresh-run prompt abandons a run first)."""
        self._ready(workflow, args)

    async def start_run(
        self,
        *,
        workflow: str,
        args: Mapping[str, Any],
        platform: str,
        conversation: str,
        thread: str | None,
        requester: str,
        resume_from: str | None = None,
        origin_event: str | None = None,
    ) -> Run:
        """`origin_event`: `"<platform>:<event_id>"` of the chat command asking for it, so a
        redelivery of that command finds this run (`Store.command_runs`)."""
        ready = self._ready(workflow, args)
        if resume_from is not None:
            self.store.get_run(resume_from)  # RunNotFound before anything is created
        with self.store.transaction() as tx:  # args blob, run and `start` audit row: one change
            digest = tx.put_blob(canonical_json(ready.args))
            run = tx.create_run(
                workflow=ready.workflow.name,
                platform=platform,
                conversation=conversation,
                thread=thread,
                requester=requester,
                args_digest=digest,
                resumed_from=resume_from,
                status=RunStatus.RUNNING,
                lease_owner=self.owner,
                lease_seconds=self.config.lease_seconds,
                origin_event=origin_event,
            )
            details = {"workflow": ready.workflow.name, "args": handle(digest), "resume_from": resume_from}
            tx.audit(actor=requester, action="start", run_id=run.id, details=details)
        await self._launch(run, ready)
        return run

    async def _launch(self, run: Run, ready: Ready) -> None:
        # a run not resumed from another is its whole lineage: no query
        lineage = (run.id,) if run.resumed_from is None else tuple(self.store.lineage(run.id))
        executor = self._executor_factory(
            Setup(
                store=self.store,
                prepared=ready.prepared,
                definitions=ready.definitions,
                run=run,
                args=ready.args,
                lineage=lineage,
                dirs=run_dirs(self.config.data_dir, run.id),
                providers=self.providers,
                tools=ready.tools,
                bus=self._bus,
                environment=self.config.environment,
                max_parallel=self.config.max_parallel,
                group_commit=self.config.group_commit,
                renderer=self._renderer,
                max_output=self.config.max_output,
            )
        )
        task = asyncio.create_task(self._drive(run, executor), name=f"baton-run-{run.id}")
        self._active[run.id] = _Active(task, executor)
        await self._emit(EventKind.RUN_STARTED, run.id, run_status=RunStatus.RUNNING.value)

    async def _drive(self, run: Run, executor: RunExecutor) -> None:
        try:
            outcome = await executor.execute()
        except asyncio.CancelledError:
            self._active.pop(run.id, None)
            if executor.cancel_note is not None:
                await self._emit(
                    EventKind.RUN_FINISHED,
                    run.id,
                    run_status=RunStatus.CANCELLED.value,
                    reason=executor.cancel_note,
                )
            return
        except Exception as exc:
            log.exception("execution failed", extra={"action": "execute", "run_id": run.id})
            outcome = Outcome(RunStatus.FAILED, f"Baton failed while executing: {type(exc).__name__}: {exc}")
        try:
            final = self.store.transition(
                run.id,
                outcome.status,
                actor=ENGINE_ACTOR,
                reason=outcome.reason,
                expected_version=run.version,
                allowed_from=[RunStatus.RUNNING],
            )
        except BatonError:
            final = self.store.get_run(run.id)  # cancelled or taken over meanwhile: theirs stands
        finally:
            self._active.pop(run.id, None)
        if final.status is RunStatus.NEEDS_ATTENTION:  # a side effect may have half-happened
            self.store.audit(actor=ENGINE_ACTOR, action="needs_attention", run_id=run.id,
                             details={"node": outcome.node_id, "reason": final.reason})
        await self._emit(
            EventKind.RUN_FINISHED,
            run.id,
            run_status=final.status.value,
            reason=final.reason,
            node=outcome.node_id,
        )

    async def _emit(
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

    def _active_ids(self) -> set[str]:
        return set(self._active)

    async def _stop_local(self, run_id: str, note: str | None) -> None:
        """Cancel our execution of `run_id` (its subprocesses are killed) and wait for it."""
        active = self._active.get(run_id)
        if active is None:
            return
        active.executor.cancel_note = note
        active.task.cancel()
        await asyncio.wait([active.task])

    async def _lost(self, run: Run) -> None:
        if run.status is RunStatus.CANCELLED:
            await self._stop_local(run.id, f"cancelled by {run.status_by}")
        elif run.status is RunStatus.RUNNING and run.lease_owner != self.owner:
            await self._stop_local(run.id, None)  # another process owns it now

    async def _recovered(self, run: Run) -> None:
        """`run` was taken over from a process that stopped (its lease lapsed): continue it."""
        self.store.audit(actor=ENGINE_ACTOR, action="recover", run_id=run.id, details={"owner": self.owner})
        try:
            ready = self._ready(run.workflow, self.args_of(run))
        except BatonError as exc:
            with contextlib.suppress(BatonError):
                self.store.transition(
                    run.id,
                    RunStatus.FAILED,
                    actor=ENGINE_ACTOR,
                    reason=f"recovery failed: {exc.message}",
                    expected_version=run.version,
                    allowed_from=[RunStatus.RUNNING],
                )
            return
        await self._launch(run, ready)

    def _refuse_finished(self, run: Run, verb: str) -> RunNotResumable:
        return RunNotResumable(
            f"run {run.id} is {run.status.value}; it cannot be {verb}",
            run_id=run.id,
            status=run.status.value,
            by=run.status_by,
            workflow=run.workflow,
            next_step=Next.REUSE,
        )
