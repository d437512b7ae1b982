"""`workflow:` steps: a child run of another workflow, waited for, its result the step's.

    - id: notes
      workflow: release-notes
      with: {message: "{{ inputs.version }}"}

`ChildRuns.run(parent, step, workflow, args)` is what the executor calls for such a step (for
each item under `map:`). It finds the child the step started before, in the parent's
lineage (`Store.child_runs`, the child's `parent_node` and `parent_key`), and:

    completed, same key              -> its result (nothing runs again)
    failed, same key                 -> resumed (its own journal: an unsafe step that may have
                                        run needs attention, never runs twice)
    running, queued, paused, needs   -> waited for
      attention, same key
    none, cancelled, or another key  -> a new child, `--resume-from` the last one when there is
      (args or the child's definition   one, so its unchanged steps come from the cache
      changed)

A new child runs as the parent's principal, in the parent's thread, `started_by:
parent:<run>`, through its workflow's concurrency admission like any run. Waiting for it
holds no step runner or worker: the parent's execution awaits the child's rest. A child that
rests without a result (a gate waits, a step needs attention) makes the step `Waiting`: the
parent pauses ("waiting on child c0ffee at `review`"); when the child comes to rest later
the engine continues the parent (`Engine._on_event` -> `ChildRuns.child_rested`).

The step's cache key includes the child workflow's definition (`with_children`), so editing
the child busts the parent's step, and the new child re-uses the old one's unchanged steps.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from core.engine.cache_key import digest_value
from core.engine.events import ENGINE_ACTOR, EventKind
from core.engine.journal_index import MARKER_KEY
from core.engine.mapping import split_item_id
from core.engine.node_values import decode_output
from core.engine.prepared import Definitions, PreparedWorkflow, prepare, read_definitions
from core.errors import BatonError
from core.store.port import Runs, Transition
from core.store.records import NodeStatus, Run, RunStatus

if TYPE_CHECKING:
    from core.engine.engine import Engine
    from core.engine.providers import ProviderRegistry
    from core.engine.tools import ToolRegistry
    from core.workflows.model import Workflow

log = logging.getLogger("baton.engine")
#: `started_by` of a child run: `parent:<run id>`
PARENT_PREFIX = "parent:"
#: a child in one of these no longer keeps its parent waiting
_SETTLED = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)


@dataclass(frozen=True, slots=True)
class ChildDone:
    """The child completed: the step's output."""

    run_id: str
    output: dict[str, Any]  # {status, workflow, outputs: {node: output}}


@dataclass(frozen=True, slots=True)
class ChildFailed:
    run_id: str
    error: str


@dataclass(frozen=True, slots=True)
class ChildWaiting:
    """The child rests without a result (a gate waits, a step needs attention)."""

    run_id: str
    reason: str  # "waiting on child c0ffee at `review`"


ChildOutcome = ChildDone | ChildFailed | ChildWaiting


def item_child(run: Run) -> bool:
    """A child run of one item of a `map:` over a `workflow:` step: it posts no progress
    message of its own and says nothing when it completes (a fan-out of 100 children is the
    parent's one map line, never 100 messages); its gates and failures are still told."""
    return run.parent_node is not None and split_item_id(run.parent_node) is not None


def waiting_child(runs: Runs, parent: Run) -> Run | None:
    """The child run a paused `parent` waits on (at a gate, or needing attention), if any: the
    one its reason names, when several wait (the items of a `map:` over a `workflow:` step)."""
    waiting = (RunStatus.PAUSED, RunStatus.NEEDS_ATTENTION)
    kids = [c for c in runs.child_runs([parent.id]) if c.status in waiting]
    named = [c for c in kids if parent.reason and c.id in parent.reason]
    return next(iter(named or kids), None)


def waiting_reason(child: Run, gate_node: str | None) -> str:
    """Why a parent waits on `child`: a gate, or a step that needs attention."""
    if child.status is RunStatus.NEEDS_ATTENTION:
        return f"waiting on child {child.id}, which needs attention ({child.reason or 'a step may have run'})"
    return f"waiting on child {child.id} at `{gate_node or '?'}`"


