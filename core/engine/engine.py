"""`Engine`: start, resume, approve, reject, abandon, cancel, resolve, invalidate, plan.

Every status change is a compare-and-swap in the store; the engine checks preconditions
first only to give a clear refusal (the CAS decides). The engine is composed of parts, each
in its own module, and holds no logic of theirs:

    readiness    Readiness     a run's workflow resolved and read before its status changes
    gates        GateKeeper    which gate a run means; approve / reject as one unit of work
    executions   Executions    one background `RunExecutor` per running run, over the step
                               runner it was given (local, or the queue's); events
    actions      RunActions    resume, approve, reject, abandon, cancel, resolve, invalidate
    _leases      LeaseKeeper   keeps our runs ours and recovers runs whose owner died
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.engine.ballots import Approvers, Ballot
from core.engine.cache_expiry import apply_retention
from core.engine.concurrency import concurrency_of
from core.engine.config import EngineConfig
from core.engine.events import ENGINE_ACTOR, EngineEvent, EventKind, Plan, RunSummary, Subscriber
from core.engine.executions import Executions
from core.engine.executor import RunnerFactory, input_digests
from core.engine.gates import Alongside, Decision, GateKeeper, Voted
from core.engine.inspection import PLANNED, RunDetail, Shown, inspect_run
from core.engine.journal_index import JournalIndex
from core.engine.leases import LeaseKeeper, new_owner
from core.engine.local_runner import LocalStepRunner
from core.engine.notify import Notifier
from core.engine.planning import final_output_digest, plan_run, summarize
from core.engine.prepared import PreparedWorkflow, prepare
from core.engine.providers import ProviderRegistry
from core.engine.readiness import Readiness, Ready
from core.engine.run_actions import RunActions
from core.engine.subruns import ChildRuns
from core.engine.tools import ToolRegistry
from core.errors import BatonError
from core.store.port import NewRun, Store, Transition, digest_bytes
from core.store.records import Concurrency, Gate, JournalEntry, OnLimit, Run, RunStatus
from core.store.unit_of_work import UnitOfWork
from core.workflows.args import canonical_json, handle
from core.workflows.catalog import Catalog

__all__ = ["Created", "Engine", "EngineConfig", "Ready", "RunStart", "RunnerFactory"]
log = logging.getLogger("baton.engine")


#: a caller's writes in the unit of work that creates a run (`Engine.start_run(alongside=…)`)
Starting = Callable[[UnitOfWork, Run], None]


@dataclass(frozen=True, slots=True)
class RunStart:
    """One run to start (`Engine.start_runs`), with `start_run`'s arguments."""

    workflow: str
    args: Mapping[str, Any]
    platform: str
    conversation: str
    thread: str | None
    requester: str
    resume_from: str | None = None
    origin_event: str | None = None
    started_by: str | None = None
    scheduled_for: float | None = None
    alongside: Starting | None = None
    concurrency: Concurrency | None = None
    parent_run: str | None = None  # a `workflow:` step's child run: its parent, step and key
    parent_node: str | None = None
    parent_key: str | None = None


@dataclass(frozen=True, slots=True)
class Created:
    """A run `Engine.create_runs` created and committed, its execution not begun yet
    (`Engine.begin`)."""

    run: Run  # as its unit left it (a keyed run: admitted, or queued)
    ready: Ready
    policy: Concurrency | None


