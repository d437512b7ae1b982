"""The worker side of distributed execution: run one `NodeJob` and settle its journal entry.

    claim   queued -> started (CAS)           only one execution of an entry ever begins
    run     execute_node (the same leaf code as in-process), check the output contract
    settle  output blob, artifacts, `completed` or `failed`: one transaction (settled once)

A job whose entry is not `queued` any more (claimed by another worker, withdrawn by a
replica, a redelivered job) does nothing. A job names the tool code and provider its cache
key was computed with (`NodeJob.identity`); a worker whose own differ (another deploy, other
settings) fails the step rather than journal a result under a key that does not describe it.
Tool modules changed on disk are imported again first, as the replicas do.

If the worker is stopped while the step runs (grace period over), the step's process group
is killed and the entry stays `started`: the run's replica applies the replay rules, as
after a crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from cachetools import LRUCache

from core.engine.cache_key import UNREGISTERED
from core.engine.contracts import check_output
from core.engine.distributed.jobs import NodeJob
from core.engine.nodes import NodeContext, NodeResult, execute_node
from core.engine.providers import ProviderRegistry
from core.engine.step_env import StepEnvironment
from core.engine.tools import ToolRegistry
from core.engine.workdirs import (
    ArtifactOutside,
    ArtifactsTooLarge,
    RunDirs,
    capture_artifacts,
    missing_artifacts,
    restore_artifacts,
    run_dirs,
)
from core.errors import BatonError, NodeFailed
from core.store.records import NodeStatus

log = logging.getLogger("baton.queue")
#: runs whose directories a worker remembers having created
_KNOWN_RUNS = 256
_T = TypeVar("_T")


class WorkerStore(Protocol):
    def get_blobs(self, digests: list[str]) -> dict[str, bytes]: ...


class StepJournal(Protocol):
    """The worker's writes per step (`core/store/worker_journal.py`), on its event loop."""

    async def claim(self, entry_id: int) -> bool: ...

    async def settle(
        self,
        entry_id: int,
        *,
        status: NodeStatus,
        output: bytes | None = None,
        error: str | None = None,
        tokens_in: int = 0,
        tokens_out: int = 0,
        artifacts: Mapping[str, bytes] | None = None,
        job_id: int | None = None,
    ) -> str | None: ...


async def _to_end(write: Awaitable[_T]) -> _T:
    """A journal write that, stopped meanwhile, still runs to its end (a claim or a result
    half-known to the job would be a claim or a result nobody acts on)."""
    done = asyncio.ensure_future(write)
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await done
        raise


def _since(began: float) -> float:
    return round(time.monotonic() - began, 3)


def local_identity(job: NodeJob, tools: ToolRegistry, providers: ProviderRegistry) -> dict[str, Any]:
    """The `tool` / `provider` key components this worker would give the job's step."""
    rendered = job.rendered
    if rendered.kind == "tool" and rendered.tool is not None:
        return {"tool": {rendered.tool: tools.identity(rendered.tool) or UNREGISTERED}}
    if rendered.kind == "prompt":
        return {"provider": providers.identity(rendered.provider)}
    return {}


