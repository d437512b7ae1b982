"""`RunExecutor`: one execution of one run's DAG, as a scheduler over a `StepRunner`.

One `RunExecutor` per execution of a run (a start, a resume, an approval, a recovery). It
reads the journal of the run and its lineage once (`store.steps.journal(lineage)`) and then
decides every node from memory:

    done in this run (same key)      -> nothing to do
    completed in the lineage          -> cache hit: copied into this run (batched), artifacts restored
    open entry without a result       -> `runner.adopt`: re-run, wait for it, or needs attention
    approval                          -> the gate's decision, or open the gate and wait (`gates.py`)
    otherwise                         -> rendered, then `runner.run` (retried per `retry:`)

Running a step is its `StepRunner`'s (`steps.py`): `LocalStepRunner` in this process
(`local_runner.py`) or the queue's (`distributed/queue_runner.py`). Every journal write goes
through the execution's `JournalWriter` (`journal_writer.py`), which keeps their order.

The executor never changes the run's status: it returns an `Outcome` and the engine
applies it with a compare-and-swap.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from core.engine import conditions, replay
from core.engine.approval_policy import Policy, deadlines, gate_output
from core.engine.cache_expiry import apply_retention
from core.engine.cache_key import components_of, digest_value, key_from, key_prefix
from core.engine.events import EventBus, EventKind
from core.engine.gates import GateKeeper, GateStore
from core.engine.journal_index import JournalIndex
from core.engine.journal_writer import JournalWriter
from core.engine.local_runner import LocalStepRunner
from core.engine.mapping import ItemsError, MapRun, items_of, node_output
from core.engine.node_values import decode_output, node_value
from core.engine.nodes import RenderedNode
from core.engine.prepared import Definitions, PreparedNode, PreparedWorkflow
from core.engine.providers import ProviderRegistry
from core.engine.rendering import StepRenderer
from core.engine.step_env import StepEnvironment
from core.engine.steps import Attempt, Attention, Completed, Execution, Failed, Step, StepRunner, Waiting
from core.engine.subruns import ChildDone, ChildOutcome, ChildWaiting
from core.engine.tools import ToolRegistry
from core.engine.warm import WarmSandboxes
from core.engine.workdirs import RunDirs, missing_artifacts, restore_artifacts
from core.errors import BatonError, ReplayUnsafe, StoreError, headline
from core.store.port import Blobs, Journal
from core.store.records import GateStatus, JournalEntry, KeyNotes, NodeStatus, Run, RunStatus
from core.workflows.args import canonical_json
from core.workflows.loader import base_dir

log = logging.getLogger("baton.engine")
ABSENT = digest_value(None)  # the digest a referenced but missing input contributes
#: builds an execution's step runner: `LocalStepRunner` unless the engine is given another
RunnerFactory = Callable[[Execution], StepRunner]


class Children(Protocol):
    """Child runs of `workflow:` steps (`core/engine/subruns.ChildRuns`, the engine's)."""

    async def run(self, parent_id: str, node_id: str, key: str, workflow: str,
                  args: Mapping[str, Any]) -> ChildOutcome: ...  # fmt: skip


class ExecutionStore(GateStore, Protocol):
    """The store roles an execution uses: the journal, blobs, and what its gates write."""

    @property
    def blobs(self) -> Blobs: ...
    @property
    def steps(self) -> Journal: ...


@dataclass(frozen=True, slots=True)
class Setup:
    """Everything one execution needs, resolved by the engine beforehand."""

    store: ExecutionStore
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
    max_output_file: int = 100_000_000  # bytes of that file kept
    max_artifacts: int = 100_000_000  # bytes of one step's artifacts kept
    cache_retention: float | None = None  # seconds a pure result stays served unused (None: always)
    children: Children | None = None  # child runs of `workflow:` steps (`subruns.py`)


@dataclass(frozen=True, slots=True)
class Outcome:
    status: RunStatus
    reason: str | None = None
    node_id: str | None = None  # the node the status is about (failed / attention / waiting)
    on_child: bool = False  # paused because a child run of a `workflow:` step rests without a result


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
    return components_of(
        node_id=pn.id,
        kind=pn.kind,
        definition=definitions.digests[pn.id],
        inputs={name: inputs.get(name, ABSENT) for name in names},
        upstream=upstream,
        run_id=run_id if pn.reads_run else None,
        identity=definitions.identities.get(pn.id),
    )


class _Frontier:
    """Which nodes may be decided: a node is ready once each dependency has its output."""

    __slots__ = ("digests", "nodes", "ready", "waiting")

    def __init__(self, prepared: PreparedWorkflow) -> None:
        self.nodes = prepared.nodes
        self.digests: dict[str, str] = {}  # node -> output digest, for nodes done in this execution
        self.waiting = {n: len(pn.deps) for n, pn in self.nodes.items()}
        self.ready: deque[str] = deque(n for n in prepared.order if not self.nodes[n].deps)

    def release(self, node_id: str, digest: str) -> None:
        self.digests[node_id] = digest
        for child in self.nodes[node_id].dependents:
            self.waiting[child] -= 1
            if self.waiting[child] == 0:
                self.ready.append(child)


class _Outputs:
    """Done nodes' outputs as templates see them, and artifacts to restore before dependents run."""

    __slots__ = ("_digests", "_nodes", "_root", "_store", "context", "inputs", "restore", "values")

    def __init__(self, setup: Setup, digests: Mapping[str, str]) -> None:
        self._store = setup.store
        self._nodes = setup.prepared.nodes
        self._digests = digests
        self._root = setup.dirs.root
        self.values: dict[str, dict[str, Any]] = {}  # node -> {"output": value} (template context)
        self.restore: dict[str, str] = {}  # artifact path -> digest, to write before dependents run
        self.inputs = {"message": "", **setup.args}
        self.context = {"inputs": self.inputs, "nodes": self.values, "run": {"id": setup.run.id}}

    def ensure(self, node_ids: tuple[str, ...] | list[str] | set[str]) -> None:
        """Load the outputs of these (done) nodes for templates, in one `get_blobs` at most."""
        missing = [n for n in node_ids if n not in self.values]
        for n in [n for n in missing if self._digests[n] == conditions.SKIP_DIGEST]:
            self.values[n] = conditions.skipped_value()
            missing.remove(n)
        wanted = {self._digests[n] for n in missing} | set(self.restore.values())
        blobs = self._store.blobs.get_blobs(wanted) if wanted else {}
        for n in missing:
            pn = self._nodes[n]
            self.values[n] = node_value(pn, decode_output(pn, blobs[self._digests[n]].decode()))
        if self.restore:
            restore_artifacts(self._root, {path: blobs[d] for path, d in self.restore.items()})
            self.restore = {}


class _Keys:
    """Cache keys of this execution's nodes: a per-node prefix, then the upstream digests."""

    __slots__ = ("_definitions", "_prefixes", "_run_id", "inputs", "root")

    def __init__(self, setup: Setup) -> None:
        self._definitions = setup.definitions
        self._run_id = setup.run.id
        self._prefixes: dict[str, str] = {}
        self.inputs = input_digests(setup.args)
        self.root = setup.lineage[-1]  # idempotency keys are the lineage root's

    def key(self, pn: PreparedNode, upstream: Mapping[str, str]) -> str:
        prefix = self._prefixes.get(pn.id)
        if prefix is None:
            names = pn.input_names if pn.input_names is not None else sorted(self.inputs)
            prefix = self._prefixes[pn.id] = key_prefix(
                node_id=pn.id,
                kind=pn.kind,
                definition=self._definitions.digests[pn.id],
                inputs={n: self.inputs.get(n, ABSENT) for n in names},
                run_id=self._run_id if pn.reads_run else None,
                identity_json=self._definitions.identities_json.get(pn.id),
            )
        return key_from(prefix, upstream)


class _Verdicts:
    """What this execution found that decides the run's status, most serious first."""

    __slots__ = ("attention", "children", "failed", "gates", "stopping")

    def __init__(self) -> None:
        self.attention: list[ReplayUnsafe] = []
        self.failed: list[tuple[str, str]] = []
        self.gates: list[str] = []
        self.children: list[tuple[str, str]] = []  # (step, why): child runs resting without a result
        self.stopping = False  # a step failed: nothing new starts

    def outcome(self) -> Outcome:
        if self.attention:
            first = self.attention[0]
            more = f" (and {len(self.attention) - 1} more)" if len(self.attention) > 1 else ""
            return Outcome(RunStatus.NEEDS_ATTENTION, first.message + more, first.node_id)
        if self.failed:
            node_id, error = self.failed[0]
            return Outcome(RunStatus.FAILED, headline(error) or "failed", node_id)
        if self.gates:
            return Outcome(RunStatus.PAUSED, f"waiting for approval at `{self.gates[0]}`", self.gates[0])
        if self.children:
            node_id, why = self.children[0]
            return Outcome(RunStatus.PAUSED, why, node_id, on_child=True)
        return Outcome(RunStatus.COMPLETED)


class RunExecutor:
    def __init__(self, setup: Setup, runner: RunnerFactory = LocalStepRunner) -> None:
        self.s = setup
        self.run_id = setup.run.id
        journal = JournalWriter(setup.store.steps, setup.run.id, setup.group_commit)
        self.x = Execution(setup, journal, base_dir(setup.prepared.workflow).absolute())
        self.runner = runner(self.x)
        self._index: JournalIndex | None = None
        self._dag = _Frontier(setup.prepared)
        self._out = _Outputs(setup, self._dag.digests)
        self._keys = _Keys(setup)
        self._verdicts = _Verdicts()
        self._runnable: deque[Step] = deque()
        self._running: dict[asyncio.Task[None], Step] = {}
        self._items: dict[str, list[Any]] = {}  # map node -> its rendered items, until it runs
        self._item_slots = asyncio.Semaphore(setup.max_parallel)  # items of all map nodes at once
        self._finished: deque[asyncio.Task[None]] = deque()  # running tasks that ended, in order
        self._ended = asyncio.Event()  # set when a running task ends

    @property
    def cancel_note(self) -> str | None:
        """Set by the engine before it cancels a person's cancelled run (`Execution.cancel_note`)."""
        return self.x.cancel_note

    @cancel_note.setter
    def cancel_note(self, note: str | None) -> None:
        self.x.cancel_note = note

    # -- the loop ------------------------------------------------------------------------
    async def execute(self) -> Outcome:
        """Run what is ready until the run completes, fails, waits or is stopped; the sandboxes
        warmed for its steps (`core/engine/warm.py`) end with this execution."""
        warmed = self.x.warm = WarmSandboxes.for_run(self.s.environment.sandbox)
        try:
            return await self._execute()
        finally:
            self.x.warm = None
            if warmed is not None:
                await warmed.close()

    async def _execute(self) -> Outcome:
        index = JournalIndex(self.run_id, self.s.store.steps.journal(self.s.lineage))
        self._index = apply_retention(index, self.s.prepared, self.s.cache_retention, time.time())
        journal, verdicts, running = self.x.journal, self._verdicts, self._running
        try:
            while True:
                if not verdicts.stopping:
                    await self._drain_ready()
                room = self.s.max_parallel - len(running)
                if self._runnable and room > 0 and not verdicts.stopping:
                    self._prefetch(room)
                    if len(self._runnable) == 1 and not running:
                        await self._run_step(self._runnable.popleft())
                        continue
                    while self._runnable and len(running) < self.s.max_parallel:
                        step = self._runnable.popleft()
                        task = asyncio.create_task(self._run_step(step))
                        task.add_done_callback(self._on_ended)
                        running[task] = step
                if not running:
                    if self._dag.ready and not verdicts.stopping:
                        continue
                    break
                # woken by the tasks that end (not `asyncio.wait`, which hooks into every
                # running task again on each call: a wide fan-out paid max_parallel per step)
                while not self._finished:
                    self._ended.clear()
                    await self._ended.wait()
                while self._finished:
                    task = self._finished.popleft()
                    del running[task]
                    task.result()  # _run_step handles step failures; anything else is a bug
            journal.flush()
            journal.flush_hits()
            if self._out.restore:
                self._out.ensure([])
        except BaseException:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            try:  # results of steps that did complete are kept, however the execution ends
                journal.flush()
            except StoreError as exc:
                lost = len(journal)
                log.warning("run %s: %d step results not journaled: %s", self.run_id, lost, exc.message)
            raise
        return verdicts.outcome()

    # -- deciding -------------------------------------------------------------------------
    async def _drain_ready(self) -> None:
        index, dag, keys, definitions = self._index, self._dag, self._keys, self.s.definitions
        assert index is not None
        while dag.ready and not self._verdicts.stopping:
            pn = dag.nodes[dag.ready.popleft()]
            upstream = {dep: dag.digests[dep] for dep in pn.deps}
            key = keys.key(pn, upstream)
            dangling = index.dangling(pn.id)
            if dangling is not None:  # a process running it stopped: its runner's rules
                unsafe = self.runner.adopt(pn, dangling)
                if unsafe is not None:
                    await self._needs_attention(pn.id, unsafe)
                    continue
            hit = index.lookup(key) if pn.memoize else None
            if hit is not None and pn.kind == "approval" and hit.run_id != self.run_id:
                hit = None  # a decision is never re-used by another run: it asks its own gate
            if hit is not None and hit.output_digest is not None:
                await self._use(pn, hit)
                continue
            components = node_components(pn, definitions, keys.inputs, upstream, self.run_id)
            legacy = index.own_legacy(pn.id, components) if pn.memoize and pn.kind != "approval" else None
            if legacy is not None:  # done by this run before identity was keyed: not run again
                await self._use(pn, legacy)
                continue
            # noted: why it runs, and that this engine keys identity
            notes = KeyNotes(reason=index.miss_reason(pn.id, key, components, memoize=pn.memoize),
                             keyed_identity=True)
            step = Step(pn, key, components, replay.idempotency_key(keys.root, pn.id, key), notes)
            conditional = pn.node.when is not None or conditions.skipped_dependency(pn, dag.digests)
            if conditional and await self._skips(step):
                continue
            if pn.kind == "approval":
                await self._approval(step)
                continue
            if pn.node.map is not None and not await self._map_items(step):
                continue
            self._runnable.append(step)
            await self.x.emit(EventKind.NODE_QUEUED, pn.id, reason=step.notes.reason)

    async def _use(self, pn: PreparedNode, entry: JournalEntry) -> None:
        """Serve a completed entry: done in this run already, or a cache hit from the lineage."""
        digest = entry.output_digest
        assert digest is not None
        if entry.run_id != self.run_id:
            tokens = entry.tokens_in + entry.tokens_out + entry.notes.saved_tokens
            self.x.journal.cached(entry)  # the copy notes the tokens re-using it saves
            await self.x.emit(
                EventKind.NODE_CACHED,
                pn.id,
                cached_from=entry.cached_from or entry.run_id,
                tokens_saved=tokens,
            )
        if entry.artifacts:
            self.x.artifacts.update(entry.artifacts)
            self._out.restore.update(missing_artifacts(self.s.dirs.root, entry.artifacts))
        self._dag.release(pn.id, digest)

    async def _approval(self, step: Step) -> None:
        """The gate's decision, or open the gate and wait.

        A decision answers one question: the gate's cache key (or, for gates recorded
        before keys were, its prompt) must match the step's current one. When the step's
        definition or upstream outputs changed since, the gate is re-opened and asks again;
        so it is when the gate was invalidated since it opened (`invalidate <run> <gate>`).
        """
        pn = step.node
        assert self._index is not None
        self.x.journal.flush()  # the gate's decision is journaled after what it was asked about
        try:
            self._out.ensure(pn.deps)
            prompt = await self.s.renderer.text(pn.node.body, self._out.context)
        except BatonError as exc:
            await self._fail(pn.id, f"approval `{pn.id}`: {exc.message}")
            return
        why = step.notes.reason or "the question changed"
        cut, latest = self._index.cut(pn.id), self._index.latest(pn.id)
        since = cut.at if cut is not None and (latest is None or latest.id < cut.entry_id) else None
        gate = GateKeeper(self.s.store).ask(self.run_id, pn.id, prompt, step.key, why=why, since=since)
        if gate.status is GateStatus.APPROVED and gate.decision == "skip":  # `on_timeout: skip`
            await self._skip(step, f"gate `{pn.id}` timed out (on_timeout: skip)")
            return
        if gate.status is GateStatus.APPROVED:
            output = gate_output(gate)
            entry_id = self.x.journal.start(step, self._index.next_attempt(pn.id))
            digest = self.s.store.blobs.put_blob(canonical_json(output))
            self.x.journal.finish(entry_id, status=NodeStatus.COMPLETED, output_digest=digest)
            self._out.values[pn.id] = node_value(pn, output)
            await self.x.emit(EventKind.NODE_COMPLETED, pn.id, approved_by=gate.decided_by)
            self._dag.release(pn.id, digest)
            return
        if gate.status is GateStatus.REJECTED:
            await self._fail(pn.id, f"approval `{pn.id}` was rejected by {gate.decided_by}")
            return
        self._verdicts.gates.append(pn.id)
        spec = pn.node.approval
        if spec is not None and (spec.timeout or spec.remind or spec.escalate):  # durable, planned once
            due = deadlines(Policy.of(spec, approvers=()), gate.created_at)
            self.s.store.ballots.plan_deadlines(
                self.run_id, pn.id, gate.created_at, [(d.name, d.at) for d in due]
            )
        await self.x.emit(EventKind.NODE_WAITING, pn.id, prompt=gate.prompt)

    async def _skips(self, step: Step) -> bool:
        """True when the step is skipped (`conditions.py`): journaled as such, and released."""
        pn = step.node
        try:
            if pn.node.when is not None:
                self._out.ensure(pn.deps)
            why = await conditions.why_skipped(pn, self._dag.digests, self.s.renderer, self._out.context)
        except BatonError as exc:
            await self._fail(pn.id, f"`when:` of `{pn.id}`: {exc.message}")
            return True
        if why is None:
            return False
        await self._skip(step, why)
        return True

    async def _skip(self, step: Step, why: str) -> None:
        pn = step.node
        assert self._index is not None
        step = replace(step, notes=replace(step.notes, skipped=why))
        entry_id = self.x.journal.start(step, self._index.next_attempt(pn.id))
        digest = self.s.store.blobs.put_blob(conditions.SKIP_BYTES)
        self.x.journal.finish(entry_id, status=NodeStatus.COMPLETED, output_digest=digest)
        self._out.values[pn.id] = conditions.skipped_value()
        await self.x.emit(EventKind.NODE_SKIPPED, pn.id, reason=why)
        self._dag.release(pn.id, digest)

    async def _map_items(self, step: Step) -> bool:
        """Render a map node's items (`mapping.py`); False when the node is decided without
        running any: no items (skipped, with the reason), or items it cannot run (failed)."""
        pn = step.node
        spec = pn.node.map
        assert spec is not None
        try:
            self._out.ensure(pn.deps)
            rendered = await self.s.renderer.value(spec.items, self._out.context)
            items = items_of(pn.id, rendered, spec.max_items)
        except (BatonError, ItemsError) as exc:
            error = exc.message if isinstance(exc, BatonError) else str(exc)
            assert self._index is not None
            entry_id = self.x.journal.start(step, self._index.next_attempt(pn.id))
            self.x.journal.finish(entry_id, status=NodeStatus.FAILED, error=error)
            shown = error if isinstance(exc, ItemsError) else f"`map.items` of `{pn.id}`: {error}"
            await self._fail(pn.id, shown)
            return False
        if not items:
            await self._skip(step, "`map.items` gave no items")
            return False
        self._items[pn.id] = items
        return True

    async def _run_map(self, step: Step) -> None:
        """Run a map node's items, then settle the node: its list of outputs, or its failure."""
        pn = step.node
        assert self._index is not None
        items = self._items.pop(pn.id)
        mapped = MapRun(
            self.x, self.runner, self._index, self._keys.root, self._run_item,
            lambda: self._verdicts.stopping, self._item_slots,
        )  # fmt: skip
        result = await mapped.run(step, items)
        for unsafe in result.attention:
            self._verdicts.attention.append(unsafe)
        for waiting in result.waiting:  # `workflow:` items whose child run waits (a gate)
            self._verdicts.children.append((pn.id, waiting.reason))
        if (result.attention or result.waiting) and not result.failed:
            return  # the items that may have run (or whose child waits) are not settled
        output = node_output(result.outputs)
        entry_id = self.x.journal.start(step, self._index.next_attempt(pn.id))
        digest = self.s.store.blobs.put_blob(output)
        if result.failed:
            error = result.error(pn.id)
            self.x.journal.finish(entry_id, status=NodeStatus.FAILED, output_digest=digest, error=error)
            await self._fail(pn.id, error)
            return
        self.x.journal.finish(entry_id, status=NodeStatus.COMPLETED, output_digest=digest)
        self._out.values[pn.id] = node_value(pn, result.outputs)
        await self.x.emit(EventKind.NODE_COMPLETED, pn.id, items=len(items))
        self._dag.release(pn.id, digest)

    async def _run_item(self, step: Step, item: Any) -> Attempt:
        """One item of a map node: rendered with the item under its `as:` name, then its attempts."""
        spec = step.node.node.map
        assert spec is not None and self._index is not None
        attempt = self._index.next_attempt(step.node.id)
        try:
            rendered = await self._render(step.node, {spec.as_: item})
        except BatonError as exc:
            entry_id = self.x.journal.start(step, attempt)
            self.x.journal.finish(entry_id, status=NodeStatus.FAILED, error=exc.message)
            return Failed(f"step `{step.node.id}`: {exc.message}")
        return await self._attempts(step, rendered, attempt)

    async def _fail(self, node_id: str, error: str) -> None:
        self._verdicts.failed.append((node_id, error))
        self._verdicts.stopping = True
        await self.x.emit(EventKind.NODE_FAILED, node_id, error=error)

    async def _needs_attention(self, node_id: str, error: ReplayUnsafe) -> None:
        """The step may have run and will not run again blindly: the run stops in needs_attention."""
        self._verdicts.attention.append(error)
        await self.x.emit(EventKind.NODE_ATTENTION, node_id, reason=error.message)

    def _on_ended(self, task: asyncio.Task[None]) -> None:
        self._finished.append(task)
        self._ended.set()

    def _prefetch(self, room: int) -> None:
        """Before the next `room` runnable steps run: record cache hits, load their inputs (in
        one read), restore artifacts. Only those: the queue behind them may be thousands long."""
        self.x.journal.flush_hits()
        deps = {dep for step in itertools.islice(self._runnable, room) for dep in step.node.deps}
        if self._out.restore or any(d not in self._out.values for d in deps):
            self._out.ensure(deps)

    # -- running one step ---------------------------------------------------------------------
    async def _render(self, pn: PreparedNode, item: Mapping[str, Any] | None = None) -> RenderedNode:
        """The step's templates rendered; `item`: a map item under its `as:` name."""
        node, out = pn.node, self._out
        renderer = self.s.renderer
        context = out.context if item is None else {**out.context, **item}
        if pn.kind == "bash":
            command = await renderer.command(node.body, context)
            return RenderedNode("bash", command=command.text, variables=command.variables)
        if pn.kind == "tool":
            kwargs = await renderer.value(node.with_, context) if node.with_ else {}
            return RenderedNode("tool", tool=node.tool, kwargs=kwargs)
        if pn.kind == "workflow":
            args = await renderer.value(node.with_, context) if node.with_ else {}
            return RenderedNode("workflow", workflow=node.workflow, kwargs=args)
        if pn.kind == "prompt":
            schema = (node.output.schema_ or {}) if node.output.format == "json" else None
            prompt = await renderer.text(node.body, context)
            provider = self.s.prepared.workflow.provider(node)
            return RenderedNode("prompt", prompt=prompt, provider=provider, output_schema=schema)
        stdin = {
            "inputs": out.inputs,
            "nodes": {dep: out.values[dep] for dep in pn.deps},
            "run": {"id": self.run_id},
            **(item or {}),
        }
        return RenderedNode(
            "script", script_source=self.s.definitions.sources[pn.node.id], stdin=canonical_json(stdin)
        )

    async def _run_step(self, step: Step) -> None:
        """Render the step once, then its attempts through the runner, retried per `retry:`."""
        pn = step.node
        assert self._index is not None
        if pn.node.map is not None:
            await self._run_map(step)
            return
        attempt = self._index.next_attempt(pn.id)
        try:
            rendered = await self._render(pn)
        except BatonError as exc:
            entry_id = self.x.journal.start(step, attempt)
            self.x.journal.finish(entry_id, status=NodeStatus.FAILED, error=exc.message)
            await self._fail(pn.id, f"step `{pn.id}`: {exc.message}")
            return
        result = await self._attempts(step, rendered, attempt)
        if isinstance(result, Completed):  # inline, not a coroutine of its own: once per step
            self._out.values[pn.id] = node_value(pn, result.value)
            if self.s.bus:
                seconds = round(result.seconds, 3)
                await self.x.emit(EventKind.NODE_COMPLETED, pn.id, seconds=seconds, tokens=result.tokens)
            self._dag.release(pn.id, result.digest)
        elif isinstance(result, Attention):
            await self._needs_attention(pn.id, result.error)
        elif isinstance(result, Waiting):
            self._verdicts.children.append((pn.id, result.reason))
        else:
            await self._fail(pn.id, result.error)

    async def _attempts(self, step: Step, rendered: RenderedNode, attempt: int) -> Attempt:
        """The step's attempts through the runner, retried per `retry:`: the last one's result."""
        pn = step.node
        if pn.kind == "workflow":  # a child run, never a step runner's or a worker's
            return await self._child(step, rendered, attempt)
        for tries in range(1, pn.attempts + 1):
            result = await self.runner.run(step, rendered, attempt)
            if isinstance(result, Completed):
                if result.artifacts:
                    self.x.artifacts.update(result.artifacts)
                return result
            if isinstance(result, Attention | Waiting) or tries == pn.attempts or self._verdicts.stopping:
                return result
            await self.x.emit(EventKind.NODE_FAILED, pn.id, error=result.error, retrying=True)
            await asyncio.sleep(replay.backoff_seconds(pn.node.retry, tries))
            attempt += 1
        raise AssertionError("a step has at least one attempt")

    async def _child(self, step: Step, rendered: RenderedNode, attempt: int) -> Attempt:
        """A `workflow:` step (or one item of it): its child run found or started, and waited
        for (`subruns.py`); journaled when the child rests with a result."""
        children, pn = self.s.children, step.node
        started = time.monotonic()
        if children is None or rendered.workflow is None:
            outcome: ChildOutcome | None = None
            error = f"step `{pn.id}`: this executor cannot start child runs"
        else:
            try:
                outcome = await children.run(self.run_id, pn.id, step.key, rendered.workflow, rendered.kwargs)
            except BatonError as exc:  # the child could not start (its inputs, a missing secret…)
                outcome, error = None, f"step `{pn.id}`: child run of `{rendered.workflow}`: {exc.message}"
        if isinstance(outcome, ChildWaiting):
            await self.x.emit(EventKind.NODE_WAITING, pn.id, prompt=outcome.reason, child=outcome.run_id)
            return Waiting(outcome.run_id, outcome.reason)
        if outcome is not None:
            step = replace(step, notes=replace(step.notes, child=outcome.run_id))
        entry_id = self.x.journal.start(step, attempt)
        if isinstance(outcome, ChildDone):
            data = canonical_json(outcome.output)
            digest = self.s.store.blobs.put_blob(data)
            self.x.journal.finish(entry_id, status=NodeStatus.COMPLETED, output_digest=digest)
            return Completed(digest, outcome.output, time.monotonic() - started, 0)
        if outcome is not None:
            error = outcome.error
        self.x.journal.finish(entry_id, status=NodeStatus.FAILED, error=error)
        return Failed(error)
