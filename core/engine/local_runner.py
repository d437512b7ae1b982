"""`LocalStepRunner`: a step run in this process (the default `StepRunner`).

One attempt: `started` is journaled (committed) before the step is dispatched, the step
runs (`nodes.execute_node`), its output is checked against its contract, then its blob,
artifacts and `completed` entry are stored (one transaction); a failure settles the entry `failed` with the
error (the output kept when there was one). Inline pure and idempotent tools without
artifacts skip the `started` entry (`one_commit`): their blob and `completed` entry are
written together, a pure one's group-committed (`group_commit.py`).

At recovery, an entry of this run left `started` by a process that stopped follows the
replay rules (`Execution.orphaned`): unsafe -> the run needs attention; otherwise the entry
is marked interrupted and the step runs again.
"""

from __future__ import annotations

import asyncio
import time

from core.engine.contracts import check_output
from core.engine.events import EventKind
from core.engine.nodes import NodeContext, NodeResult, RenderedNode, execute_node
from core.engine.prepared import PreparedNode
from core.engine.steps import Attempt, Completed, Execution, Failed, Step
from core.engine.workdirs import ArtifactOutside, ArtifactsTooLarge, capture_artifacts
from core.errors import ConfigurationError, NodeFailed, ReplayUnsafe
from core.store.port import StepResult, digest_bytes
from core.store.records import JournalEntry, NodeStatus, ReplayClass


class LocalStepRunner:
    def __init__(self, execution: Execution) -> None:
        self.x = execution

    def adopt(self, node: PreparedNode, entry: JournalEntry) -> ReplayUnsafe | None:
        return self.x.orphaned(node, entry)

    async def run(self, step: Step, rendered: RenderedNode, attempt: int) -> Attempt:
        pn, x, s = step.node, self.x, self.x.setup
        ctx = NodeContext(
            run_id=x.run_id,
            node_id=pn.id,
            workdir=s.dirs.root,
            artifacts_dir=s.dirs.artifacts,
            idempotency_key=step.idempotency_key,
            timeout=pn.timeout,
            environment=s.environment,
            attempt=attempt,
            env=pn.env,
            secrets=pn.secrets,
            workflow_dir=x.workflow_dir,
            max_output=s.max_output,
            max_output_file=s.max_output_file,
            network=pn.network,
            warm=x.warm,
        )
        one_commit = self.one_commit(pn, rendered)
        # committed before anything is dispatched, unless a second run is harmless (`one_commit`)
        entry_id = None if one_commit else x.journal.start(step, attempt)
        started = time.monotonic()
        await x.emit(EventKind.NODE_STARTED, pn.id, attempt=attempt, reason=step.notes.reason)
        result: NodeResult | None = None
        try:
            try:
                result = await execute_node(rendered, ctx, providers=s.providers, tools=s.tools)
                value = check_output(pn.id, result.output, pn.node.output)
            except BaseException as exc:
                settles = not isinstance(exc, asyncio.CancelledError) or x.cancel_note is not None
                if entry_id is None and settles:  # the failure is journaled like any other
                    entry_id = x.journal.start(step, attempt)
                raise
        except NodeFailed as exc:  # includes OutputContractViolation: output kept, entry failed
            assert entry_id is not None
            kept = [result.output.encode()] if result is not None else []  # stored with the entry
            spent = (result.tokens_in, result.tokens_out) if result is not None else (0, 0)
            x.journal.finish(
                entry_id, status=NodeStatus.FAILED, output_digest=digest_bytes(kept[0]) if kept else None,
                error=exc.message, tokens_in=spent[0], tokens_out=spent[1], blobs=kept,
            )  # fmt: skip
            return Failed(exc.message)
        except asyncio.CancelledError:
            if x.cancel_note is not None:
                assert entry_id is not None
                x.journal.finish(entry_id, status=NodeStatus.FAILED, error=x.cancel_note)
            raise
        except Exception as exc:  # a bug in a node kind or provider: fail the step, keep the run sane
            assert entry_id is not None
            shown = s.environment.redactor.redact(str(exc))
            message = f"step `{pn.id}` crashed: {type(exc).__name__}: {shown}"
            x.journal.finish(entry_id, status=NodeStatus.FAILED, error=message)
            return Failed(message)
        tokens = result.tokens_in + result.tokens_out
        if entry_id is None:  # blob and `completed` entry together, no `started` before them
            done = StepResult(
                run_id=x.run_id, node_id=pn.id, cache_key=step.key, components=step.components,
                attempt=attempt, idempotency_key=step.idempotency_key, output=result.output.encode(),
                tokens_in=result.tokens_in, tokens_out=result.tokens_out, notes=step.notes,
            )  # fmt: skip
            # pure: committed with the next batch; idempotent: durable before anything depends on it
            x.journal.result(done, durable=pn.replay is not ReplayClass.PURE)
            return Completed(done.digest, value, time.monotonic() - started, tokens)
        try:
            digest, artifacts = self._finish(pn, entry_id, result)
        except NodeFailed as exc:
            return Failed(exc.message)
        return Completed(digest, value, time.monotonic() - started, tokens, artifacts)

    def _finish(self, pn: PreparedNode, entry_id: int, result: NodeResult) -> tuple[str, dict[str, str]]:
        """Settle a journaled start as completed: output and artifacts stored with the entry,
        in one transaction."""
        output = result.output.encode()
        digest = digest_bytes(output)
        artifacts: dict[str, str] = {}
        blobs = [output]
        if pn.node.artifacts:
            try:
                setup = self.x.setup
                files = capture_artifacts(setup.dirs.root, pn.node.artifacts, setup.max_artifacts)
            except (ArtifactOutside, ArtifactsTooLarge, OSError) as exc:
                message = f"step `{pn.id}` ran, but its artifacts cannot be kept: {exc}"
                self.x.journal.finish(
                    entry_id, status=NodeStatus.FAILED, output_digest=digest, error=message, blobs=blobs
                )
                raise NodeFailed(message, node_id=pn.id) from exc
            artifacts = {path: digest_bytes(data) for path, data in files.items()}
            blobs += files.values()
        self.x.journal.finish(
            entry_id,
            status=NodeStatus.COMPLETED,
            output_digest=digest,
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
            artifacts=artifacts,
            blobs=blobs,
        )
        return digest, artifacts

    def one_commit(self, pn: PreparedNode, rendered: RenderedNode) -> bool:
        """True: journal this step once, when it is done (blob and `completed` entry together).

        DESIGN.md's promise is that `started` is committed before a side effect is
        dispatched. A pure or idempotent step may run twice by declaration (recovery re-runs
        it; an idempotent one with the same key, which comes from the cache key), so its start
        need not be journaled. A pure step's result may even wait for the next group commit;
        an idempotent one's is committed at once. Limited to inline tools without artifacts:
        they run to the end on the event loop, so nobody could have seen a `started` entry
        (the summary's "running" state) and there are no files to capture. Everything else, and every
        `unsafe` step, keeps its committed `started` entry.
        """
        if rendered.kind != "tool" or pn.replay is ReplayClass.UNSAFE or pn.node.artifacts:
            return False
        try:
            return rendered.tool is not None and self.x.setup.tools.get(rendered.tool).inline
        except ConfigurationError:
            return False  # the step fails when it runs; that failure is journaled as usual
