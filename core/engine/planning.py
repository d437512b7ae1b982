"""Pure views over a run's journal: the resume plan and the node table.

`plan_run` simulates what an execution would decide, node by node, without running
anything: `done` (completed in this run), `cached` (a lineage result with the same key),
`runs` (and why, in words) or `waits` (an approval, or an unsafe step that may have run).
When a node's upstream will re-run, its key is not known yet: it "runs if upstream `x`
output changes" (unless its own definition or inputs changed, which says so instead).

`summarize` builds the node table of `RunSummary` from the run's own journal entries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from core.engine.cache_key import CACHE_EXPIRED, cache_key, explain, same_except_upstream
from core.engine.events import NodePlan, NodeState, NodeSummary, Plan, RunSummary
from core.engine.executor import node_components
from core.engine.journal_index import MARKER_KEY, REJECTED_MARKER, JournalIndex, earlier_attempt, is_cut
from core.engine.mapping import counts_of, item_id, split_item_id
from core.engine.prepared import Definitions, PreparedWorkflow
from core.engine.replay import Recovery, recovery_for
from core.store.records import JournalEntry, NodeStatus, Run, RunStatus
from core.workflows.model import MAX_ITEMS_LIMIT

ERROR_TAIL = 300


def plan_run(
    run: Run,
    prepared: PreparedWorkflow,
    definitions: Definitions,
    inputs: Mapping[str, str],
    index: JournalIndex,
) -> Plan:
    digests: dict[str, str] = {}
    actions: dict[str, str] = {}
    rows: list[NodePlan] = []
    for node_id in prepared.order:
        pn = prepared.nodes[node_id]
        unknown = [d for d in pn.deps if d not in digests]
        upstream = {d: digests[d] for d in pn.deps if d in digests}
        components = node_components(pn, definitions, inputs, upstream, run.id)
        waiting = [d for d in unknown if actions[d] == "waits"]
        if waiting:
            action, reason, key = "waits", f"waits for `{waiting[0]}`", None
        elif unknown:
            action, reason, key = (
                "runs",
                _conditional_reason(pn.id, unknown, components, index, pn.memoize),
                None,
            )
        else:
            key = cache_key(components)
            action, reason = _decide(pn.id, pn.kind, key, components, index, pn.memoize, pn.replay)
            if action == "runs" and pn.node.map is not None:
                reason = _items_reason(pn.id, key, index) or reason
            hit = index.lookup(key) if action in ("done", "cached") else None
            if hit is None and action == "done":
                hit = index.own_legacy(pn.id, components)
            if hit is not None and hit.output_digest is not None:
                digests[node_id] = hit.output_digest
        actions[node_id] = action
        rows.append(NodePlan(node_id=node_id, kind=pn.kind, action=action, reason=reason, cache_key=key))
    return Plan(run_id=run.id, workflow=run.workflow, nodes=tuple(rows))


def _items_reason(node_id: str, key: str, index: JournalIndex) -> str | None:
    """For a map node that runs again with the key it had: which of its items run again (those
    without a result) and how many come from the cache. None when that is not known (its key
    changed, so may its items)."""
    latest = index.latest(node_id)
    if latest is None or latest.cache_key != key:
        return None
    rows: list[JournalEntry] = []
    while len(rows) < MAX_ITEMS_LIMIT and (entry := index.latest(item_id(node_id, len(rows)))) is not None:
        rows.append(entry)
    total = max([e.notes.items or 0 for e in rows], default=0)
    if not rows or total != len(rows):
        return None
    again = [item_id(node_id, i) for i, e in enumerate(rows) if e.status is not NodeStatus.COMPLETED]
    named = ", ".join(f"`{n}`" for n in again[:5]) + (f" and {len(again) - 5} more" if len(again) > 5 else "")
    return f"{len(again)} of {total} items run again ({named}: no result); {total - len(again)} cached"


def _decide(
    node_id: str,
    kind: str,
    key: str,
    components: dict[str, Any],
    index: JournalIndex,
    memoize: bool,
    replay: Any,
) -> tuple[str, str]:
    dangling = index.dangling(node_id)
    if dangling is not None and recovery_for(replay) is Recovery.ATTENTION:
        return "waits", "may have run (unsafe, no result recorded): settle it with `resolve`"
    hit = index.lookup(key) if memoize else None
    if hit is not None and hit.output_digest is not None:
        if hit.run_id == index.run_id:
            return "done", "completed in this run"
        return "cached", f"same key as run {hit.cached_from or hit.run_id}"
    if memoize and kind != "approval" and index.own_legacy(node_id, components) is not None:
        return "done", "completed in this run"
    if kind == "approval":
        return "waits", "approval"
    if dangling is not None:
        return "runs", f"was in flight when its process stopped; re-runs ({replay})"
    return "runs", index.miss_reason(node_id, key, components, memoize=memoize)


def _conditional_reason(
    node_id: str, unknown: Sequence[str], components: dict[str, Any], index: JournalIndex, memoize: bool
) -> str:
    if not memoize:
        return "memoize: false"
    latest = index.latest(node_id)
    cut = index.cut(node_id)
    if cut is not None and (latest is None or latest.id < cut.entry_id):
        return f"invalidated by {cut.by}"
    if latest is None:
        return "no earlier result"
    if latest.status is not NodeStatus.COMPLETED:  # no result to re-use, whatever upstream gives
        return earlier_attempt(latest)
    if index.expired(latest):  # runs whatever upstream gives
        return CACHE_EXPIRED
    if same_except_upstream(latest.components, components):
        names = ", ".join(f"`{d}`" for d in unknown)
        return f"runs if upstream {names} output changes"
    return explain(latest.components, {**components, "upstream": latest.components.get("upstream", {})})


# -- the node table --------------------------------------------------------------------------


def own_latest(entries: Sequence[JournalEntry]) -> dict[str, JournalEntry]:
    """Each node's latest entry among `entries` (decision markers left out, except
    invalidations and rejections): the entry its row in the node table describes."""
    latest: dict[str, JournalEntry] = {}
    for entry in sorted(entries, key=lambda e: e.id):
        if (
            entry.cache_key == MARKER_KEY
            and not is_cut(entry)
            and entry.components.get("marker") != REJECTED_MARKER
        ):
            continue
        latest[entry.node_id] = entry
    return latest


def _gates(names: Sequence[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _row(
    node_id: str, kind: str, entry: JournalEntry | None, run: Run, deps_done: bool,
    after: Sequence[str] = (),
) -> NodeSummary:
    """One node's row; `after`: the gates above it that wait (a paused run) or were rejected."""
    status = run.status
    if entry is None:
        if kind == "approval" and status is RunStatus.PAUSED and deps_done:
            return NodeSummary(node_id, kind, NodeState.WAITING, reason="waiting for approval")
        if status is RunStatus.PAUSED and after:  # not skipped: it runs once they are approved
            return NodeSummary(node_id, kind, NodeState.WAITING, reason=f"waits for {_gates(after)}")
        if status in (RunStatus.RUNNING, RunStatus.PENDING, RunStatus.QUEUED, RunStatus.NEEDS_ATTENTION):
            return NodeSummary(node_id, kind, NodeState.QUEUED)  # (needing attention: runs once settled)
        if after:
            return NodeSummary(node_id, kind, NodeState.SKIPPED, reason=f"skipped: {_gates(after)} rejected")
        return NodeSummary(node_id, kind, NodeState.SKIPPED)
    seconds = round((entry.finished_at or entry.started_at) - entry.started_at, 3)
    tokens = entry.tokens_in + entry.tokens_out
    error = (entry.error or "")[-ERROR_TAIL:]
    reason = entry.notes.reason or ""
    if entry.cache_key == MARKER_KEY and entry.components.get("marker") == REJECTED_MARKER:
        by, why = entry.components.get("by"), entry.components.get("reason")
        text = f"rejected by {by}" + (f": {why}" if why else "")
        if str(entry.error or "").startswith("timed out"):  # on_timeout: fail
            return NodeSummary(node_id, kind, NodeState.FAILED, reason="no decision in time", error=error)
        return NodeSummary(node_id, kind, NodeState.REJECTED, reason=text)
    if is_cut(entry):
        by = entry.invalidated_by or entry.components.get("by")
        if kind == "approval" and status is RunStatus.PAUSED and deps_done:  # invalidated as it waits
            why = f"waiting for approval ({by} invalidated it)"
            return NodeSummary(node_id, kind, NodeState.WAITING, reason=why)
        state = NodeState.QUEUED if status is RunStatus.RUNNING else NodeState.SKIPPED
        return NodeSummary(node_id, kind, state, reason=f"invalidated by {by}")
    if entry.status is NodeStatus.COMPLETED and entry.notes.skipped is not None:
        why = entry.notes.skipped
        return NodeSummary(node_id, kind, NodeState.SKIPPED, reason=f"skipped: {why}")
    if entry.status is NodeStatus.COMPLETED and entry.cached_from:
        saved = entry.notes.saved_tokens
        return NodeSummary(
            node_id, kind, NodeState.CACHED, tokens_saved=saved, reason=f"cached from {entry.cached_from}"
        )
    if entry.status is NodeStatus.COMPLETED:
        return NodeSummary(node_id, kind, NodeState.DONE, seconds=seconds, tokens=tokens, reason=reason)
    if entry.status is NodeStatus.FAILED:
        return NodeSummary(
            node_id, kind, NodeState.FAILED, seconds=seconds, tokens=tokens, reason=reason, error=error
        )
    if status is RunStatus.RUNNING:
        return NodeSummary(node_id, kind, NodeState.RUNNING, reason=reason)
    if status is RunStatus.NEEDS_ATTENTION:
        return NodeSummary(node_id, kind, NodeState.ATTENTION, reason="may have run; no result recorded")
    return NodeSummary(node_id, kind, NodeState.FAILED, reason=reason, error="interrupted")