@dataclass
class NodeWorker:
    store: WorkerStore  # artifacts to restore
    journal: StepJournal  # claims and results
    providers: ProviderRegistry
    tools: ToolRegistry
    data_dir: Path
    #: this worker's step environment: its own secrets source and the runtime's redactor
    environment: StepEnvironment
    name: str = "worker"
    max_output: int = 1_000_000  # bytes of a step's output kept (BATON_MAX_OUTPUT_BYTES of the worker)
    max_output_file: int = 100_000_000  # bytes of that file kept (BATON_MAX_OUTPUT_FILE_BYTES)
    max_artifacts: int = 100_000_000  # bytes of one step's artifacts kept (BATON_MAX_ARTIFACT_BYTES)
    _run_dirs: LRUCache[str, RunDirs] = field(
        default_factory=lambda: LRUCache(_KNOWN_RUNS), init=False, repr=False)

    async def run(
        self, job: NodeJob, *, job_id: int | None = None, claimed: bool | None = None
    ) -> NodeStatus | None:
        """Execute the job's step; the status it settled with, or None when it was not ours.
        `claimed`: the outcome of the claim the job's fetch made (`WorkerConnector`); None:
        claimed here first. `job_id`: the result statement also finishes that job."""
        if claimed is None:
            claimed = await _to_end(self.journal.claim(job.entry_id))
        extra = {"run_id": job.run_id, "node_id": job.node_id, "worker": self.name}
        if not claimed:
            log.info("step already claimed or withdrawn", extra={"action": "skip_job", **extra})
            return None
        refused = self._refusal(job)
        if refused is not None:
            failed = self.journal.settle(job.entry_id, status=NodeStatus.FAILED, error=refused, job_id=job_id)
            await _to_end(failed)
            log.warning(refused, extra={"action": "identity_mismatch", **extra})
            return NodeStatus.FAILED
        dirs = self._dirs(job.run_id)
        missing = missing_artifacts(dirs.root, job.restore)
        if missing:
            blobs = await asyncio.to_thread(self.store.get_blobs, sorted(set(missing.values())))
            restore_artifacts(dirs.root, {path: blobs[digest] for path, digest in missing.items()})
        ctx = NodeContext(
            run_id=job.run_id,
            node_id=job.node_id,
            workdir=dirs.root,
            artifacts_dir=dirs.artifacts,
            idempotency_key=job.idempotency_key,
            timeout=job.timeout,
            environment=self.environment,
            attempt=job.attempt,
            env=job.env,
            secrets=job.secrets,
            workflow_dir=Path(job.workflow_dir) if job.workflow_dir is not None else None,
            max_output=self.max_output,
            max_output_file=self.max_output_file,
            network=job.network,
        )
        # one INFO line per step, when it ends (with how long it ran); its start at DEBUG
        log.debug("step started", extra={"action": "node_started", **extra})
        began = time.monotonic()
        result: NodeResult | None = None
        try:
            result = await execute_node(job.rendered, ctx, providers=self.providers, tools=self.tools)
            check_output(job.node_id, result.output, job.output)
        except NodeFailed as exc:  # includes contract violations: output kept, entry failed
            await _to_end(
                self.journal.settle(
                    job.entry_id,
                    status=NodeStatus.FAILED,
                    output=result.output.encode() if result is not None else None,
                    error=exc.message,
                    tokens_in=result.tokens_in if result is not None else 0,
                    tokens_out=result.tokens_out if result is not None else 0,
                    job_id=job_id,
                )
            )
            log.info("step failed", extra={"action": "node_failed", "seconds": _since(began), **extra})
            return NodeStatus.FAILED
        except asyncio.CancelledError:
            log.warning("step interrupted; left `started`", extra={"action": "node_interrupted", **extra})
            raise
        except Exception as exc:  # a bug in a node kind or provider: fail the step, keep the worker
            shown = self.environment.redactor.redact(str(exc))
            message = f"step `{job.node_id}` crashed: {type(exc).__name__}: {shown}"
            failed = self.journal.settle(job.entry_id, status=NodeStatus.FAILED, error=message, job_id=job_id)
            await _to_end(failed)
            log.warning(message, extra={"action": "node_failed", "seconds": _since(began), **extra})
            return NodeStatus.FAILED
        output = result.output.encode()
        files: dict[str, bytes] = {}
        if job.artifact_globs:
            try:
                files = capture_artifacts(dirs.root, job.artifact_globs, self.max_artifacts)
            except (ArtifactOutside, ArtifactsTooLarge, OSError) as exc:
                message = f"step `{job.node_id}` ran, but its artifacts cannot be kept: {exc}"
                await _to_end(
                    self.journal.settle(
                        job.entry_id, status=NodeStatus.FAILED, output=output, error=message, job_id=job_id
                    )
                )
                return NodeStatus.FAILED
        await _to_end(  # output, artifacts and `completed`: one statement
            self.journal.settle(
                job.entry_id,
                status=NodeStatus.COMPLETED,
                output=output,
                tokens_in=result.tokens_in,
                tokens_out=result.tokens_out,
                artifacts=files,
                job_id=job_id,
            )
        )
        log.info("step completed", extra={"action": "node_completed", "seconds": _since(began), **extra})
        return NodeStatus.COMPLETED

    def _dirs(self, run_id: str) -> RunDirs:
        """The run's directories, created once per run (checked again with one stat: a
        directory removed meanwhile is created again)."""
        dirs = self._run_dirs.get(run_id)
        if dirs is None or not os.path.isdir(dirs.artifacts):
            dirs = run_dirs(self.data_dir, run_id)
            self._run_dirs[run_id] = dirs
        return dirs

    def _refusal(self, job: NodeJob) -> str | None:
        """Why this worker must not run the job's step (None: it may)."""
        try:
            self.tools = self.tools.refreshed()
        except BatonError as exc:
            return f"step `{job.node_id}`: {exc.message}"
        mine = local_identity(job, self.tools, self.providers)
        differs = sorted(k for k, v in job.identity.items() if mine.get(k) != v)
        if not differs:
            return None
        what = " and ".join("its tool code" if k == "tool" else "its prompt provider" for k in differs)
        return (
            f"step `{job.node_id}`: worker {self.name} differs from the replica in {what}; "
            "deploy the same tool modules and provider settings to replicas and workers, then resume"
        )
