"""`QueueStepRunner`: the `StepRunner` whose steps run on `baton worker` processes.

Where `LocalStepRunner` writes `started` and runs the step here, this one hands the step to
the queue (`RemoteDispatcher.hand_off`: a `queued` entry and its job in one transaction,
shared by every step that became ready in the same scheduling tick)
and waits for the worker's result in the journal. Ordering, the cache, approvals and
retries stay the scheduler's (`RunExecutor`).

Recovery of a run whose replica died: the run's open entries (`queued` or `started`) are
adopted, not re-dispatched: the new owner waits for them like their first owner did. If
their job is gone, a `queued` entry is withdrawn and dispatched again (it never ran) and
a `started` one follows the replay rules (`Execution.orphaned`: an unsafe step stops the run
in `needs_attention`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from core.engine.distributed.dispatcher import RemoteDispatcher, Settled
from core.engine.distributed.jobs import NodeJob
from core.engine.events import EventKind
from core.engine.executor import RunnerFactory
from core.engine.node_values import decode_item
from core.engine.nodes import RenderedNode
from core.engine.prepared import PreparedNode
from core.engine.steps import Attempt, Attention, Completed, Execution, Failed, Step
from core.errors import ReplayUnsafe
from core.store.port import StepEntry
from core.store.records import JournalEntry, NodeStatus

#: How often one step is dispatched again after its job vanished before it started.
MAX_REDISPATCH = 5


class QueueStepRunner:
    def __init__(self, execution: Execution, dispatcher: RemoteDispatcher) -> None:
        self.x = execution
        self.dispatcher = dispatcher
        self._adopted: dict[str, JournalEntry] = {}  # node -> its open entry, waited for when it runs

    def adopt(self, node: PreparedNode, entry: JournalEntry) -> ReplayUnsafe | None:
        """An entry of this run is `queued` or `started` with no result: wait for it when
        the node runs (`run`), do not run it a second time."""
        self._adopted[node.id] = entry
        return None

    async def run(self, step: Step, rendered: RenderedNode, attempt: int) -> Attempt:
        """One attempt on a worker (dispatched again while its job vanishes unstarted)."""
        pn = step.node
        adopted = self._adopted.pop(pn.id, None)
        if adopted is not None:
            await self.x.emit(EventKind.NODE_STARTED, pn.id, attempt=adopted.attempt, adopted=True)
            outcome = self._conclude(step, await self._settle(adopted.id, None))
            if outcome is not None:
                return outcome
            attempt = max(attempt, adopted.attempt + 1)
        for _ in range(MAX_REDISPATCH):
            entry_id, job_id = await self._hand_off(step, rendered, attempt)
            await self.x.emit(EventKind.NODE_STARTED, pn.id, attempt=attempt, reason=step.notes.reason)
            outcome = self._conclude(step, await self._settle(entry_id, job_id))
            if outcome is not None:
                return outcome
            attempt += 1
        return Failed(f"step `{pn.id}` was handed to workers {MAX_REDISPATCH} times and never started")

    async def _hand_off(self, step: Step, rendered: RenderedNode, attempt: int) -> tuple[int, int]:
        """The step's `queued` entry and job, written with the other steps ready at the same
        time. Stopped before its batch is written, the step is never handed off; stopped just
        after, it is withdrawn when a person cancelled the run (it runs on when the engine
        merely stops, and the run's next owner adopts it)."""
        pn = step.node
        handoff = StepEntry(
            run_id=self.x.run_id,
            node_id=pn.id,
            cache_key=step.key,
            components=step.components,
            attempt=attempt,
            idempotency_key=step.idempotency_key,
            notes=step.notes,
        )
        ticket = self.dispatcher.hand_off(handoff, self._job(step, rendered, attempt), self.x.journal.flush)
        try:
            return await asyncio.shield(ticket)
        except asyncio.CancelledError:
            if not ticket.done():
                ticket.cancel()
            elif not ticket.cancelled() and ticket.exception() is None and self.x.cancel_note is not None:
                await self.dispatcher.withdraw(*ticket.result(), self.x.cancel_note)
            raise

    def _job(self, step: Step, rendered: RenderedNode, attempt: int) -> Callable[[int], NodeJob]:
        pn = step.node

        def job_for(entry_id: int) -> NodeJob:
            return NodeJob(
                entry_id=entry_id,
                run_id=self.x.run_id,
                node_id=pn.id,
                attempt=attempt,
                idempotency_key=step.idempotency_key,
                timeout=pn.timeout,
                rendered=rendered,
                output=pn.node.output,
                artifact_globs=tuple(pn.node.artifacts),
                restore=dict(self.x.artifacts),
                workflow_dir=str(self.x.workflow_dir),
                identity={k: step.components[k] for k in ("tool", "provider") if k in step.components},
                env=dict(pn.env),
                secrets=pn.secrets,
                network=pn.network,
            )

        return job_for

    async def _settle(self, entry_id: int, job_id: int | None) -> Settled:
        """Wait for the worker's result. When a person cancels the run, the step is told to
        stop (withdrawn if still queued); when the engine merely stops, it runs on."""
        try:
            return await self.dispatcher.settle(entry_id, job_id)
        except asyncio.CancelledError:
            if self.x.cancel_note is not None:
                await self.dispatcher.withdraw(entry_id, job_id, self.x.cancel_note)
            raise

    def _conclude(self, step: Step, settled: Settled) -> Attempt | None:
        """What a settled (or abandoned) entry means for this attempt; None: dispatch again."""
        pn, entry = step.node, settled.entry
        if settled.never_started:
            return None
        if settled.lost:  # `started`, and its worker is gone: the replay rules decide
            unsafe = self.x.orphaned(pn, entry)
            return None if unsafe is None else Attention(unsafe)
        if entry.status is NodeStatus.COMPLETED and entry.output_digest is not None:
            if entry.cache_key != step.key:
                return None  # an adopted result of an older definition: run the current one
            data = settled.output
            if data is None:  # read without its output (a lost entry settled meanwhile)
                data = self.x.setup.store.blobs.get_blob(entry.output_digest)
            text = data.decode("utf-8")
            return Completed(
                entry.output_digest,
                decode_item(pn, text),
                seconds=(entry.finished_at or entry.started_at) - entry.started_at,
                tokens=entry.tokens_in + entry.tokens_out,
                artifacts=entry.artifacts,
            )
        return Failed(entry.error or f"step `{pn.id}` failed on a worker")


def queue_runner_factory(dispatcher: RemoteDispatcher) -> RunnerFactory:
    """An `Engine(runners=…)` whose steps run on workers through `dispatcher`."""

    def build(execution: Execution) -> QueueStepRunner:
        return QueueStepRunner(execution, dispatcher)

    return build
