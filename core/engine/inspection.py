"""A run seen whole, for its page: every node with its state, timing, cache verdict and
reason, its dependencies, where its output and artifacts are, and, for a run that rests
unfinished, what a resume would do with it (the plan).

`inspect_run` is pure: it joins what `Engine.inspect` read in a few batched queries (the
journal of the run, or of its lineage when a plan is wanted) with the prepared workflow.
Text here is as stored: whoever shows it to people redacts it first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

from core.engine.events import NodeState, Plan, RunSummary
from core.engine.mapping import split_item_id
from core.engine.planning import final_output, item_rows, own_latest, summarize
from core.engine.prepared import PreparedWorkflow
from core.store.records import JournalEntry, Run, RunStatus

_NO_ARTIFACTS: Mapping[str, str] = MappingProxyType({})

#: The statuses whose page shows a resume plan: a person decides what happens next.
PLANNED = frozenset({RunStatus.FAILED, RunStatus.PAUSED, RunStatus.NEEDS_ATTENTION})


class NodeDetail(NamedTuple):
    """One node of the page. A named tuple rather than a frozen dataclass (as `PreparedNode`):
    as immutable, built in one C call where a frozen dataclass sets each field through
    `object.__setattr__`, which was a sixth of a 5,000-node page's time."""

    node_id: str
    kind: str
    state: NodeState
    deps: tuple[str, ...] = ()
    seconds: float = 0.0
    tokens: int = 0
    tokens_saved: int = 0
    #: the cache verdict in words: "cached from r_…", "no earlier result", "definition changed", …
    reason: str = ""
    error: str = ""  # the stderr tail or the contract / crash message of a failed attempt
    started_at: float | None = None
    finished_at: float | None = None
    attempt: int = 0
    cached_from: str | None = None
    output_digest: str | None = None
    artifacts: Mapping[str, str] = _NO_ARTIFACTS  # relative path -> blob digest
    #: for a run resting unfinished: what a resume would do ("cached", "runs", "waits", "done"), and why
    plan_action: str | None = None
    plan_reason: str | None = None
    item_of: str | None = None  # an item row (`deploy[3]`): the map node it belongs to
    child: str | None = None  # a `workflow:` step (or item): its child run, which has its own page


@dataclass(frozen=True, slots=True)
class Shown:
    """The nodes a detail is asked for when a run has more than `over` (a big run's page
    paints its summary first): those in `states`, and `node`. Every node is counted in
    `RunDetail.counts` all the same."""

    states: frozenset[NodeState]
    node: str | None = None
    over: int = 0


@dataclass(frozen=True, slots=True)
class RunDetail:
    run: Run
    summary: RunSummary
    #: every node in page order; with `Shown`, for a run over its size, only the nodes asked for
    nodes: tuple[NodeDetail, ...]
    output_digest: str | None = None  # the run's result: the last sink completed in this run
    known: bool = True  # the workflow's definition was loaded (dependencies are known)
    plan_error: str | None = None  # why no plan could be made (workflow broken, inputs changed)
    counts: Mapping[str, int] = field(default_factory=dict)  # every node's state, counted (in page order)
    total: int = 0  # every node
    planned: bool = False  # a resume plan gives some node an action

    def node(self, node_id: str) -> NodeDetail | None:
        """The node `node_id` of the run (an item of a map: `deploy[3]`), or None."""
        return next((n for n in self.nodes if n.node_id == node_id), None)


def inspect_run(
    run: Run,
    prepared: PreparedWorkflow | None,
    entries: Sequence[JournalEntry],
    plan: Plan | None = None,
    plan_error: str | None = None,
    children: Sequence[Run] = (),
    shown: Shown | None = None,
) -> RunDetail:
    """The detail of `run` from its own journal `entries` (other runs' entries are ignored);
    `children`: its child runs, newest first (each `workflow:` step links its latest);
    `shown`: the nodes detailed when the run is big (the others are only counted)."""
    own = [e for e in entries if e.run_id == run.id]
    summary = summarize(run, prepared, own, None, children=children)
    kids: dict[str, str] = {}
    for kid in children:
        kids.setdefault(kid.parent_node or "", kid.id)
    latest = own_latest(own)
    planned = {p.node_id: p for p in plan.nodes} if plan is not None else {}
    nodes: list[NodeDetail] = []
    rows = list(summary.nodes)
    if prepared is not None and any(pn.node.map is not None for pn in prepared.nodes.values()):
        # the page lists a map node's items after it (progress never does)
        rows = [r for row in rows for r in (row, *item_rows(run, prepared, row, latest))]
    some = shown if shown is not None and len(rows) > shown.over else None
    for row in rows:
        if some is not None and row.state not in some.states and row.node_id != some.node:
            continue
        entry = latest.get(row.node_id)
        pn = prepared.nodes.get(row.node_id) if prepared is not None else None
        item = split_item_id(row.node_id) if pn is None and prepared is not None else None
        if item is not None and prepared is not None:
            pn = prepared.nodes.get(item[0])
        step = planned.get(row.node_id)
        nodes.append(NodeDetail(
            node_id=row.node_id,
            kind=row.kind,
            state=row.state,
            deps=pn.deps if pn is not None else (),
            seconds=row.seconds,
            tokens=row.tokens,
            tokens_saved=row.tokens_saved,
            reason=row.reason,
            error=(entry.error or "") if entry is not None else "",
            started_at=entry.started_at if entry is not None else None,
            finished_at=entry.finished_at if entry is not None else None,
            attempt=entry.attempt if entry is not None else 0,
            cached_from=entry.cached_from if entry is not None else None,
            output_digest=entry.output_digest if entry is not None else None,
            artifacts=dict(entry.artifacts) if entry is not None else {},
            plan_action=step.action if step is not None else None,
            plan_reason=step.reason if step is not None else None,
            item_of=item[0] if item is not None else None,
            child=kids.get(row.node_id),
        ))
    return RunDetail(
        run=run,
        summary=summary,
        nodes=tuple(nodes),
        output_digest=final_output(prepared, latest),
        known=prepared is not None,
        plan_error=plan_error,
        counts=dict(Counter(str(r.state) for r in rows)),
        total=len(rows),
        planned=bool(planned) and any((p := planned.get(r.node_id)) is not None and p.action for r in rows),
    )
