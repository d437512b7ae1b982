"""Runs one run's DAG: ordering, parallelism, cache lookups, replay rules, journal writes.

One `RunExecutor` per execution of a run (a start, a resume, an approval, a recovery). It
reads the journal of the run and its lineage once (`store.journal(lineage)`) and then
decides every node from memory:

    done in this run (same key)      -> nothing to do
    completed in the lineage          -> cache hit: copied into this run (batched), artifacts restored
    `started` without a result        -> replay rules: pure/idempotent re-run, unsafe -> attention
    approval                          -> the gate's decision, or open the gate and wait
    otherwise                         -> run it: journal_start (committed), execute, put_blob, journal_finish
    inline idempotent tool            -> execute, then blob + completed entry in one commit
    inline pure tool                  -> execute, then blob + completed entry group-committed
                                         (`group_commit.py`: one commit per batch of steps)

The executor never changes the run's status: it returns an `Outcome` and the engine
applies it with a compare-and-swap.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.engine import conditions, replay
from core.engine.approval_policy import Policy, deadlines, gate_output
from core.engine.cache_key import IDENTITY_MARK, components_of, digest_value, key_from, key_prefix
from core.engine.contracts import check_output
from core.engine.events import EngineEvent, EventBus, EventKind
from core.engine.gates import GateKeeper
from core.engine.group_commit import PendingResults
from core.engine.journal_index import JournalIndex
from core.engine.node_values import decode_output, node_value
from core.engine.nodes import NodeContext, NodeResult, RenderedNode, execute_node
from core.engine.prepared import Definitions, PreparedNode, PreparedWorkflow
from core.engine.providers import ProviderRegistry
from core.engine.rendering import StepRenderer
from core.engine.step_env import StepEnvironment
from core.engine.tools import ToolRegistry
from core.engine.workdirs import (
    ArtifactOutside,
    RunDirs,
    capture_artifacts,
    missing_artifacts,
    restore_artifacts,
)
from core.errors import (
    BatonError,
    ConfigurationError,
    NodeFailed,
    ReplayUnsafe,
    RunStateError,
    StoreError,
)
from core.store.port import StepResult, Store
from core.store.records import GateStatus, JournalEntry, NodeStatus, ReplayClass, Run, RunStatus
from core.workflows.args import canonical_json
from core.workflows.loader import base_dir

log = logging.getLogger(__name__)
ABSENT = digest_value(None)  # the digest a referenced but missing input contributes
INTERRUPTED = "interrupted: the process running it stopped before it finished; re-run ({cls})"


@dataclass(frozen=True, slots=True)
class Setup:
    """Everything one execution needs, resolved by the engine beforehand."""

    store: Store
    prepared: PreparedWorkflow
    definitions: Definitions
    run: Run
    args: Mapping[str, Any]
    lineage: tuple[str, ...]  # the run first, its root last
    dirs: RunDirs
    providers: ProviderRegistry
    tools: ToolRegistry
    bus: EventBus
    environment: StepEnvironment  # each step's variables and secrets; its redactor hides them
    max_parallel: int = 4
    group_commit: float = 0.0  # seconds a pure step's result may wait for its commit (0: none)
    renderer: StepRenderer = field(default_factory=StepRenderer)  # templates, budgeted, off the loop
    max_output: int = 1_000_000  # bytes of a step's output kept; the rest goes to a file


@dataclass(frozen=True, slots=True)
class Outcome:
    status: RunStatus
    reason: str | None = None
    node_id: str | None = None  # the node the status is about (failed / attention / waiting)


@dataclass(frozen=True, slots=True)
class _Step:
    node: PreparedNode
    key: str
    components: dict[str, Any]
    idempotency_key: str


def input_digests(args: Mapping[str, Any]) -> dict[str, str]:
    """Digest of every input value (with `message` always present), computed once per run."""
    return {name: digest_value(v) for name, v in {"message": "", **args}.items()}


def node_components(
    pn: PreparedNode,
    definitions: Definitions,
    inputs: Mapping[str, str],
    upstream: Mapping[str, str],
    run_id: str | None = None,
) -> dict[str, Any]:
    """A node's key components; `run_id` counts only if the node's templates read `run.id`."""
    names = pn.input_names if pn.input_names is not None else sorted(inputs)
    components = components_of(
        node_id=pn.id,
        kind=pn.kind,
        definition=definitions.digests[pn.id],
        inputs={name: inputs.get(name, ABSENT) for name in names},
        upstream=upstream,
        run_id=run_id if pn.reads_run else None,
        identity=definitions.identities.get(pn.id),
    )
    components[IDENTITY_MARK] = 1  # recorded by an engine that keys identity (not hashed)
    return components


class RunExecutor:
    def __init__(self, setup: Setup) -> None:
        self.s = setup
        self.store = setup.store
        self.run_id = setup.run.id
        self.root = setup.lineage[-1]
        self.nodes = setup.prepared.nodes
        self.cancel_note: str | None = None  # set by the engine before it cancels a user-cancelled run
        self._index: JournalIndex | None = None
        self._digests: dict[str, str] = {}  # node -> output digest, for nodes done in this execution
        self._values: dict[str, dict[str, Any]] = {}  # node -> {"output": value} (template context)
        self._waiting = {n: len(pn.deps) for n, pn in self.nodes.items()}
        self._ready: deque[str] = deque(n for n in setup.prepared.order if not self.nodes[n].deps)
        self._runnable: deque[_Step] = deque()
        self._running: dict[asyncio.Task[None], _Step] = {}
        self._hits: list[JournalEntry] = []
        self._pending = PendingResults(setup.store, setup.group_commit)  # pure results not yet committed
        self._restore: dict[str, str] = {}  # artifact path -> digest, to write before dependents run
        self._failed: list[tuple[str, str]] = []
        self._attention: list[ReplayUnsafe] = []
        self._gates: list[str] = []
        self._stopping = False
        self._inputs = {"message": "", **setup.args}
        self._input_digests = input_digests(setup.args)
        self._prefixes: dict[str, str] = {}
        self._context = {"inputs": self._inputs, "nodes": self._values, "run": {"id": self.run_id}}
        self._workflow_dir = base_dir(setup.prepared.workflow).absolute()  # BATON_WORKFLOW_DIR

    # -- the loop ------------------------------------------------------------------------
    async def execute(self) -> Outcome:
        self._index = JournalIndex(self.run_id, self.store.journal(self.s.lineage))
        try:
            while True:
                if not self._stopping:
                    await self._drain_ready()
                if self._runnable and not self._stopping:
                    self._prefetch()
                    if len(self._runnable) == 1 and not self._running:
                        await self._run_step(self._runnable.popleft())
                        continue
                    while self._runnable and len(self._running) < self.s.max_parallel:
                        step = self._runnable.popleft()
                        self._running[asyncio.create_task(self._run_step(step))] = step
                if not self._running:
                    if self._ready and not self._stopping:
                        continue
                    break
                done, _ = await asyncio.wait(self._running, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    del self._running[task]
                    task.result()  # _run_step handles step failures; anything else is a bug
            self._pending.flush()
            self._flush_hits()
            if self._restore:
                self._ensure_values([])
        except BaseException:
            for task in self._running:
                task.cancel()
            await asyncio.gather(*self._running, return_exceptions=True)
            try:  # results of steps that did complete are kept, however the execution ends
                self._pending.flush()
            except StoreError as exc:
                lost = len(self._pending)
                log.warning("run %s: %d step results not journaled: %s", self.run_id, lost, exc.message)
            raise
        return self._outcome()

    def _outcome(self) -> Outcome:
        if self._attention:
            first = self._attention[0]
            more = f" (and {len(self._attention) - 1} more)" if len(self._attention) > 1 else ""
            return Outcome(RunStatus.NEEDS_ATTENTION, first.message + more, first.node_id)
        if self._failed:
            node_id, error = self._failed[0]
            return Outcome(RunStatus.FAILED, error.splitlines()[0] if error else "failed", node_id)
        if self._gates:
            return Outcome(RunStatus.PAUSED, f"waiting for approval at `{self._gates[0]}`", self._gates[0])
        return Outcome(RunStatus.COMPLETED)

    async def _emit(self, kind: EventKind, node_id: str | None, **detail: Any) -> None:
        if self.s.bus:
            await self.s.bus.emit(EngineEvent(kind, self.run_id, node_id, detail=detail))

    def _release(self, node_id: str, digest: str) -> None:
        self._digests[node_id] = digest
        for child in self.nodes[node_id].dependents:
            self._waiting[child] -= 1
            if self._waiting[child] == 0:
                self._ready.append(child)

    # -- deciding -------------------------------------------------------------------------
    def _key(self, pn: PreparedNode, upstream: Mapping[str, str]) -> str:
        """The node's cache key: a per-execution prefix plus its upstream output digests."""
        prefix = self._prefixes.get(pn.id)
        if prefix is None:
            names = pn.input_names if pn.input_names is not None else sorted(self._input_digests)
            prefix = self._prefixes[pn.id] = key_prefix(
                node_id=pn.id,
                kind=pn.kind,
                definition=self.s.definitions.digests[pn.id],
                inputs={n: self._input_digests.get(n, ABSENT) for n in names},
                run_id=self.run_id if pn.reads_run else None,
                identity_json=self.s.definitions.identities_json.get(pn.id),
            )
        return key_from(prefix, upstream)

    async def _drain_ready(self) -> None:
        index = self._index
        assert index is not None
        while self._ready and not self._stopping:
            pn = self.nodes[self._ready.popleft()]
            upstream = {dep: self._digests[dep] for dep in pn.deps}
            key = self._key(pn, upstream)
            dangling = index.dangling(pn.id)
            if dangling is not None and not await self._recover(pn, dangling):
                continue
            hit = index.lookup(key) if pn.memoize else None
            if hit is not None and pn.kind == "approval" and hit.run_id != self.run_id:
                hit = None  # a decision is never re-used by another run: it asks its own gate
            if hit is not None and hit.output_digest is not None:
                await self._use(pn, hit)
                continue
            components = node_components(pn, self.s.definitions, self._input_digests, upstream, self.run_id)
            legacy = index.own_legacy(pn.id, components) if pn.memoize and pn.kind != "approval" else None
            if legacy is not None:  # done by this run before identity was keyed: not run again
                await self._use(pn, legacy)
                continue
            step = _Step(pn, key, components, replay.idempotency_key(self.root, pn.id, key))
            step.components["_reason"] = index.miss_reason(
                pn.id, step.key, step.components, memoize=pn.memoize
            )
            conditional = pn.node.when is not None or conditions.skipped_dependency(pn, self._digests)
            if conditional and await self._skips(step):
                continue
            if pn.kind == "approval":
                await self._approval(step)
                continue
            self._runnable.append(step)
            await self._emit(EventKind.NODE_QUEUED, pn.id, reason=step.components["_reason"])

    async def _recover(self, pn: PreparedNode, entry: JournalEntry) -> bool:
        """A step of this run was in flight when its process died. True: run it again."""
        action = replay.recovery_for(pn.replay)
        if action is replay.Recovery.ATTENTION:
            error = replay.replay_unsafe(self.run_id, entry)
            self._attention.append(error)
            await self._emit(EventKind.NODE_ATTENTION, pn.id, reason=error.message, hint=error.hint)
            return False
        self._pending.flush()
        with contextlib.suppress(RunStateError):  # already settled by someone: fine, it re-runs anyway
            self.store.journal_finish(
                entry.id, status=NodeStatus.FAILED, error=INTERRUPTED.format(cls=pn.replay)
            )
        return True

    async def _use(self, pn: PreparedNode, entry: JournalEntry) -> None:
        """Serve a completed entry: done in this run already, or a cache hit from the lineage."""
        digest = entry.output_digest
        assert digest is not None
        if entry.run_id != self.run_id:
            tokens = entry.tokens_in + entry.tokens_out + int(entry.components.get("_tokens", 0))
            self._hits.append(entry)  # the copy notes the tokens re-using it saves (`_tokens`)
            await self._emit(
                EventKind.NODE_CACHED,
                pn.id,
                cached_from=entry.cached_from or entry.run_id,
                tokens_saved=tokens,
            )
        if entry.artifacts:
            self._restore.update(missing_artifacts(self.s.dirs.root, entry.artifacts))
        self._release(pn.id, digest)

    async def _approval(self, step: _Step) -> None:
        """The gate's decision, or open the gate and wait.

        A decision answers one question: the gate's cache key (or, for gates recorded
        before keys were, its prompt) must match the step's current one. When the step's
        definition or upstream outputs changed since, the gate is re-opened and asks again.
        """
        pn = step.node
        self._pending.flush()  # the gate's decision is journaled after what it was asked about
        try:
            self._ensure_values(pn.deps)
            prompt = await self.s.renderer.text(pn.node.body, self._context)
        except BatonError as exc:
            await self._fail(pn.id, f"approval `{pn.id}`: {exc.message}")
            return
        why = str(step.components.get("_reason") or "the question changed")
        gate = GateKeeper(self.store).ask(self.run_id, pn.id, prompt, step.key, why=why)
        if gate.status is GateStatus.APPROVED and gate.decision == "skip":  # `on_timeout: skip`
            await self._skip(step, f"gate `{pn.id}` timed out (on_timeout: skip)")
            return
        if gate.status is GateStatus.APPROVED:
            output = gate_output(gate)
            entry_id = self._journal_start(step)
            digest = self.store.put_blob(canonical_json(output))
            self.store.journal_finish(entry_id, status=NodeStatus.COMPLETED, output_digest=digest)
            self._values[pn.id] = node_value(pn, output)
            await self._emit(EventKind.NODE_COMPLETED, pn.id, approved_by=gate.decided_by)
            self._release(pn.id, digest)
            return
        if gate.status is GateStatus.REJECTED:
            await self._fail(pn.id, f"approval `{pn.id}` was rejected by {gate.decided_by}")
            return
        self._gates.append(pn.id)
        spec = pn.node.approval
        if spec is not None and (spec.timeout or spec.remind or spec.escalate):  # durable, planned once
            due = deadlines(Policy.of(spec, approvers=()), gate.created_at)
            self.store.plan_deadlines(self.run_id, pn.id, gate.created_at, [(d.name, d.at) for d in due])
        await self._emit(EventKind.NODE_WAITING, pn.id, prompt=gate.prompt)

    async def _skips(self, step: _Step) -> bool:
        """True when the step is skipped (`conditions.py`): journaled as such, and released."""
        pn = step.node
        try:
            if pn.node.when is not None:
                self._ensure_values(pn.deps)
            why = await conditions.why_skipped(pn, self._digests, self.s.renderer, self._context)
        except BatonError as exc:
            await self._fail(pn.id, f"`when:` of `{pn.id}`: {exc.message}")
            return True
        if why is None:
            return False
        await self._skip(step, why)
        return True

    async def _skip(self, step: _Step, why: str) -> None:
        pn = step.node
        step.components[conditions.SKIPPED_KEY] = why
        entry_id = self._journal_start(step)
        digest = self.store.put_blob(conditions.SKIP_BYTES)
        self.store.journal_finish(entry_id, status=NodeStatus.COMPLETED, output_digest=digest)
        self._values[pn.id] = conditions.skipped_value()
        await self._emit(EventKind.NODE_SKIPPED, pn.id, reason=why)
        self._release(pn.id, digest)

    async def _fail(self, node_id: str, error: str) -> None:
        self._failed.append((node_id, error))
        self._stopping = True
        await self._emit(EventKind.NODE_FAILED, node_id, error=error)

    # -- outputs, blobs, artifacts ----------------------------------------------------------
    def _flush_hits(self) -> None:
        if self._hits:
            self._pending.flush()
            self.store.journal_record_cached(self.run_id, self._hits)
            self._hits = []

    def _ensure_values(self, node_ids: tuple[str, ...] | list[str] | set[str]) -> None:
        """Load the outputs of these (done) nodes for templates, in one `get_blobs` at most."""
        missing = [n for n in node_ids if n not in self._values]
        for n in [n for n in missing if self._digests[n] == conditions.SKIP_DIGEST]:
            self._values[n] = conditions.skipped_value()
            missing.remove(n)
        wanted = {self._digests[n] for n in missing} | set(self._restore.values())
        blobs = self.store.get_blobs(wanted) if wanted else {}
        for n in missing:
            pn = self.nodes[n]
            self._values[n] = node_value(pn, decode_output(pn, blobs[self._digests[n]].decode()))
        if self._restore:
            restore_artifacts(self.s.dirs.root, {path: blobs[d] for path, d in self._restore.items()})
            self._restore = {}

    def _prefetch(self) -> None:
        """Before steps run: record cache hits, load their inputs, restore artifacts."""
        self._flush_hits()
        deps = {dep for step in self._runnable for dep in step.node.deps}
        if self._restore or any(d not in self._values for d in deps):
            self._ensure_values(deps)

    # -- running one step ---------------------------------------------------------------------
    def _journal_start(self, step: _Step, attempt: int | None = None) -> int:
        assert self._index is not None
        self._pending.flush()  # a `started` entry is never durable before the results it follows
        return self.store.journal_start(
            run_id=self.run_id,
            node_id=step.node.id,
            cache_key=step.key,
            components=step.components,
            attempt=attempt if attempt is not None else self._index.next_attempt(step.node.id),
            idempotency_key=step.idempotency_key,
        )

    async def _render(self, pn: PreparedNode) -> RenderedNode:
        node = pn.node
        renderer = self.s.renderer
        if pn.kind == "bash":
            command = await renderer.command(node.body, self._context)
            return RenderedNode("bash", command=command.text, variables=command.variables)
        if pn.kind == "tool":
            kwargs = await renderer.value(node.with_, self._context) if node.with_ else {}
            return RenderedNode("tool", tool=node.tool, kwargs=kwargs)
        if pn.kind == "prompt":
            schema = (node.output.schema_ or {}) if node.output.format == "json" else None
            prompt = await renderer.text(node.body, self._context)
            provider = self.s.prepared.workflow.provider(node)
            return RenderedNode("prompt", prompt=prompt, provider=provider, output_schema=schema)
        stdin = {
            "inputs": self._inputs,
            "nodes": {dep: self._values[dep] for dep in pn.deps},
            "run": {"id": self.run_id},
        }
        return RenderedNode(
            "script", script_source=self.s.definitions.sources[pn.id], stdin=canonical_json(stdin)
        )

    async def _run_step(self, step: _Step) -> None:
        pn = step.node
        assert self._index is not None
        attempt = self._index.next_attempt(pn.id)
        try:
            rendered = await self._render(pn)
        except BatonError as exc:
            entry_id = self._journal_start(step, attempt)
            self.store.journal_finish(entry_id, status=NodeStatus.FAILED, error=exc.message)
            await self._fail(pn.id, f"step `{pn.id}`: {exc.message}")
            return
        for tries in range(1, pn.attempts + 1):
            error = await self._attempt(step, rendered, attempt)
            if error is None:
                return
            if tries == pn.attempts or self._stopping:
                await self._fail(pn.id, error)
                return
            await self._emit(EventKind.NODE_FAILED, pn.id, error=error, retrying=True)
            await asyncio.sleep(replay.backoff_seconds(pn.node.retry, tries))
            attempt += 1

    async def _attempt(self, step: _Step, rendered: RenderedNode, attempt: int) -> str | None:
        """One attempt; None when it completed, else the error."""
        pn = step.node
        ctx = NodeContext(
            run_id=self.run_id,
            node_id=pn.id,
            workdir=self.s.dirs.root,
            artifacts_dir=self.s.dirs.artifacts,
            idempotency_key=step.idempotency_key,
            timeout=pn.timeout,
            environment=self.s.environment,
            attempt=attempt,
            env=pn.env,
            secrets=pn.secrets,
            workflow_dir=self._workflow_dir,
            max_output=self.s.max_output,
        )
        one_commit = self._one_commit(pn, rendered)
        # committed before anything is dispatched, unless a second run is harmless (`_one_commit`)
        entry_id = None if one_commit else self._journal_start(step, attempt)
        started = time.monotonic()
        await self._emit(
            EventKind.NODE_STARTED, pn.id, attempt=attempt, reason=step.components.get("_reason")
        )
        result: NodeResult | None = None
        try:
            try:
                result = await execute_node(rendered, ctx, providers=self.s.providers, tools=self.s.tools)
                value = check_output(pn.id, result.output, pn.node.output)
            except BaseException as exc:
                settles = not isinstance(exc, asyncio.CancelledError) or self.cancel_note is not None
                if entry_id is None and settles:  # the failure is journaled like any other
                    entry_id = self._journal_start(step, attempt)
                raise
        except NodeFailed as exc:  # includes OutputContractViolation: output kept, entry failed
            assert entry_id is not None
            kept = self.store.put_blob(result.output.encode()) if result is not None else None
            tokens = (result.tokens_in, result.tokens_out) if result is not None else (0, 0)
            self.store.journal_finish(
                entry_id,
                status=NodeStatus.FAILED,
                output_digest=kept,
                error=exc.message,
                tokens_in=tokens[0],
                tokens_out=tokens[1],
            )
            return exc.message
        except asyncio.CancelledError:
            if self.cancel_note is not None:
                assert entry_id is not None
                self.store.journal_finish(entry_id, status=NodeStatus.FAILED, error=self.cancel_note)
            raise
        except Exception as exc:  # a bug in a node kind or provider: fail the step, keep the run sane
            assert entry_id is not None
            shown = self.s.environment.redactor.redact(str(exc))
            message = f"step `{pn.id}` crashed: {type(exc).__name__}: {shown}"
            self.store.journal_finish(entry_id, status=NodeStatus.FAILED, error=message)
            return message
        if entry_id is None:  # blob and `completed` entry together, no `started` before them
            done = StepResult(
                run_id=self.run_id,
                node_id=pn.id,
                cache_key=step.key,
                components=step.components,
                attempt=attempt,
                idempotency_key=step.idempotency_key,
                output=result.output.encode(),
                tokens_in=result.tokens_in,
                tokens_out=result.tokens_out,
            )
            if pn.replay is ReplayClass.PURE:
                self._pending.add(done)  # committed with the next batch
            else:
                self._pending.commit_with(done)  # durable before anything depends on it
            digest = done.digest
        else:
            try:
                digest = self._finish(pn, entry_id, result)
            except NodeFailed as exc:
                return exc.message
        self._values[pn.id] = node_value(pn, value)
        if self.s.bus:
            await self._emit(
                EventKind.NODE_COMPLETED,
                pn.id,
                seconds=round(time.monotonic() - started, 3),
                tokens=result.tokens_in + result.tokens_out,
            )
        self._release(pn.id, digest)
        return None

    def _finish(self, pn: PreparedNode, entry_id: int, result: NodeResult) -> str:
        """Settle a journaled start as completed: output and artifacts stored, then the entry."""
        digest = self.store.put_blob(result.output.encode())
        artifacts: dict[str, str] = {}
        if pn.node.artifacts:
            try:
                files = capture_artifacts(self.s.dirs.root, pn.node.artifacts)
            except (ArtifactOutside, OSError) as exc:
                message = f"step `{pn.id}` ran, but its artifacts cannot be kept: {exc}"
                self.store.journal_finish(
                    entry_id, status=NodeStatus.FAILED, output_digest=digest, error=message
                )
                raise NodeFailed(message, node_id=pn.id) from exc
            artifacts = {path: self.store.put_blob(data) for path, data in files.items()}
        self.store.journal_finish(
            entry_id,
            status=NodeStatus.COMPLETED,
            output_digest=digest,
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
            artifacts=artifacts,
        )
        return digest

    def _one_commit(self, pn: PreparedNode, rendered: RenderedNode) -> bool:
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
            return rendered.tool is not None and self.s.tools.get(rendered.tool).inline
        except ConfigurationError:
            return False  # the step fails when it runs; that failure is journaled as usual