class ChildRuns:
    """Starts, finds, resumes and waits for child runs on behalf of the engine's executions."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def run(self, parent_id: str, node_id: str, key: str, workflow: str,
                  args: Mapping[str, Any]) -> ChildOutcome:  # fmt: skip
        """The child of step `node_id` (an item id under `map:`) with cache key `key`, found
        or started, until it rests (see the module docstring)."""
        engine, store = self.engine, self.engine.store
        parent = store.runs.get_run(parent_id)
        may_run = engine.config.may_run
        if may_run is not None and not may_run(parent.requester, workflow):  # fail closed
            return ChildFailed("", f"{parent.requester} may not run `{workflow}`, and a child run of it "
                                   "runs as its parent's requester")  # fmt: skip
        earlier = [
            k for k in store.runs.child_runs(store.steps.lineage(parent_id)) if k.parent_node == node_id
        ]
        same = next((k for k in earlier if k.parent_key == key and k.workflow == workflow), None)
        child: Run | None = None
        if same is not None and same.status is RunStatus.FAILED:
            actor = parent.status_by or parent.requester  # who resumed the parent resumes its child
            child = await engine.resume(same.id, actor=actor)
        elif same is not None and same.status is not RunStatus.CANCELLED:
            child = same
        if child is not None and child.parent_run != parent.id:  # a child of an earlier run of
            child = store.runs.adopt_child(child.id, parent.id)  # the lineage: this run waits on it now
        if child is None:
            child = await engine.start_run(
                workflow=workflow, args=args, platform=parent.platform,
                conversation=parent.conversation, thread=parent.thread, requester=parent.requester,
                resume_from=earlier[0].id if earlier else None, started_by=PARENT_PREFIX + parent.id,
                parent_run=parent.id, parent_node=node_id, parent_key=key,
            )  # fmt: skip
            await engine.executions.emit(EventKind.NODE_STARTED, parent.id, node_id, child=child.id,
                                         workflow=workflow)  # fmt: skip
        rested = child if child.status.resting else await engine.wait(child.id)
        return self.outcome(rested)

    def outcome(self, child: Run) -> ChildOutcome:
        """What a resting child means for its step."""
        if child.status is RunStatus.COMPLETED:
            return ChildDone(child.id, self.result(child))
        if child.status is RunStatus.CANCELLED:
            return ChildFailed(child.id, f"child run {child.id} of `{child.workflow}` was cancelled"
                               f" ({child.reason or child.status_by})")  # fmt: skip
        if child.status is RunStatus.FAILED:
            return ChildFailed(child.id, f"child run {child.id} of `{child.workflow}` failed: {child.reason}")
        gate = self.engine.store.gates.waiting_gate(child.id)
        return ChildWaiting(child.id, waiting_reason(child, gate.node_id if gate else None))

    def result(self, child: Run) -> dict[str, Any]:
        """A completed child's result: its status, workflow and every node's output."""
        store = self.engine.store
        latest: dict[str, str] = {}
        for entry in store.steps.journal([child.id]):
            if entry.cache_key == MARKER_KEY or split_item_id(entry.node_id) is not None:
                continue
            if entry.status is NodeStatus.COMPLETED and entry.output_digest is not None:
                latest[entry.node_id] = entry.output_digest
        blobs = store.blobs.get_blobs(set(latest.values()))
        prepared: PreparedWorkflow | None
        try:
            prepared = prepare(self.engine.catalog.get(child.workflow), self.engine.tools)
        except BatonError:
            prepared = None
        outputs: dict[str, Any] = {}
        for node_id, digest in latest.items():
            text = blobs[digest].decode("utf-8", errors="replace")
            pn = prepared.nodes.get(node_id) if prepared is not None else None
            try:
                outputs[node_id] = decode_output(pn, text) if pn is not None else text
            except json.JSONDecodeError:
                outputs[node_id] = text
        # not the child's id: a child that ran again with the same outputs leaves the step's
        # output, and so its dependents' keys, as they were (the id is on the step's row)
        return {"status": child.status.value, "workflow": child.workflow, "outputs": outputs}

    async def settle(self, parent_id: str) -> None:
        """A parent paused waiting on its children goes on once none of them waits any more:
        every child completed -> the parent resumes and takes their results; one failed or was
        cancelled -> the parent fails with it (nothing resumes a child behind anyone's back:
        resuming the parent resumes the child). Called when a child rests, and when the parent
        pauses (a child may have rested meanwhile)."""
        engine, store = self.engine, self.engine.store
        parent = store.runs.get_run(parent_id)
        if parent.status is not RunStatus.PAUSED or store.gates.waiting_gate(parent.id) is not None:
            return  # running (its execution waits on the child itself), or at a gate of its own
        latest: dict[str, Run] = {}
        for child in store.runs.child_runs([parent.id]):  # newest first: each step's latest child
            latest.setdefault(child.parent_node or "", child)
        if not latest or any(c.status not in _SETTLED for c in latest.values()):
            return  # a child still runs, waits at a gate or needs attention: the parent waits on
        failed = next((c for c in latest.values() if c.status is not RunStatus.COMPLETED), None)
        if failed is None:
            try:
                await engine.resume(parent.id, actor=ENGINE_ACTOR)
            except BatonError as exc:  # another actor won: theirs stands
                log.info("parent %s not resumed: %s", parent.id, exc.message,
                         extra={"action": "settle_parent", "run_id": parent.id})  # fmt: skip
            return
        outcome = self.outcome(failed)
        assert isinstance(outcome, ChildFailed)
        try:
            with store.transaction() as tx:
                ended = tx.transition(Transition(parent.id, RunStatus.FAILED, actor=ENGINE_ACTOR,
                                                 reason=outcome.error,
                                                 expected_version=parent.version,
                                                 allowed_from=[RunStatus.PAUSED]))
                engine.notifier.rest(tx, parent, RunStatus.FAILED, reason=outcome.error,
                                     node=failed.parent_node)
        except BatonError:
            return
        await engine.executions.emit(EventKind.RUN_FINISHED, parent.id, run_status=ended.value.status.value,
                                     reason=outcome.error, keyed=parent.concurrency is not None,
                                     parent=parent.parent_run)  # fmt: skip

    async def cancel_children(self, parent: Run, *, actor: str, why: str) -> None:
        """The parent was abandoned or cancelled: so are its children that have not finished
        (and theirs, through this same rule)."""
        for child in self.engine.store.runs.child_runs([parent.id]):
            if child.status.finished:
                continue
            try:
                await self.engine.abandon(child.id, actor=actor, reason=f"{why} (parent {parent.id})")
            except BatonError as exc:
                log.info("child %s not cancelled: %s", child.id, exc.message,
                         extra={"action": "cancel_children", "run_id": child.id})  # fmt: skip


def with_children(
    definitions: Definitions,
    prepared: PreparedWorkflow,
    child: Callable[[str], Definitions],
) -> Definitions:
    """`definitions` with every `workflow:` node's digest folding in the child workflow's
    definition (each of its nodes' digests and identities, its children's included), so an
    edit of the child busts the parent's step and is explained as its definition changing."""
    calls = {node_id: pn.node.workflow for node_id, pn in prepared.nodes.items() if pn.node.workflow}
    if not calls:
        return definitions
    digests = dict(definitions.digests)
    for node_id, name in calls.items():
        assert name is not None
        sub = child(name)
        digests[node_id] = digest_value({
            "node": digests[node_id],
            "child": {"digests": sub.digests, "identities": sub.identities},
        })  # fmt: skip
    return replace(definitions, digests=digests)


def child_definitions(workflow: Callable[[str], Workflow], tools: ToolRegistry,
                      providers: ProviderRegistry) -> Callable[[str], Definitions]:  # fmt: skip
    """The definitions of a child workflow, by name, its own children folded in (the catalog
    refuses cycles and chains deeper than `subworkflows.MAX_DEPTH` at load)."""

    def definitions(name: str) -> Definitions:
        prepared = prepare(workflow(name), tools)
        return with_children(read_definitions(prepared, providers=providers), prepared, definitions)

    return definitions
