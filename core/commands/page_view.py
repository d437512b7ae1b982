"""What a run page shows, as plain data for its template (the web adapter's, templates/web):
built from a few batched reads (the run, its journal, its gates, its audit and, in one query,
the outputs shown) and redacted. Platform-neutral: the picture of the DAG is drawn by the
caller's `draw` (the web adapter's layout), the words are the templates'.

Every text that came from the store (outputs, stderr tails, reasons, questions, comments,
audit details, arguments) passes through the process's `Redactor` here, before any template
sees it; the app redacts the rendered page once more as a last guard.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from core.commands import authz, queueing, voting
from core.commands.resolution import next_commands
from core.config import Access
from core.engine.approval_policy import Standing
from core.engine.engine import Engine
from core.engine.events import NodeState
from core.engine.inspection import NodeDetail, RunDetail, Shown
from core.engine.live import Snapshot, snapshot, verdict
from core.errors import StoreError, WorkflowError
from core.redaction import Redactor
from core.render import environment
from core.store.port import Ballots, Blobs, Events, Gates, Runs, Views
from core.store.records import AuditEvent, Gate, GateStatus, GateVote, Run, RunStatus
from core.workflows.catalog import Catalog

#: The node list's groups, in this order; the first four start open.
STATE_ORDER = (
    NodeState.FAILED, NodeState.REJECTED, NodeState.ATTENTION, NodeState.WAITING, NodeState.RUNNING,
    NodeState.QUEUED, NodeState.DONE, NodeState.CACHED, NodeState.SKIPPED,
)  # fmt: skip
OPEN_STATES = frozenset({NodeState.FAILED, NodeState.REJECTED, NodeState.ATTENTION, NodeState.WAITING,
                         NodeState.RUNNING})
_STATES = frozenset(str(s) for s in NodeState)
ALL_OPEN_UP_TO = 40  # a run this small shows every group open
#: a run with more nodes is shown summary first (issue 34): its first paint lists the failed,
#: waiting and running nodes; the other groups' rows and the graph are fetched when opened
#: (`/r/<token>/group/<state>`, `/r/<token>/graph`: the same link, the same checks)
LAZY_OVER = 1000
INLINE_OUTPUTS = 200  # up to this many nodes, each row shows the start of its output
PREVIEW_CHARS = 600
PAGE_CHARS = 64_000  # one page of a node's output
DECISIONS = frozenset({"approve", "reject", "reopen_gate", "refused", "nl_decision"})


#: Lays out a DAG for the page (node ids in topological order, dependencies by id): the picture.
Draw = Callable[[Sequence[str], Mapping[str, Sequence[str]]], Any]


class PageStore(Protocol):
    """The store roles the pages read (they write nothing themselves)."""

    @property
    def runs(self) -> Runs: ...
    @property
    def gates(self) -> Gates: ...
    @property
    def ballots(self) -> Ballots: ...
    @property
    def blobs(self) -> Blobs: ...
    @property
    def events(self) -> Events: ...
    @property
    def views(self) -> Views: ...


@dataclass(frozen=True)
class Parts:
    """What the pages read, all from the assembled runtime."""

    store: PageStore
    engine: Engine
    catalog: Catalog
    access: Access
    redactor: Redactor


def clock(at: float | None) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(at)) + "Z" if at else ""


def when(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)) + "Z" if at else ""


def decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def question_digest(question: str) -> str:
    """What the page asked (redacted, as shown): a decision counts only for that question."""
    return hashlib.sha256(question.encode("utf-8")).hexdigest()[:32]


def question_changed(parts: Parts, run: Run, node: str, digest: str) -> bool:
    """A decision sent from a page that showed another question than the gate waiting now
    (another node, or its question changed): it counts for nothing, the page shows it again."""
    shown = parts.engine.gates.waiting(run)
    if shown is None:
        return False
    return shown.node_id != node or question_digest(parts.redactor.redact(shown.prompt)) != digest


def node_row(node: NodeDetail, hide: Redactor) -> dict[str, Any]:
    return {
        "id": node.node_id,
        "kind": node.kind,
        "state": str(node.state),
        "deps": node.deps,
        "seconds": node.seconds,
        "tokens": node.tokens,
        "tokens_saved": node.tokens_saved,
        "verdict": verdict(node),
        "reason": hide.redact(node.reason),
        "error": hide.redact(node.error),
        "started": clock(node.started_at),
        "attempt": node.attempt,
        "cached_from": node.cached_from,
        "has_output": node.output_digest is not None,
        "artifacts": sorted(node.artifacts),
        "plan_action": node.plan_action,
        "plan_reason": hide.redact(node.plan_reason or ""),
        "preview": "",  # the start of its output, on runs small enough to show them all
        "preview_cut": False,
        "child": node.child,  # a `workflow:` step's child run (its page is linked)
    }


def matches(row: Mapping[str, Any], query: str) -> bool:
    q = query.lower()
    return any(q in str(row[k]).lower() for k in ("id", "kind", "state", "reason", "error"))


def groups(
    rows: Sequence[dict[str, Any]], total: int, *, lazy: bool = False, expand: str | None = None,
    counts: Mapping[str, int] | None = None,
) -> list[dict[str, Any]]:
    """The node list's groups. `lazy` (a big run's first paint): a group that starts closed
    carries its count and no rows (`deferred`), except `expand` (the group asked for).
    `counts`: the nodes in each state, when `rows` are only those of the groups listed."""
    by_state: dict[str, list[dict[str, Any]]] = {str(s): [] for s in STATE_ORDER}
    for row in rows:
        by_state.setdefault(row["state"], []).append(row)
    for state in counts or ():
        by_state.setdefault(state, [])
    out = []
    for state, items in by_state.items():
        count = counts.get(state, 0) if counts is not None else len(items)
        opened = (not lazy and total <= ALL_OPEN_UP_TO) or NodeState(state) in OPEN_STATES or state == expand
        deferred = lazy and not opened and count > 0
        out.append({"state": state, "rows": [] if deferred else items, "count": count,
                    "open": opened, "deferred": deferred})
    return out


def group_rows(parts: Parts, run: Run, state: str) -> dict[str, Any]:
    """One group's rows, for a big run's page that opens it (with the page's resume plan
    column when it has one)."""
    detail = parts.engine.inspect(run, shown=Shown(frozenset({NodeState(state)})))  # the others counted
    return {"rows": [node_row(n, parts.redactor) for n in detail.nodes if str(n.state) == state],
            "planned": detail.planned}


def graph(parts: Parts, run: Run, draw: Draw) -> dict[str, Any]:
    """A big run's graph, for its page that opens it."""
    detail = parts.engine.inspect(run, plan=False)
    drawn = [n for n in detail.nodes if n.item_of is None]
    return {"drawing": draw([n.node_id for n in drawn], {n.node_id: n.deps for n in drawn}),
            "states": {n.node_id: str(n.state) for n in detail.nodes}, "total": len(detail.nodes),
            "known": detail.known, "matched": None, "query": ""}


