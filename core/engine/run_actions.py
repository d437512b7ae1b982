"""`RunActions`: what people do to an existing run: resume, approve, reject, abandon,
cancel, resolve, invalidate.

Each action checks the run's state to give a clear refusal (an error carrying the run, its
status, who changed it and what is allowed next), then changes it with one compare-and-swap
or one unit of work (the store raises `RunNotResumable` naming who won a race), audits it
with the actor, and, when the run goes back to `running`, launches an execution. Composed
by `Engine` (`core/engine/engine.py`) from its parts: the store, the gates (`gates.py`), the
workflows read before a status changes (`readiness.py`) and this process's executions
(`executions.py`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from core.engine.ballots import Ballot
from core.engine.contracts import check_output
from core.engine.events import EventKind
from core.engine.executions import Executions
from core.engine.gates import Decision, GateKeeper, Voted
from core.engine.journal_index import INVALIDATED_MARKER, MARKER_KEY
from core.engine.mapping import split_item_id
from core.engine.readiness import Readiness, Ready
from core.errors import Next, RunNotFound, RunNotResumable, RunStateError, UsageError
from core.redaction import Redactor
from core.store.cas import who_changed
from core.store.port import Blobs, Events, Gates, Journal, Runs, Transactions, Transition
from core.store.records import Gate, GateStatus, JournalEntry, NodeStatus, Run, RunStatus
from core.workflows.validation import did_you_mean
from core.workflows.validation import downstream as downstream_of

if TYPE_CHECKING:
    from core.engine.subruns import ChildRuns

RESUMABLE = (RunStatus.FAILED, RunStatus.PAUSED, RunStatus.NEEDS_ATTENTION)
ABANDONABLE = (
    RunStatus.QUEUED,
    RunStatus.FAILED,
    RunStatus.PAUSED,
    RunStatus.NEEDS_ATTENTION,
    RunStatus.RUNNING,
    RunStatus.PENDING,
)


class ActionsStore(Transactions, Protocol):
    """The store roles `RunActions` uses."""

    @property
    def runs(self) -> Runs: ...
    @property
    def gates(self) -> Gates: ...
    @property
    def steps(self) -> Journal: ...
    @property
    def blobs(self) -> Blobs: ...
    @property
    def events(self) -> Events: ...


class RunActions:
    def __init__(
        self,
        *,
        store: ActionsStore,
        gates: GateKeeper,
        readiness: Readiness,
        executions: Executions,
        children: ChildRuns | None = None,
        owner: str,
        lease_seconds: float,
        redactor: Redactor,
    ) -> None:
        self.store = store
        self.gates = gates
        self.readiness = readiness
        self.executions = executions
        self.children = children  # a parent's end ends its children (`subruns.py`)
        self.owner = owner  # the lease a run going back to `running` takes
        self.lease_seconds = lease_seconds
        self.redactor = redactor

    def _hidden(self, text: str | None) -> str | None:
        """A person's comment or reason as it is kept (gate, run, audit): secrets hidden."""
        return None if text is None else self.redactor.redact(text)

    async def _to_running(self, run: Run, ready: Ready, *, actor: str, allowed: tuple[RunStatus, ...]) -> Run:
        running = self.store.runs.transition(Transition(
            run.id,
            RunStatus.RUNNING,
            actor=actor,
            expected_version=run.version,
            allowed_from=allowed,
            lease_owner=self.owner,
            lease_seconds=self.lease_seconds,
        ))
        await self.start_or_queue(running, ready)
        return running

    async def start_or_queue(self, run: Run, ready: Ready) -> None:
        """Execute a run this process moved to `running`, or tell that admission queued it."""
        if run.status is RunStatus.QUEUED:
            key = run.concurrency.key if run.concurrency is not None else None
            await self.executions.emit(EventKind.RUN_QUEUED, run.id, run_status=run.status.value, key=key)
            return
        await self.executions.launch(run, ready)

    async def resume(self, run_id: str, *, actor: str) -> Run:
        """failed | paused (no gate waiting) | needs_attention -> running, then continue."""
        run = self.store.runs.get_run(run_id)
        if run.status.finished:
            raise refuse_finished(run, "resumed")
        if run.status in (RunStatus.RUNNING, RunStatus.PENDING, RunStatus.QUEUED):
            raise RunNotResumable(
                f"run {run.id} is already {run.status.value} ({who_changed(run)})",
                run_id=run.id,
                status=run.status.value,
                by=run.status_by,
                next_step=Next.WATCH,
            )
        gate = self.gates.waiting(run)
        if gate is not None:
            raise RunNotResumable(
                f"run {run.id} waits for approval at `{gate.node_id}`",
                run_id=run.id,
                status=run.status.value,
                by=run.status_by,
                next_step=Next.DECIDE,
            )
        ready = self.readiness.for_run(run)
        running = await self._to_running(run, ready, actor=actor, allowed=RESUMABLE)
        self.store.events.audit(
            actor=actor, action="resume", run_id=run.id, details={"from": run.status.value}
        )
        return running

    async def approve(self, run_id: str | Run, decision: Decision, *, gate: Gate | None = None,
                      args: Mapping[str, Any] | None = None) -> Run:
        """paused at a gate -> approved, running. A `Run` the caller just read, the `gate` it
        found waiting in it and the run's `args` (`args_of(run)`) save reading them again
        (stale copies lose the CAS below like any concurrent change; args never change)."""
        run = run_id if isinstance(run_id, Run) else self.store.runs.get_run(run_id)
        decision = dataclasses.replace(decision, comment=self._hidden(decision.comment))
        gate = self.gates.to_decide(run, gate)
        ready = self.readiness.for_run(run, args)
        running = self.gates.approve(run, gate, decision)
        emit = self.executions.emit
        await emit(EventKind.GATE_DECIDED, run.id, gate.node_id, approved=True, by=decision.actor,
                   how="timeout" if decision.timed_out else "approve", decision=decision.choice or "approve")
        await self.start_or_queue(running, ready)
        return running

    async def reject(self, run_id: str | Run, decision: Decision) -> Run:
        """paused at a gate -> rejected, cancelled (`decision.fail`: failed); a `Run` the
        caller read saves reading it."""
        run = run_id if isinstance(run_id, Run) else self.store.runs.get_run(run_id)
        decision = dataclasses.replace(decision, comment=self._hidden(decision.comment))
        gate = self.gates.to_decide(run)
        cancelled, why = self.gates.reject(run, gate, decision)
        emit = self.executions.emit
        how = "timeout" if decision.fail or decision.timed_out else "reject"
        await emit(EventKind.GATE_DECIDED, run.id, gate.node_id, approved=False, by=decision.actor, how=how,
                   decision="fail" if decision.fail else "reject")
        await emit(EventKind.NODE_FAILED, run.id, gate.node_id, error=why)
        await emit(EventKind.RUN_FINISHED, run.id, run_status=cancelled.status.value, reason=why,
                   keyed=run.concurrency is not None)
        return cancelled

    async def vote(self, ballot: Ballot, *, run: Run | None = None, gate: Gate | None = None,
                   args: Mapping[str, Any] | None = None) -> Voted:
        """`ballot` decided on its gate (`GateKeeper.vote`: the policy resolved and evaluated,
        and the ballot, its audit and any decision written in one unit of work); a vote that
        completes an approval launches the run again, one that rejects ends it. `run`, `gate`
        and `args`: what the caller read already (a stale copy loses the CAS like any
        concurrent change). A person's comment is kept with secrets hidden."""
        run = run if run is not None and run.id == ballot.run else self.store.runs.get_run(ballot.run)
        gate = self._targeted(run, self.gates.to_decide(run, gate), ballot.node)
        ballot = dataclasses.replace(ballot, comment=self._hidden(ballot.comment) or "")
        ready = None
        if not ballot.rejects:  # what a completed quorum needs, read before the unit
            ready = self.readiness.for_run(run, args)
        voted = self.gates.vote(run, gate, ballot)
        emit = self.executions.emit
        if voted.decides and voted.why is None:  # it opened the gate: the run goes on
            await emit(EventKind.GATE_DECIDED, run.id, gate.node_id, approved=True, by=ballot.user,
                       how="approve", decision=voted.tally.decision or "approve")  # fmt: skip
            assert ready is not None
            await self.start_or_queue(voted.run, ready)  # or queued, when it gave its slot back
        elif voted.decides:  # it rejected the gate: the run ends
            await emit(EventKind.GATE_DECIDED, run.id, gate.node_id, approved=False, by=ballot.user,
                       how="reject", decision="reject")  # fmt: skip
            why = voted.why or ""
            await emit(EventKind.NODE_FAILED, run.id, gate.node_id, error=why)
            await emit(EventKind.RUN_FINISHED, run.id, run_status=voted.run.status.value, reason=why,
                       keyed=run.concurrency is not None)
        return voted

    def _targeted(self, run: Run, gate: Gate, node: str | None) -> Gate:
        """The waiting `gate`, when it is the one a ballot names (`node`; None: any); else the
        refusal: that gate was decided, or does not wait now."""
        if node is None or gate.node_id == node:
            return gate
        try:
            named = self.store.gates.get_gate(run.id, node)
        except RunNotFound:
            named = None
        if named is not None and named.status is not GateStatus.WAITING:
            raise self.gates.refusal(run, named)
        raise RunNotResumable(
            f"run {run.id} waits at `{gate.node_id}`, not at `{node}`",
            run_id=run.id, status=run.status.value, by=run.status_by, next_step=Next.DECIDE,
        )  # fmt: skip

    async def _end(
        self, run: Run, *, actor: str, reason: str, allowed: tuple[RunStatus, ...], action: str, note: str,
        expected_version: int | None = None,
    ) -> Run:
        with self.store.transaction() as tx:  # run CAS, its waiting gates closed, audit row
            ended = tx.transition(Transition(
                run.id, RunStatus.CANCELLED, actor=actor, reason=reason, allowed_from=allowed,
                expected_version=expected_version,
            ))
            paused = run.status is RunStatus.PAUSED
            closing = tx.close_gates(run.id, by=actor, comment=reason) if paused else None
            tx.audit(actor=actor, action=action, run_id=run.id, details={"from": run.status.value})
            self.executions.notifier.rest(tx, run, RunStatus.CANCELLED, reason=reason)
        cancelled = ended.value
        for gate in closing.value if closing is not None else []:
            await self.executions.emit(
                EventKind.GATE_DECIDED, run.id, gate.node_id, approved=False, by=actor, how=action
            )
        if run.id in self.executions.active_ids():
            await self.executions.stop_local(run.id, note)
        else:
            await self.executions.emit(
                EventKind.RUN_FINISHED, run.id, run_status=cancelled.status.value, reason=reason,
                keyed=run.concurrency is not None, parent=run.parent_run,
            )
        if self.children is not None:
            await self.children.cancel_children(cancelled, actor=actor, why=note)
        return cancelled

    async def abandon(self, run_id: str | Run, *, actor: str, reason: str | None = None) -> Run:
        """failed | paused | needs_attention | running -> cancelled. Given a `Run` the caller
        read, only that version of it is abandoned: a change since (a resume) wins the CAS."""
        exact = isinstance(run_id, Run)
        run = run_id if isinstance(run_id, Run) else self.store.runs.get_run(run_id)
        reason = self._hidden(reason)
        if run.status.finished:
            by = f" ({who_changed(run)})" if run.status is RunStatus.CANCELLED else ""
            raise RunNotResumable(
                f"run {run.id} is already {run.status.value}{by}; there is nothing to abandon",
                run_id=run.id,
                status=run.status.value,
                by=run.status_by,
                workflow=run.workflow,
                next_step=Next.RUN_AGAIN,
            )
        return await self._end(
            run,
            actor=actor,
            reason=reason or f"abandoned by {actor}",
            allowed=ABANDONABLE,
            action="abandon",
            note=f"abandoned by {actor}",
            expected_version=run.version if exact else None,
        )

    async def cancel(self, run_id: str, *, actor: str) -> Run:
        """running | queued -> cancelled; in-flight steps are stopped (here, or by their owner's
        heartbeat); a queued run leaves its key's queue."""
        run = self.store.runs.get_run(run_id)
        if run.status not in (RunStatus.RUNNING, RunStatus.PENDING, RunStatus.QUEUED):
            raise RunNotResumable(
                f"run {run.id} is {run.status.value}, not running",
                run_id=run.id,
                status=run.status.value,
                by=run.status_by,
                next_step=Next.ABANDON if run.status.unfinished else Next.SEE,
            )
        return await self._end(
            run,
            actor=actor,
            reason=f"cancelled by {actor}",
            allowed=(RunStatus.RUNNING, RunStatus.PENDING, RunStatus.QUEUED),
            action="cancel",
            note=f"cancelled by {actor}",
        )

    # -- settling steps ---------------------------------------------------------------------
    def _dangling(self, run: Run, node_id: str) -> JournalEntry:
        entries = self.store.steps.journal([run.id])
        own = [e for e in entries if e.node_id == node_id and e.cache_key != MARKER_KEY]
        if not own or own[-1].status is not NodeStatus.STARTED:
            raise RunStateError(
                f"step `{node_id}` of run {run.id} is not waiting for a decision",
                run_id=run.id,
                status=run.status.value,
                next_step=Next.ATTENTION,
            )
        return own[-1]

    async def resolve(
        self, run_id: str, node_id: str, action: str, *, actor: str, output: str | None = None
    ) -> Run:
        """Settle an unsafe step that may have run: done (with output) | retry | fail."""
        if action not in ("done", "retry", "fail"):
            raise UsageError(f"`{action}` is not a resolution", command="resolve")
        run = self.store.runs.get_run(run_id)
        if run.status is not RunStatus.NEEDS_ATTENTION:
            raise RunNotResumable(
                f"run {run.id} is {run.status.value}; only a run that needs attention has steps to resolve",
                run_id=run.id,
                status=run.status.value,
                by=run.status_by,
                next_step=Next.SEE,
            )
        entry = self._dangling(run, node_id)
        ready = self.readiness.for_run(run)
        item = split_item_id(node_id)  # `deploy[3]`: one item of a map node, settled alone
        node = ready.workflow.node(item[0] if item is not None else node_id)
        details: dict[str, Any] = {"node": node_id, "resolution": action}
        if action == "done":
            text = output if output is not None else ""
            if output is None and node.output.format == "json":
                raise UsageError(
                    f"step `{node_id}` declares JSON output; give it with `--output '{{…}}'`",
                    command="resolve",
                )
            check_output(node_id, text, node.output)  # OutputContractViolation: nothing changes
            digest = self.store.blobs.put_blob(text.encode())
            self.store.steps.journal_finish(
                entry.id, status=NodeStatus.COMPLETED, output_digest=digest
            )  # CAS
            details["output"] = digest
        else:
            verb = "retry" if action == "retry" else "fail"
            self.store.steps.journal_finish(
                entry.id, status=NodeStatus.FAILED, error=f"may have run; {actor} chose {verb}"
            )
        self.store.events.audit(actor=actor, action="resolve", run_id=run.id, details=details)
        if action == "fail":
            why = f"step `{node_id}` marked failed by {actor}"
            with self.store.transaction() as tx:
                marked = tx.transition(Transition(
                    run.id,
                    RunStatus.FAILED,
                    actor=actor,
                    reason=why,
                    expected_version=run.version,
                    allowed_from=(RunStatus.NEEDS_ATTENTION,),
                ))
                self.executions.notifier.rest(tx, run, RunStatus.FAILED, reason=why, node=node_id)
            failed = marked.value
            await self.executions.emit(
                EventKind.RUN_FINISHED, run.id, run_status=failed.status.value, reason=failed.reason,
                keyed=run.concurrency is not None,
            )
            return failed
        return await self._to_running(run, ready, actor=actor, allowed=(RunStatus.NEEDS_ATTENTION,))

    def invalidate(self, run_id: str, node_id: str, *, downstream: bool, actor: str) -> list[str]:
        """Drop `node_id`'s result (and its dependents') for the next resume; soft and audited."""
        run = self.store.runs.get_run(run_id)
        workflow = self.readiness.workflow(run.workflow)
        ids = [n.id for n in workflow.nodes]
        if node_id not in ids:
            guess = did_you_mean(node_id, ids)
            raise UsageError(
                f"workflow `{workflow.name}` has no step `{node_id}`"
                + (f"; did you mean `{guess}`?" if guess else ""),
                command="invalidate",
            )
        below = downstream_of(workflow, node_id) if downstream else set()
        nodes = [n for n in ids if n == node_id or n in below]
        with self.store.transaction() as tx:
            tx.invalidate(run.id, nodes, actor=actor)
            for n in nodes:  # markers (empty cache key): hide lineage copies of these results too
                marker = {"marker": INVALIDATED_MARKER, "by": actor}
                tx.journal_note(run_id=run.id, node_id=n, cache_key=MARKER_KEY, components=marker,
                                error=f"invalidated by {actor}")  # fmt: skip
            tx.audit(
                actor=actor,
                action="invalidate",
                run_id=run.id,
                details={"node": node_id, "downstream": downstream, "nodes": nodes},
            )
        return nodes


def refuse_finished(run: Run, verb: str) -> RunNotResumable:
    """A finished run cannot be `verb` (resumed): its results can seed a new run."""
    return RunNotResumable(
        f"run {run.id} is {run.status.value}; it cannot be {verb}",
        run_id=run.id,
        status=run.status.value,
        by=run.status_by,
        workflow=run.workflow,
        next_step=Next.REUSE,
    )