def _item_of_map(prepared: PreparedWorkflow, node_id: str) -> bool:
    """`node_id` is an item row (`deploy[3]`) of a map node: counted on its node's row."""
    split = split_item_id(node_id)
    if split is None:
        return False
    pn = prepared.nodes.get(split[0])
    return pn is not None and pn.node.map is not None


def _map_row(row: NodeSummary, entry: JournalEntry | None, latest: Mapping[str, JournalEntry],
             run: Run) -> NodeSummary:
    """A map node's row: its own entry's state once settled, else its items' (one row, never
    one per item), with how far its items are."""
    counts = counts_of(row.node_id, latest)
    if counts is None:
        return row
    newest = max(e.id for n, e in latest.items() if (split_item_id(n) or ("", 0))[0] == row.node_id)
    if (entry is None or entry.id < newest) and run.status is RunStatus.RUNNING:
        return dataclasses.replace(row, state=NodeState.RUNNING, mapped=counts.text(), error="")
    if entry is None and run.status is RunStatus.NEEDS_ATTENTION:
        reason = "an item may have run; no result recorded"
        return dataclasses.replace(row, state=NodeState.ATTENTION, mapped=counts.text("may have run"),
                                   reason=reason)
    return dataclasses.replace(row, mapped=counts.text("may have run"))