class Engine:
    def __init__(
        self,
        *,
        store: Store,
        catalog: Catalog,
        config: EngineConfig,
        providers: ProviderRegistry,
        tools: ToolRegistry,
        runners: RunnerFactory | None = None,
        approvers: Approvers | None = None,
    ) -> None:
        """`runners`: builds each execution's step runner: `LocalStepRunner` (this process)
        unless given another (`core.engine.distributed.queue_runner_factory`: `baton worker`s).
        `approvers`: the access settings' part of every gate's policy (`GateKeeper.vote`)."""
        self.store = store
        self.catalog = catalog
        self.config = config
        self.providers = providers
        self.owner = new_owner(config.replica_id)
        self.readiness = Readiness(blobs=store.blobs, catalog=catalog, providers=providers, tools=tools,
                                   environment=config.environment)  # fmt: skip
        #: the notices of a run's events, written in the unit of work that makes each event
        self.notifier = Notifier(subscribers=store.subscribers, catalog=catalog,
                                 args_of=self.readiness.args_of)  # fmt: skip
        self.gates = GateKeeper(store, self.notifier, catalog=catalog, approvers=approvers, owner=self.owner,
                                lease_seconds=config.lease_seconds)
        self.children = ChildRuns(self)  # `workflow:` steps' child runs
        self.executions = Executions(store=store, config=config, providers=providers,
                                     runners=runners or LocalStepRunner, notifier=self.notifier,
                                     children=self.children)  # fmt: skip
        self.actions = RunActions(
            store=store, gates=self.gates, readiness=self.readiness, executions=self.executions,
            children=self.children, owner=self.owner, lease_seconds=config.lease_seconds,
            redactor=config.environment.redactor,
        )  # fmt: skip
        self._leases = LeaseKeeper(
            runs=store.runs,
            leases=store.leases,
            owner=self.owner,
            replica_id=config.replica_id,
            lease_seconds=config.lease_seconds,
            active=self.executions.active_ids,
            lost=self._lost,
            recovered=self._recovered,
            sweep=self.settle_parents,
        )
        self.executions.subscribe(self._on_event)

    @property
    def tools(self) -> ToolRegistry:
        """The tool registry as last refreshed from the tool modules on disk."""
        return self.readiness.tools

    # -- lifecycle ------------------------------------------------------------------------
    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        return self.executions.subscribe(fn)

    async def start(self) -> None:
        """Take over runs of dead local processes now, then heartbeat and recover in the background;
        wake the parents a child's rest should have woken before a process died."""
        await self._leases.start()
        await self.settle_parents()

    async def stop(self, grace: float = 10.0) -> None:
        await self._leases.stop()
        await self.executions.stop(grace)

    async def recover_now(self) -> list[str]:
        """One recovery pass (lapsed leases); the ids of the runs this process took over."""
        taken = await self._leases.recover_lapsed()
        await self.settle_parents()
        return taken

    async def settle_parents(self) -> None:
        """Paused parents whose children all came to rest go on (`ChildRuns.settle`): the
        child's rest event wakes its parent at once, but a process killed between the child's
        rest and its parent's resume leaves the parent paused; this pass (at start and on every
        recovery tick, on any replica: the resume is a compare-and-swap) finishes the job."""
        for parent in self.store.runs.paused_parents():
            try:
                await self.children.settle(parent.id)
            except BatonError as exc:
                log.info("parent %s not settled: %s", parent.id, exc.message,
                         extra={"action": "settle_parent", "run_id": parent.id})  # fmt: skip

    async def take_admitted(self) -> list[str]:
        """Start, here, the runs admitted from a concurrency queue that no process took yet
        (a one-shot process does this before it exits; others' recovery loops do it too)."""
        return await self._leases.take_admitted()

    async def heartbeat_now(self) -> list[str]:
        """One heartbeat; the ids of the runs it stopped because they are no longer ours."""
        return await self._leases.heartbeat()

    async def _lost(self, run: Run) -> None:
        if run.status is RunStatus.CANCELLED:
            await self.executions.stop_local(run.id, f"cancelled by {run.status_by}")
        elif run.status is RunStatus.RUNNING and run.lease_owner != self.owner:
            await self.executions.stop_local(run.id, None)  # another process owns it now

    async def _on_event(self, event: EngineEvent) -> None:
        keyed = event.kind is EventKind.RUN_FINISHED and event.detail.get("keyed")
        if keyed or event.kind is EventKind.RUN_QUEUED:  # its unit may have admitted runs: start them
            self._leases.kick()
        if event.kind is EventKind.RUN_FINISHED:
            parent = event.detail.get("parent")
            if parent:  # a child came to rest: a parent paused waiting on it goes on
                await self.children.settle(parent)
            if event.detail.get("on_child"):  # a child may have rested while its parent paused
                await self.children.settle(event.run_id)

    async def _recovered(self, run: Run, admitted: bool = False) -> None:
        """`run` was taken over from a process that stopped (its lease lapsed), or admitted
        from its key's queue for whoever takes it (`admitted`): continue (start) it."""
        if not admitted:
            self.store.events.audit(actor=ENGINE_ACTOR, action="recover", run_id=run.id,
                                    details={"owner": self.owner})  # fmt: skip
        try:
            ready = self.readiness.for_run(run)
        except BatonError as exc:
            why = f"recovery failed: {exc.message}"
            with contextlib.suppress(BatonError), self.store.transaction() as tx:
                tx.transition(Transition(
                    run.id,
                    RunStatus.FAILED,
                    actor=ENGINE_ACTOR,
                    reason=why,
                    expected_version=run.version,
                    allowed_from=[RunStatus.RUNNING],
                ))
                self.notifier.rest(tx, run, RunStatus.FAILED, reason=why)
            return
        await self.executions.launch(run, ready)

    # -- reading -----------------------------------------------------------------------------
    def args_of(self, run: Run) -> dict[str, Any]:
        return self.readiness.args_of(run)

    def plan(self, run_id: str) -> Plan:
        run = self.store.runs.get_run(run_id)
        ready = self.readiness.for_run(run, to_run=False)
        lineage = self.store.steps.lineage(run.id)
        index = self._index(run.id, self.store.steps.journal(lineage), ready.prepared)
        return plan_run(run, ready.prepared, ready.definitions, input_digests(ready.args), index)

    def _index(self, run_id: str, entries: list[JournalEntry], prepared: PreparedWorkflow) -> JournalIndex:
        """The cache scope a resume of `run_id` would see (what has expired included)."""
        index = JournalIndex(run_id, entries)
        return apply_retention(index, prepared, self.config.cache_retention, time.time())

    def summary(self, run_id: str | Run) -> RunSummary:
        """The run's node table and output; pass the `Run` itself to save reading it again."""
        run = run_id if isinstance(run_id, Run) else self.store.runs.get_run(run_id)
        entries = self.store.steps.journal([run.id])
        try:
            prepared: PreparedWorkflow | None = prepare(self.catalog.get(run.workflow), self.tools)
        except BatonError:
            prepared = None  # the workflow is gone or broken: the table still shows what ran
        digest = final_output_digest(prepared, entries)
        output = self.store.blobs.get_blob(digest).decode("utf-8", errors="replace") if digest else None
        children = self.children_of(run, prepared)
        return summarize(run, prepared, entries, output, now=time.time(), children=children)

    def children_of(self, run: Run, prepared: PreparedWorkflow | None) -> list[Run]:
        """The child runs of `run`'s `workflow:` steps, newest first (no query for a workflow
        without such steps)."""
        if prepared is not None and not any(pn.kind == "workflow" for pn in prepared.nodes.values()):
            return []
        return self.store.runs.child_runs([run.id])

    def inspect(self, run: Run, *, plan: bool = True, shown: Shown | None = None) -> RunDetail:
        """The run seen whole (its page): the node table with timing, verdicts, outputs'
        digests and dependencies; with `plan`, for a run resting failed, paused or
        needs_attention, what a resume would do; with `shown`, a big run's nodes are detailed
        only as far as asked (the others counted). One journal read: of the lineage when
        planning, else its outline (no key components: a 5,000-node run's page read them
        for nothing); the workflow's preparation is cached."""
        try:
            prepared: PreparedWorkflow | None = prepare(self.catalog.get(run.workflow), self.tools)
        except BatonError:
            prepared = None  # the workflow is gone or broken: the page still shows what ran
        children = self.children_of(run, prepared)
        if not (plan and prepared is not None and run.status in PLANNED):  # no key is looked up
            return inspect_run(run, prepared, self.store.steps.journal_outline([run.id]), children=children,
                               shown=shown)
        entries = self.store.steps.journal(self.store.steps.lineage(run.id))
        try:
            ready = self.readiness.for_run(run)
            made = plan_run(run, ready.prepared, ready.definitions, input_digests(ready.args),
                            self._index(run.id, entries, ready.prepared))
        except BatonError as exc:
            return inspect_run(run, prepared, entries, plan_error=exc.message, children=children, shown=shown)
        return inspect_run(run, ready.prepared, entries, made, children=children, shown=shown)

    # -- starting ----------------------------------------------------------------------------
    def check_start(self, workflow: str, args: Mapping[str, Any]) -> None:
        """Raise what `start_run` would refuse these args with (inputs, tools, secrets), before
        the caller changes anything else (option 2 of the fresh-run prompt abandons a run first)."""
        self.readiness.ready(workflow, args)

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
        started_by: str | None = None,
        scheduled_for: float | None = None,
        alongside: Starting | None = None,
        concurrency: Concurrency | None = None,
        parent_run: str | None = None,
        parent_node: str | None = None,
        parent_key: str | None = None,
    ) -> Run:
        """`origin_event`: `"<platform>:<event_id>"` of the chat command asking for it, so a
        redelivery of that command finds this run (`Store.command_runs`). A run nobody typed
        says how it started (`started_by`: `schedule:<id>`) and, for a schedule's fire, its due
        time (`scheduled_for`). `alongside(tx, run)`: the caller's writes in the unit of work
        that creates the run (a schedule's fire row: a compare-and-swap that, lost, creates
        nothing). `concurrency`: the run's key and policy, instead of its workflow's
        `concurrency:` (a schedule's `schedule:<id>`). A keyed run is admitted or queued in the
        unit that creates it (`core/store/admission.py`): a `queued` run is returned without
        executing; it starts when a slot frees (here, or in whichever process takes it over).
        `parent_run`, `parent_node`, `parent_key`: a child run's parent, the `workflow:` step
        that starts it and that step's cache key (`subruns.py`)."""
        ready = self.readiness.ready(workflow, args)
        policy = concurrency or concurrency_of(ready.workflow, ready.args, limits=self.config.render)
        if resume_from is not None:
            self.store.runs.get_run(resume_from)  # RunNotFound before anything is created
        start = RunStart(
            workflow=workflow, args=args, platform=platform, conversation=conversation, thread=thread,
            requester=requester, resume_from=resume_from, origin_event=origin_event,
            started_by=started_by, scheduled_for=scheduled_for, alongside=alongside,
            parent_run=parent_run, parent_node=parent_node, parent_key=parent_key,
        )  # fmt: skip
        with self.store.transaction() as tx:  # args blob, run and `start` audit row: one change
            written = self._create(tx, start, ready, policy)
        return await self.begin(Created(written(), ready, policy))

    async def start_runs(self, starts: Sequence[RunStart], *, share: bool = False) -> list[Run | BatonError]:
        """`create_runs`, then each created run begins (`begin`) at once."""
        return [await self.begin(c) if isinstance(c, Created) else c
                for c in self.create_runs(starts, share=share)]  # fmt: skip

    def create_runs(self, starts: Sequence[RunStart], *, share: bool = False) -> list[Created | BatonError]:
        """Many runs created in ONE commit (`Store.batch`: a tick's fires), each in a unit of
        its own as `start_run` writes it (its `alongside` writes, its admission; `Batch.units`:
        the units of runs without a concurrency key travel together). Per start, in order:
        the run created (committed; `begin` starts its execution: a caller creating many
        batches begins them after the last, so no execution's launch delays a later batch),
        or the `BatonError` that kept it from being created (its workflow gone, its
        `alongside` CAS lost, refused by its key's limit; with `share`, `FireBusy`: another
        replica is firing it); a store error fails the whole batch (nothing was written)."""
        results: list[Created | BatonError | None] = [None] * len(starts)
        readied: dict[int, tuple[Ready, Concurrency | None]] = {}
        for i, start in enumerate(starts):
            try:
                ready = self.readiness.ready(start.workflow, start.args)
                policy = start.concurrency or concurrency_of(ready.workflow, ready.args,
                                                             limits=self.config.render)  # fmt: skip
            except BatonError as exc:
                results[i] = exc
                continue
            readied[i] = (ready, policy)
        written: dict[int, Callable[[], Run]] = {}
        blobs = {canonical_json(ready.args) for ready, _ in readied.values()}
        order = list(readied)
        # the args first, committed on their own: a blob is content-addressed, so a batch's
        # units find theirs written and never wait for a peer replica's batch that holds an
        # uncommitted copy of the same args (PostgreSQL); a batch that fails leaves them behind
        with self.store.transaction() as tx:
            for data in sorted(blobs, key=digest_bytes):
                tx.put_blob(data)
        with self.store.batch() as batch:
            builds = [functools.partial(self._create, start=starts[i], ready=readied[i][0],
                                        policy=readied[i][1]) for i in order]  # fmt: skip
            for i, outcome in zip(order, batch.units(builds, share=share), strict=True):
                if isinstance(outcome, BatonError):
                    results[i] = outcome
                else:
                    written[i] = outcome  # its unit was applied
        for i, run_of in written.items():  # committed: now they may run
            ready, policy = readied[i]
            results[i] = Created(run_of(), ready, policy)
        return [r for r in results if r is not None]

    def _create(
        self, tx: UnitOfWork, start: RunStart, ready: Ready, policy: Concurrency | None
    ) -> Callable[[], Run]:
        """The writes that create `start`'s run in `tx`; the run as the unit left it (once
        the unit is applied: admitted or queued when keyed)."""
        digest = tx.put_blob(canonical_json(ready.args))
        run = tx.create_run(NewRun(
            workflow=ready.workflow.name,
            platform=start.platform,
            conversation=start.conversation,
            thread=start.thread,
            requester=start.requester,
            args_digest=digest,
            resumed_from=start.resume_from,
            status=RunStatus.RUNNING,
            lease_owner=self.owner,
            lease_seconds=self.config.lease_seconds,
            origin_event=start.origin_event,
            started_by=start.started_by,
            scheduled_for=start.scheduled_for,
            concurrency=policy,
            parent_run=start.parent_run,
            parent_node=start.parent_node,
            parent_key=start.parent_key,
        ))
        details = {"workflow": ready.workflow.name, "args": handle(digest), "resume_from": start.resume_from}
        if start.started_by is not None:
            details["started_by"] = start.started_by
        if policy is not None:
            details["concurrency"] = policy.key
        tx.audit(actor=start.requester, action="start", run_id=run.id, details=details)
        if start.alongside is not None:
            start.alongside(tx, run)
        if policy is None:
            return lambda: run
        created = tx.created(run.id)
        return lambda: created.value  # admitted, or queued

    async def begin(self, created: Created) -> Run:
        """A run `create_runs` created (committed): queued (told), or executing."""
        run, ready, policy = created.run, created.ready, created.policy
        if policy is not None:
            await self.admitted_elsewhere(policy)
            if run.status is RunStatus.QUEUED:
                await self.executions.emit(EventKind.RUN_QUEUED, run.id, run_status=run.status.value,
                                           key=policy.key)  # fmt: skip
                return run
        await self.executions.launch(run, ready)
        return run

    async def admitted_elsewhere(self, policy: Concurrency | None = None) -> None:
        """After a start with `cancel_running`: stop our executions of the runs it cancelled now
        (other processes' heartbeats stop theirs). Runs admitted for anyone are taken over when
        a keyed run's rest or queueing is told (`_on_event`), or by any recovery tick."""
        if policy is not None and policy.on_limit is OnLimit.CANCEL_RUNNING:
            await self._leases.heartbeat()


    async def wait(self, run_id: str, timeout: float | None = None) -> Run:
        """Until the run rests (completed, failed, paused, needs_attention, cancelled)."""
        return await self.executions.wait(run_id, timeout)

    # -- acting on a run (`run_actions.py`) ------------------------------------------------------
    async def resume(self, run_id: str, *, actor: str) -> Run:
        """failed | paused (no gate waiting) | needs_attention -> running, then continue."""
        return await self.actions.resume(run_id, actor=actor)

    async def approve(
        self, run_id: str | Run, *, actor: str, comment: str | None = None, gate: Gate | None = None,
        args: Mapping[str, Any] | None = None, decision: str | None = None,
        outcome: Mapping[str, Any] | None = None, timed_out: bool = False,
        alongside: Alongside | None = None,
    ) -> Run:  # fmt: skip
        """paused at a gate -> approved, running, outright (people vote: `vote`): the arguments
        become one `Decision` (`RunActions.approve`, `GateKeeper.approve`); `decision` and
        `outcome`: the choice decided and its values; `timed_out`: by the gate's `on_timeout`,
        not by a person; `alongside`: the caller's writes in the decision's unit of work (a
        timeout's: `core/commands/deadlines.py`)."""
        decided = Decision(actor, True, comment, decision, outcome, timed_out=timed_out, alongside=alongside)
        return await self.actions.approve(run_id, decided, gate=gate, args=args)

    async def vote(self, ballot: Ballot, *, run: Run | None = None, gate: Gate | None = None,
                   args: Mapping[str, Any] | None = None) -> Voted:
        """`ballot` decided here under its gate's policy: the ballot, its audit row and, when it
        completes the decision, the decision, in one unit of work (`RunActions.vote`,
        `GateKeeper.vote`); `run`, `gate`, `args`: what the caller read already."""
        return await self.actions.vote(ballot, run=run, gate=gate, args=args)

    async def reject(self, run_id: str | Run, *, actor: str, reason: str | None = None,
                     fail: bool = False, timed_out: bool = False, alongside: Alongside | None = None) -> Run:
        """paused at a gate -> rejected, cancelled (`fail`: failed, a gate's `on_timeout: fail`;
        `timed_out`: by the gate's `on_timeout`, not by a person; `alongside`: the caller's
        writes in the decision's unit of work): one `Decision` (`RunActions.reject`)."""
        decided = Decision(actor, False, reason, fail=fail, timed_out=timed_out, alongside=alongside)
        return await self.actions.reject(run_id, decided)

    async def abandon(self, run_id: str | Run, *, actor: str, reason: str | None = None) -> Run:
        """failed | paused | needs_attention | running -> cancelled (`RunActions.abandon`)."""
        return await self.actions.abandon(run_id, actor=actor, reason=reason)

    async def cancel(self, run_id: str, *, actor: str) -> Run:
        """running -> cancelled; in-flight steps are stopped (here, or by their owner's heartbeat)."""
        return await self.actions.cancel(run_id, actor=actor)

    async def resolve(
        self, run_id: str, node_id: str, action: str, *, actor: str, output: str | None = None
    ) -> Run:
        """Settle an unsafe step that may have run: done (with output) | retry | fail."""
        return await self.actions.resolve(run_id, node_id, action, actor=actor, output=output)

    def invalidate(self, run_id: str, node_id: str, *, downstream: bool, actor: str) -> list[str]:
        """Drop `node_id`'s result (and its dependents') for the next resume; soft and audited."""
        return self.actions.invalidate(run_id, node_id, downstream=downstream, actor=actor)