def commands(run: Run, message: str | None, gate_waiting: bool, may_decide: bool = False
             ) -> list[dict[str, str]]:
    """The commands to copy (`resolution.next_commands`), each with its `kind` (the page words it)."""
    nexts = next_commands(run, message, gate_waiting=gate_waiting, may_decide=may_decide)
    return [{"kind": kind, "text": "/workflow " + text} for kind, text in nexts]


#: The chat gate message's wording of a policy's live state (`_shared/policy_state.j2`), as text.
_POLICY_LINE = '{% import "console/_fmt.j2" as f %}{% include "_shared/policy_state.j2" %}'


def policy_line(parts: Parts, run: Run, gate: Gate, now: float) -> dict[str, Any]:
    """The waiting gate's policy now ("1/2 · needs @sre · requester excluded · expires in 3h
    59m"), from `voting.live_state` as the chat message shows it, and its choices and form."""
    state = voting.live_state(parts, run, gate, now)
    line = environment().from_string(_POLICY_LINE).render(data={"state": state}).strip()
    spec = parts.engine.gates.spec(run, gate)
    fields = [{"name": name, "type": str(field.type), "default": field.default,
               "options": list(field.enum or ())} for name, field in (spec.form if spec else {}).items()]
    choices = [c for c in state["choices"] if c != voting.APPROVE]
    return {"line": line, "voters": state["voters"], "choices": choices, "fields": fields}