def child_row(row: NodeSummary, entry: JournalEntry | None, kid: Run, run: Run) -> NodeSummary:
    """A `workflow:` step's row with its child run: waiting or running while the child does."""
    if entry is None and kid.status in (RunStatus.PAUSED, RunStatus.NEEDS_ATTENTION):
        why = run.reason if run.reason and kid.id in run.reason else None
        why = why or f"waiting on child {kid.id} ({kid.status.value})"
        return dataclasses.replace(row, state=NodeState.WAITING, reason=why, child=kid.id)
    if entry is None and not kid.status.resting:
        state = NodeState.RUNNING if run.status is RunStatus.RUNNING else row.state
        why = f"child {kid.id} {kid.status.value}"
        return dataclasses.replace(row, state=state, reason=why, child=kid.id)
    parts = (row.reason, f"child {kid.id}") if kid.id not in row.reason else (row.reason,)
    return dataclasses.replace(row, reason=" · ".join(p for p in parts if p), child=kid.id)


def _items_waiting(row: NodeSummary, items: Sequence[Run], run: Run) -> NodeSummary:
    """A `map:` over a `workflow:` step whose items' children wait (a gate, a step needing
    attention): waiting on the child the run's reason names, not skipped."""
    waiting = [k for k in items if k.status in (RunStatus.PAUSED, RunStatus.NEEDS_ATTENTION)]
    if not waiting or run.status is not RunStatus.PAUSED:
        return row
    named = [k for k in waiting if run.reason and k.id in run.reason]
    kid = (named or waiting)[0]
    why = run.reason if named and run.reason else f"waiting on child {kid.id} ({kid.status.value})"
    return dataclasses.replace(row, state=NodeState.WAITING, reason=why, child=kid.id)


def item_rows(run: Run, prepared: PreparedWorkflow, row: NodeSummary,
              latest: Mapping[str, JournalEntry]) -> list[NodeSummary]:
    """The rows of a map node's items (`deploy[0]`, `deploy[1]`, …), in item order: for the run
    page, which lists them; the progress message and the node table show only `row`."""
    pn = prepared.nodes.get(row.node_id)
    if pn is None or pn.node.map is None:
        return []
    items = sorted(
        (split[1], n) for n in latest if (split := split_item_id(n)) is not None and split[0] == row.node_id
    )
    return [_row(n, pn.kind, latest[n], run, True) for _, n in items]


