"""`RemoteRunExecutor`: the DAG executor with its steps run by `baton worker` processes.

Everything but running a step is `RunExecutor`'s (ordering, cache, approvals, replay rules
at recovery). Where the in-process executor writes `started` and runs the step, this one
hands the step to the queue (`RemoteDispatcher.hand_off`: a `queued` entry and its job in
one transaction) and waits for the worker's result in the journal.

Recovery of a run whose replica died: the run's open entries (`queued` or `started`) are
adopted, not re-dispatched: the new owner waits for them like their first owner did. If
their job is gone, a `queued` entry is withdrawn and dispatched again (it never ran) and
a `started` one follows the replay rules (an unsafe step stops the run in `needs_attention`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from core.engine import replay
from core.engine.distributed.dispatcher import RemoteDispatcher, Settled
from core.engine.distributed.jobs import NodeJob
from core.engine.events import EventKind
from core.engine.executor import INTERRUPTED, RunExecutor, Setup, _Step
from core.engine.node_values import decode_output, node_value
from core.engine.nodes import RenderedNode
from core.engine.prepared import PreparedNode
from core.errors import RunStateError
from core.store.records import JournalEntry, NodeStatus

#: How often one step is dispatched again after its job vanished before it started.
MAX_REDISPATCH = 5
_AGAIN = object()  # the attempt produced nothing: dispatch the step (again)


class RemoteRunExecutor(RunExecutor):
    def __init__(self, setup: Setup, dispatcher: RemoteDispatcher) -> None:
        super().__init__(setup)
        self.dispatcher = dispatcher
        self._adopted: dict[str, JournalEntry] = {}
        self._artifacts: dict[str, str] = {}  # artifacts of steps done so far: path -> digest

    async def _recover(self, pn: PreparedNode, entry: JournalEntry) -> bool:
        """An entry of this run is `queued` or `started` with no result: wait for it, do not
        run it a second time (`_attempt` adopts it)."""
        self._adopted[pn.id] = entry
        return True

    async def _use(self, pn: PreparedNode, entry: JournalEntry) -> None:
        self._artifacts.update(entry.artifacts)
        await super()._use(pn, entry)

    def _job(self, step: _Step, rendered: RenderedNode, attempt: int) -> Callable[[int], NodeJob]:
        pn = step.node

        def job_for(entry_id: int) -> NodeJob:
            return NodeJob(
                entry_id=entry_id,
                run_id=self.run_id,
                node_id=pn.id,
                attempt=attempt,
                idempotency_key=step.idempotency_key,
                timeout=pn.timeout,
                rendered=rendered,
                output=pn.node.output,
                artifact_globs=tuple(pn.node.artifacts),
                restore=dict(self._artifacts),
                workflow_dir=str(self._workflow_dir),
                identity={k: step.components[k] for k in ("tool", "provider") if k in step.components},
                env=dict(pn.env),
                secrets=pn.secrets,
            )

        return job_for

    async def _attempt(self, step: _Step, rendered: RenderedNode, attempt: int) -> str | None:
        """One attempt on a worker; None when it completed (or the run now needs attention)."""
        pn = step.node
        adopted = self._adopted.pop(pn.id, None)
        if adopted is not None:
            await self._emit(EventKind.NODE_STARTED, pn.id, attempt=adopted.attempt, adopted=True)
            outcome = await self._conclude(step, await self._settle(adopted.id, None))
            if outcome is not _AGAIN:
                return outcome  # type: ignore[return-value]
            attempt = max(attempt, adopted.attempt + 1)
        for _ in range(MAX_REDISPATCH):
            entry_id, job_id = self.dispatcher.hand_off(
                run_id=self.run_id,
                node_id=pn.id,
                cache_key=step.key,
                components=step.components,
                attempt=attempt,
                idempotency_key=step.idempotency_key,
                job_for=self._job(step, rendered, attempt),
            )
            await self._emit(
                EventKind.NODE_STARTED, pn.id, attempt=attempt, reason=step.components.get("_reason")
            )
            outcome = await self._conclude(step, await self._settle(entry_id, job_id))
            if outcome is not _AGAIN:
                return outcome  # type: ignore[return-value]
            attempt += 1
        return f"step `{pn.id}` was handed to workers {MAX_REDISPATCH} times and never started"

    async def _settle(self, entry_id: int, job_id: int | None) -> Settled:
        """Wait for the worker's result. When a person cancels the run, the step is told to
        stop (withdrawn if still queued); when the engine merely stops, it runs on."""
        try:
            return await self.dispatcher.settle(entry_id, job_id)
        except asyncio.CancelledError:
            if self.cancel_note is not None:
                await self.dispatcher.withdraw(entry_id, job_id, self.cancel_note)
            raise

    async def _conclude(self, step: _Step, settled: Settled) -> object:
        """What a settled (or abandoned) entry means for this attempt: None (done, or the run
        needs attention), an error text, or `_AGAIN`."""
        pn, entry = step.node, settled.entry
        if settled.never_started:
            return _AGAIN
        if settled.lost:  # `started`, and its worker is gone: the replay rules decide
            if replay.recovery_for(pn.replay) is replay.Recovery.ATTENTION:
                error = replay.replay_unsafe(self.run_id, entry)
                self._attention.append(error)
                await self._emit(EventKind.NODE_ATTENTION, pn.id, reason=error.message, hint=error.hint)
                return None
            with contextlib.suppress(RunStateError):  # settled meanwhile: it re-runs anyway
                self.store.journal_finish(
                    entry.id, status=NodeStatus.FAILED, error=INTERRUPTED.format(cls=pn.replay)
                )
            return _AGAIN
        if entry.status is NodeStatus.COMPLETED and entry.output_digest is not None:
            if entry.cache_key != step.key:
                return _AGAIN  # an adopted result of an older definition: run the current one
            text = self.store.get_blob(entry.output_digest).decode("utf-8")
            self._values[pn.id] = node_value(pn, decode_output(pn, text))
            self._artifacts.update(entry.artifacts)
            await self._emit(
                EventKind.NODE_COMPLETED,
                pn.id,
                seconds=round((entry.finished_at or entry.started_at) - entry.started_at, 3),
                tokens=entry.tokens_in + entry.tokens_out,
            )
            self._release(pn.id, entry.output_digest)
            return None
        return entry.error or f"step `{pn.id}` failed on a worker"