def _may_decide(parts: Parts, run: Run, gate: Gate, uid: str, approvers: list[str] | None) -> bool:
    """Whether `uid` may vote on `gate` now, as the vote would be judged (the gate's policy:
    its approvers, the requester excluded, an agent on its own run, `humans_only`): only then
    does the page offer Approve / Reject."""
    if not authz.may_approve(parts.access, uid, run, approvers):
        return False
    try:
        _, policy, members = parts.engine.gates.policy(run, gate)
    except StoreError:  # no approvers configured: nobody's vote counts
        return False
    standing = policy.standing(uid, requester=run.requester, opened_at=gate.created_at, now=time.time(),
                               members=members)  # fmt: skip
    return standing is Standing.ELIGIBLE


def gate_view(gate: Gate, run: Run, uid: str, parts: Parts, history: Sequence[AuditEvent],
              current: bool) -> dict[str, Any]:
    """`current`: the gate an `approve`/`reject` of this run decides now (waiting longest)."""
    hide = parts.redactor
    waiting = current and gate.status is GateStatus.WAITING and run.status is RunStatus.PAUSED
    approvers: list[str] | None
    try:
        approvers = parts.catalog.get(run.workflow).node(gate.node_id).approvers
    except (WorkflowError, KeyError):
        approvers = None
    return {
        "node": gate.node_id,
        "question": hide.redact(gate.prompt),
        "digest": question_digest(hide.redact(gate.prompt)),
        "status": str(gate.status),
        "waiting": waiting,
        "may_decide": waiting and _may_decide(parts, run, gate, uid, approvers),
        "approvers": approvers,
        "policy": policy_line(parts, run, gate, time.time()) if waiting else None,
        "opened": when(gate.created_at),
        "decided_by": gate.decided_by,
        "decided_at": when(gate.decided_at),
        "decision": gate.decision if gate.decision not in (None, "approve", "reject") else "",
        "comment": hide.redact(gate.comment or ""),
        "votes": [
            vote_row(v, hide) for v in parts.store.ballots.gate_votes(run.id, gate.node_id, gate.created_at)
        ],
        "history": [audit_row(e, hide) for e in history
                    if e.details.get("node") in (None, gate.node_id)],
    }


def vote_row(vote: GateVote, hide: Redactor) -> dict[str, Any]:
    """One vote on the gate's opening, as the panel lists it: who, what, its form values, when,
    and the comment."""
    values = [f"{name}={value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
              for name, value in vote.values.items()]
    return {"user": vote.user, "choice": vote.choice, "values": [hide.redact(v) for v in values],
            "at": when(vote.at), "comment": hide.redact(vote.comment)}


def audit_row(event: AuditEvent, hide: Redactor) -> dict[str, Any]:
    details = {k: v for k, v in event.details.items() if k not in ("event_id",)}
    return {"at": when(event.at), "actor": event.actor, "action": event.action,
            "details": hide.redact(json.dumps(details, ensure_ascii=False, sort_keys=True, default=str))}


def run_header(run: Run, detail: RunDetail, hide: Redactor) -> dict[str, Any]:
    return {
        "id": run.id, "workflow": run.workflow, "status": str(run.status), "version": run.version,
        "requester": run.requester, "created": when(run.created_at), "updated": when(run.updated_at),
        "seconds": round(run.updated_at - run.created_at, 1), "handle": run.handle,
        "resumed_from": run.resumed_from, "reason": hide.redact(run.reason or ""),
        "status_by": run.status_by, "platform": run.platform, "conversation": run.conversation,
        "tokens": detail.summary.tokens, "tokens_saved": detail.summary.tokens_saved,
    }