def summarize(
    run: Run, prepared: PreparedWorkflow | None, entries: Sequence[JournalEntry], output: str | None,
    now: float | None = None, children: Sequence[Run] = (),
) -> RunSummary:
    """The run's node table; `now`: the time, so a run still moving shows how long it has run
    so far (without it, or at rest: until its last status change); `children`: the run's child
    runs (`Store.child_runs`, newest first), shown on their `workflow:` steps' rows."""
    latest = own_latest(entries)
    kids: dict[str, Run] = {}
    for kid in children:
        kids.setdefault(kid.parent_node or "", kid)
    if prepared is not None:
        order = list(prepared.order) + [
            n for n in latest if n not in prepared.nodes and not _item_of_map(prepared, n)
        ]
    else:
        order = list(latest)
    rows: list[NodeSummary] = []
    stopped_by: dict[str, list[str]] = {}  # only the nodes below such gates: most have none
    stopping: set[str] = set()
    nodes = prepared.nodes if prepared is not None else {}
    for node_id in order:
        pn = nodes.get(node_id)
        entry = latest.get(node_id)
        kind = pn.kind if pn is not None else "?"
        deps = pn.deps if pn is not None else ()
        # (only a node without an entry reads it: a 5,000-node page built it for every row)
        deps_done = (entry is None or (kind == "approval" and is_cut(entry))) and pn is not None and all(
            (d in latest and latest[d].status is NodeStatus.COMPLETED) for d in deps
        )
        # the gates above it that wait or were rejected (an order that is topological)
        above: list[str] = []
        if stopped_by or stopping:
            gates = {g for d in deps for g in stopped_by.get(d, ())} | {d for d in deps if d in stopping}
            above = sorted(gates)
        row = _row(node_id, kind, entry, run, deps_done, above)
        if above:
            stopped_by[node_id] = above
        if kind == "approval" and row.state in (NodeState.WAITING, NodeState.REJECTED) and not above:
            stopping.add(node_id)
        if pn is not None and pn.node.map is not None:
            row = _map_row(row, entry, latest, run)
            items = [k for n, k in kids.items() if (split_item_id(n) or ("", 0))[0] == node_id]
            if items and entry is None:
                row = _items_waiting(row, items, run)
                if row.state is NodeState.WAITING:
                    stopping.add(node_id)
        elif node_id in kids:
            row = child_row(row, entry, kids[node_id], run)
            if row.state is NodeState.WAITING:
                stopping.add(node_id)  # the steps below it wait for it, like below a gate
        rows.append(row)
    failed = next((r.node_id for r in rows if r.state in (NodeState.FAILED, NodeState.ATTENTION)), None)
    return RunSummary(
        run_id=run.id,
        workflow=run.workflow,
        status=run.status.value,
        nodes=tuple(rows),
        seconds=round(_until(run, now) - run.created_at, 3),
        tokens=sum(r.tokens for r in rows),
        tokens_saved=sum(r.tokens_saved for r in rows),
        output=output,
        failed_node=failed if run.status in (RunStatus.FAILED, RunStatus.NEEDS_ATTENTION) else None,
        reason=_waiting_now(run, rows),
    )


def _waiting_now(run: Run, rows: Sequence[NodeSummary]) -> str | None:
    """The run's reason; for a parent paused on children, the child it waits on now: its reason
    names the child that paused it first, which may have rested since (a map's other item's
    child still waits)."""
    if run.status is not RunStatus.PAUSED or not (run.reason or "").startswith("waiting on child"):
        return run.reason
    waiting = [r for r in rows if r.state is NodeState.WAITING and r.child]
    if not waiting or any(r.child in (run.reason or "") for r in waiting):
        return run.reason
    return waiting[0].reason


def _until(run: Run, now: float | None) -> float:
    moving = run.status in (RunStatus.RUNNING, RunStatus.PENDING)
    return max(now, run.updated_at) if moving and now is not None else run.updated_at


def final_output_digest(prepared: PreparedWorkflow | None, entries: Sequence[JournalEntry]) -> str | None:
    """The output digest of the last sink node completed in this run (the run's result)."""
    return final_output(prepared, own_latest(entries))


def final_output(prepared: PreparedWorkflow | None, latest: Mapping[str, JournalEntry]) -> str | None:
    """`final_output_digest` from each node's latest entry (`own_latest`)."""
    if prepared is None:
        return None
    for node_id in reversed(prepared.sinks()):
        entry = latest.get(node_id)
        skipped = entry is not None and entry.notes.skipped is not None
        if entry is not None and entry.status is NodeStatus.COMPLETED and entry.output_digest and not skipped:
            return entry.output_digest
    return None