def run_page(parts: Parts, run: Run, uid: str, draw: Draw, *, query: str = "", node: str | None = None,
             page: int = 1, group: str | None = None, show_graph: bool = False) -> dict[str, Any]:
    """The run page's data: one inspection (journal, plan), gates, audit, args and the outputs
    shown, each one query. A run of more than `LAZY_OVER` nodes is shown summary first
    (unless searched): the rows of the groups that start closed but `group`, and the graph
    unless `show_graph`, are left for the page to fetch when opened."""
    hide = parts.redactor
    listed = {str(s) for s in OPEN_STATES} | ({group} if group else set())
    # a big run's nodes detailed only for the groups listed (and the node opened): the
    # others are counted, not built (the graph, when asked for, needs them all)
    asked = None if query or show_graph else Shown(frozenset(NodeState(s) for s in listed if s in _STATES),
                                                    node, LAZY_OVER)
    detail = parts.engine.inspect(run, shown=asked)
    total = detail.total
    lazy = total > LAZY_OVER and not query
    counts = dict(detail.counts)
    rowed: Sequence[NodeDetail] = detail.nodes
    if lazy:  # rows built only for the groups listed: a deferred group's are only counted
        rowed = [n for n in detail.nodes if str(n.state) in listed]
    rows = [node_row(n, hide) for n in rowed]
    shown = [r for r in rows if matches(r, query)] if query else rows
    wanted: list[str] = []
    if total <= INLINE_OUTPUTS:
        wanted += [n.output_digest for n in rowed if n.output_digest]
    chosen = detail.node(node) if node else None
    if chosen is not None and chosen.output_digest:
        wanted.append(chosen.output_digest)
    if detail.output_digest:
        wanted.append(detail.output_digest)
    blobs = parts.store.blobs.get_blobs(set(wanted)) if wanted else {}
    texts = {d: hide.redact(decode(b)) for d, b in blobs.items()}  # whole, then cut: no half secrets
    if total <= INLINE_OUTPUTS:
        for row, n in zip(rows, rowed, strict=True):
            text = texts.get(n.output_digest or "", "")
            row["preview"] = text[:PREVIEW_CHARS]
            row["preview_cut"] = len(text) > PREVIEW_CHARS
    gates = parts.store.gates.run_gates(run.id)
    audit = parts.store.events.audit_log(run.id)
    history = [e for e in audit if e.action in DECISIONS]
    # oldest first, so the first waiting one is the store's `waiting_gate`: the one decided now
    current = next((g.node_id for g in gates if g.status is GateStatus.WAITING), None)
    gate_views = [gate_view(g, run, uid, parts, history, g.node_id == current) for g in gates]
    try:
        args = parts.engine.args_of(run)
    except KeyError:
        args = {}
    message = args.get("message") if isinstance(args.get("message"), str) else None
    drawn = [n for n in detail.nodes if n.item_of is None]  # a map node is drawn once, not per item
    drawing = None
    if not lazy or show_graph:
        drawing = draw([n.node_id for n in drawn], {n.node_id: n.deps for n in drawn})
    matched = {r["id"] for r in shown} if query else None
    return {
        "run": run_header(run, detail, hide),
        "queue": queueing.waiting(parts.store, run, time.time()),  # why a queued run waits
        "counts": counts,
        "total": total,
        "groups": groups(shown, total, lazy=lazy, expand=group, counts=counts if lazy else None),
        "lazy": lazy,
        "states": {n.node_id: str(n.state) for n in detail.nodes} if drawing is not None else {},
        "matched": matched,
        "query": query,
        "drawing": drawing,
        "known": detail.known,
        "plan_error": hide.redact(detail.plan_error or ""),
        "planned": detail.planned,
        "gates": gate_views,
        "audit": [audit_row(e, hide) for e in audit],
        "args": hide.redact(json.dumps(args, ensure_ascii=False, sort_keys=True, indent=2)),
        "commands": commands(run, message, any(g["waiting"] for g in gate_views),
                             any(g["may_decide"] for g in gate_views)),
        "output": texts.get(detail.output_digest or "", "")[:PREVIEW_CHARS * 4],
        "output_cut": len(texts.get(detail.output_digest or "", "")) > PREVIEW_CHARS * 4,
        "detail": node_detail(chosen, texts, page, hide) if chosen is not None else None,
    }


def node_detail(node: NodeDetail, texts: Mapping[str, str], page: int, hide: Redactor) -> dict[str, Any]:
    text = texts.get(node.output_digest or "", "")
    pages = max(1, -(-len(text) // PAGE_CHARS))
    page = min(max(page, 1), pages)
    return {
        **node_row(node, hide),
        "output": text[(page - 1) * PAGE_CHARS : page * PAGE_CHARS],
        "page": page,
        "pages": pages,
        "chars": len(text),
    }


def runs_page(parts: Parts, uid: str, platform: str, conversation: str, limit: int = 50) -> list[Run]:
    """The conversation's recent runs the user may view."""
    recent = parts.store.runs.recent_runs(platform=platform, conversation=conversation, limit=limit)
    return [r for r in recent if authz.may_view(parts.access, uid, r, authz.gate_approvers(parts.catalog, r))]


def snapshot_of(parts: Parts, run_id: str) -> Snapshot | None:
    """A run's live state, for `LiveHub` (read in a worker thread)."""
    return snapshot(parts.store, parts.engine, parts.redactor, run_id)
