"""Pure builders of `Reply` objects: code passes data, the templates hold the words.

Every reply about a run carries `run_id` and `run_status`. `KINDS` lists every reply kind;
each has a template on every platform (`templates/<platform>/<kind>.j2`).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Mapping, Sequence, Set
from typing import Any

from core.commands.hints import hint
from core.commands.messages import Attachment, Button, Form, FormField, Menu, Reply
from core.commands.model import Spec
from core.commands.pages import PageLink, open_button
from core.commands.resolution import Option, Prompt, preview
from core.delivery.envelope import Address, Mode
from core.engine.events import NodeState, NodeSummary, Plan, RunSummary
from core.errors import BatonError
from core.store.records import AuditEvent, Gate, GateStatus, Run, RunStatus, Subscription

KINDS = (
    "error", "help", "help_topic", "fresh_run_prompt", "run_started", "run_resumed", "gate_decided",
    "run_cancelled", "node_resolved", "invalidated", "plan", "status", "runs", "workflows", "args",
    "audit", "progress", "run_completed", "run_failed", "gate_waiting", "needs_attention",
    "approval_question", "which_gate", "no_gate_hint", "page_link", "input_form", "home",
    "vote_counted", "approval_values", "gate_reminder", "gate_escalated", "gate_timed_out", "who_approved",
    "audit_export", "vote_differs", "unmet_gate",
    # schedules (`schedule_replies.py`)
    "schedule_added", "schedules", "schedule_shown", "schedule_changed", "schedule_fired", "schedule_refused",
    "audit_export", "vote_differs", "unmet_gate", "queue", "subscribed", "unsubscribed", "subscriptions",
    "notice", "notice_digest", "subscription_stopped",
    # sub-workflows: a parent paused while its child run waits (`core/engine/subruns.py`)
    "child_waiting",
)


def about(run: Run, kind: str, data: dict[str, Any], **kw: Any) -> Reply:
    return Reply(kind=kind, data={"run_id": run.id, "workflow": run.workflow, **data},
                 run_id=run.id, run_status=str(run.status), **kw)


def error(exc: BatonError, run: Run | None = None) -> Reply:
    # people the message names by id: who decided/holds the run (run-state errors), who was
    # refused and whose run it is (refusals)
    people = [getattr(exc, "by", None), *getattr(exc, "users", ())]
    data = {"message": exc.message, "hint": hint(exc), "parts": message_parts(exc.message, people)}
    run_id = run.id if run else getattr(exc, "run_id", None)
    status = str(run.status) if run else getattr(exc, "status", None)
    return Reply(kind="error", data=data, is_error=True, how=Mode(ephemeral=True), run_id=run_id,
                 run_status=None if status is None else str(status))


def message_parts(message: str, users: Sequence[str | None]) -> list[dict[str, str]]:
    """`message` split around the user ids it names: `{"text": …}` and `{"user": …}` pieces, so
    templates render each person with the platform's `f.user` (a mention, not a raw id)."""
    parts: list[dict[str, str]] = [{"text": message}]
    # longest first: an id that is a prefix of another (`slack:U1`, `slack:U12`) never cuts it
    for user in sorted({u for u in users if u}, key=lambda u: (-len(u), u)):
        split: list[dict[str, str]] = []
        for part in parts:
            if "text" not in part:
                split.append(part)
                continue
            pieces = part["text"].split(user)
            for i, piece in enumerate(pieces):
                if i:
                    split.append({"user": user})
                if piece:
                    split.append({"text": piece})
        parts = split
    return parts


def unexpected() -> Reply:
    return Reply(kind="error", is_error=True, how=Mode(ephemeral=True), data={
        "message": "Something unexpected went wrong; it has been logged.",
        "hint": "Try again; if it keeps happening, tell a Baton admin the time it happened.",
    })


def stale_control(form: bool) -> Reply:
    """A click or a form submission Baton cannot act on: not one of its buttons, a malformed
    one, or a form that closed (timed out, or opened before a restart)."""
    what = "This form is no longer open" if form else "This button is not one Baton can act on"
    return Reply(kind="error", is_error=True, how=Mode(ephemeral=True), data={
        "message": f"{what}; nothing was done.",
        "hint": "Type the command instead (`help` lists them), or open the form again.",
    })


def help_list(specs: Sequence[Spec]) -> Reply:
    return Reply(kind="help", how=Mode(ephemeral=True), data={
        "commands": [{"name": s.name, "usage": s.usage, "summary": s.summary} for s in specs]})


def help_topic(spec: Spec) -> Reply:
    return Reply(kind="help_topic", how=Mode(ephemeral=True), data={
        "name": spec.name, "usage": spec.usage, "summary": spec.summary, "example": spec.example})


def fresh_run_prompt(prompt: Prompt, options: Sequence[Option], old_message: str | None,
                     new_message: str | None) -> Reply:
    run = prompt.run
    buttons = tuple(
        Button(label=o.label, command=o.command, action=o.action,
               style="primary" if o.number == 1 else ("danger" if o.action == "abandon" else None))
        for o in options
    )
    return about(run, "fresh_run_prompt", {
        "status": str(run.status),
        "requester": run.requester,
        "preview": preview(old_message),
        "new_preview": preview(new_message),
        "others": prompt.others,
        "options": [dataclasses.asdict(o) for o in options],
    }, buttons=buttons)


#: The action of a button that opens a form (adapters open it instead of running the command).
FORM_ACTION = "form"


def input_form(form: Form, workflow: str, missing: Sequence[str]) -> Reply:
    """A run held back for its inputs: the form to fill in (where the platform has forms), a
    button that opens it again, and the `--set` to type everywhere."""
    fields = [dataclasses.asdict(f) for f in form.fields]
    example = " ".join([form.command, *(f"--set {name}=…" for name in missing)])
    return Reply(kind="input_form", how=Mode(ephemeral=True), form=form, data={
        "workflow": workflow, "missing": [f for f in fields if f["name"] in missing], "example": example},
        buttons=(form_button(form),))


def form_button(form: Form) -> Button:
    """"Run…": opens the form (again) where the platform has forms."""
    return Button("Run…", form.command, "primary", FORM_ACTION)


def run_started(run: Run, message: str | None, *, page: bool = False,
                queue: Mapping[str, Any] | None = None) -> Reply:
    """`page`: the run has a page; the reply offers "Open run" (each clicker's own link).
    `queue`: a queued run's place (`queueing.waiting`): the reply says it waits, and behind whom."""
    return about(run, "run_started", {
        "handle": run.handle, "resumed_from": run.resumed_from, "preview": preview(message),
        "requester": run.requester, "queue": dict(queue) if queue else None,
    }, how=Mode(starts_thread=True), buttons=(open_button(run.id),) if page else ())


def cancel_button(run: Run) -> Button:
    """Take a queued run out of its queue (who may cancel it: `authz.require_owner`)."""
    return Button("Cancel", f"cancel {run.id}", style="danger", action="cancel")


def queue(groups: Sequence[Mapping[str, Any]], target: str | None) -> Reply:
    """`queue [workflow|key]`: each key's active runs and its queue (`queueing.listing`)."""
    return Reply(kind="queue", data={"groups": [dict(g) for g in groups], "target": target})


def page_link(link: PageLink, uid: str, run: Run | None = None, *, platform: str = "",
              conversation: str = "") -> Reply:
    """A personal link to a run's page (`run`) or to a conversation's runs: only `uid` sees it."""
    data = {"url": link.url, "expires_at": link.expires_at, "ttl": link.ttl, "user": uid,
            "run_id": run.id if run else None, "workflow": run.workflow if run else None,
            "platform": platform, "conversation": conversation}
    return Reply(kind="page_link", data=data, how=Mode(ephemeral=True), run_id=run.id if run else None,
                 run_status=str(run.status) if run else None)


def run_resumed(run: Run, actor: str, queue: Mapping[str, Any] | None = None) -> Reply:
    """`queue`: the resume was queued by its key's limit (`queueing.waiting`)."""
    data = {"by": actor, "handle": run.handle, "queue": dict(queue) if queue else None}
    return about(run, "run_resumed", data, buttons=(cancel_button(run),) if queue else ())


def gate_decided(run: Run, gate: Gate | None, approved: bool, actor: str, comment: str | None,
                 decision: str | None = None, approvers: Sequence[str] = (),
                 queue: Mapping[str, Any] | None = None) -> Reply:
    """`decision`: the choice a policy's votes decided, when not plain approve / reject;
    `approvers`: every person whose vote decided it (a quorum), in vote order; `queue`: the
    approved run gave its slot back at the gate and now waits for one (`queueing.waiting`)."""
    shown = decision if decision not in (None, "approve", "reject") else ""
    return about(run, "gate_decided", {
        "node": gate.node_id if gate else "", "approved": approved, "by": actor, "comment": comment or "",
        "decision": shown, "approvers": list(approvers) or [actor], "queue": dict(queue) if queue else None})


def vote_counted(run: Run, gate: Gate, result: Any, state: Mapping[str, Any], counted: bool,
                 decided_by: str | None = None, comment: str = "") -> Reply:
    """A vote recorded (or a repeat, `counted` False) while the gate still waits for its quorum;
    `decided_by`: the vote counted but someone else's opened the gate at the same moment."""
    return about(run, "vote_counted", {"node": gate.node_id, "counted": counted, "state": dict(state),
                                       "decided_by": decided_by or "", "comment": comment})


def vote_differs(run: Run, gate: Gate, proposal: Any, choice: str, values: Mapping[str, Any]) -> Reply:
    """A vote for something else than the gate's `proposal` (a `VoteDiffers`): not counted; the
    voter is told how it differs and the two ways on, approving the proposal or rejecting."""
    names = list(dict.fromkeys([*proposal.values, *values]))
    differences = [{"name": n, "proposed": _shown(proposal.values.get(n)), "yours": _shown(values.get(n))}
                   for n in names if proposal.values.get(n) != values.get(n)]  # fmt: skip
    return about(run, "vote_differs", {
        "node": gate.node_id, "by": proposal.by, "choice": proposal.choice, "your_choice": choice,
        "proposal": [{"name": n, "value": _shown(v)} for n, v in proposal.values.items()],
        "differences": differences}, how=Mode(ephemeral=True),
        buttons=(Button("Approve the proposal", f"approve {run.id}", "primary", "approve"),
                 Button("Reject", f"reject {run.id}", "danger", "reject")))  # fmt: skip


def _shown(value: Any) -> str:
    """A form value as it is typed (`name=value`): strings as they are, the rest as JSON."""
    if value is None:
        return "(none)"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def gate_reminder(run: Run, gate: Gate, to: Sequence[str], left: float | None) -> Reply:
    """A reminder in the run's thread to the eligible approvers who have not answered."""
    return about(run, "gate_reminder", {"node": gate.node_id, "question": gate.prompt, "to": list(to),
                                        "left": left}, buttons=approve_buttons(run.id), pings=tuple(to),
                 to=_where(run))


def gate_escalated(run: Run, gate: Gate, to: Sequence[str], left: float | None) -> Reply:
    """The people an escalation adds, told in the run's thread that they may now decide."""
    return about(run, "gate_escalated", {"node": gate.node_id, "question": gate.prompt, "to": list(to),
                                         "left": left}, buttons=approve_buttons(run.id), pings=tuple(to),
                 to=_where(run))


def told_directly(reply: Reply, person: str) -> Reply | None:
    """`reply` (a reminder, an escalation) sent to `person` (`slack:U1`) directly, on their own
    platform; None for an id that names no platform user."""
    platform, _, user = person.partition(":")
    if not platform or not user or platform == "group":
        return None
    return dataclasses.replace(reply, to=dataclasses.replace(reply.to, platform=platform, conversation=user,
                                                             thread=None, direct=True),
                               data={**reply.data, "direct": True, "to": [person]},
                               pings=(person,) if reply.pings else ())  # a reminder calls them here too


def gate_timed_out(run: Run, gate: Gate, outcome: str, waited: str) -> Reply:
    return about(run, "gate_timed_out", {"node": gate.node_id, "outcome": outcome, "waited": waited},
                 to=_where(run))


def who_approved(run: Run, gates: Sequence[tuple[Gate, Sequence[Any]]]) -> Reply:
    """Each gate of `run`: its status, decision and who made it, and the votes on its latest opening."""
    ended = run.status is RunStatus.CANCELLED  # a gate closed with its run (no choice): nobody rejected it
    return about(run, "who_approved", {"gates": [
        {"node": g.node_id, "status": g.status.value, "decision": g.decision or "", "by": g.decided_by or "",
         "at": g.decided_at, "votes": [_vote(v) for v in votes],
         "closed": ended and g.status is GateStatus.REJECTED and g.decision is None}
        for g, votes in gates]})  # fmt: skip


def _vote(vote: Any) -> dict[str, Any]:
    """One vote as `who approved` lists it: who, what, when, the form's values and the comment."""
    return {"user": vote.user, "choice": vote.choice, "at": vote.at, "comment": vote.comment,
            "values": [{"name": n, "value": _shown(x)} for n, x in vote.values.items()]}


APPROVAL_FORM = "approval_values"  # `Form.kind` of the form asking for a gate's values


def approval_values(run: Run, gate: Gate, spec: Any, choice: str, given: Mapping[str, Any],
                    missing: Sequence[str]) -> Reply:
    """A vote held back for the gate's form: the form (where the platform has one), a button
    that opens it, and the `approve <run> name=value` to type, with the defaults shown."""
    base = f"approve {run.id}" + ("" if choice == "approve" else f" {choice}")
    fields = tuple(
        FormField(name=name, label=name, type=field.type, required=field.required or name in missing,
                  value=_form_text(given.get(name, field.default), field.type),
                  choices=tuple(_form_text(v, field.type) for v in field.enum or ()),
                  description=field.description)
        for name, field in spec.form.items()
    )  # fmt: skip
    form = Form(kind=APPROVAL_FORM, title=f"Approve {gate.node_id}", submit="Approve", command=base,
                fields=fields)
    example = " ".join([base, *(f"{f.name}={f.value or '…'}" for f in fields)])
    return about(run, "approval_values", {
        "node": gate.node_id, "fields": [dataclasses.asdict(f) for f in fields], "missing": list(missing),
        "example": example}, how=Mode(ephemeral=True), form=form,
        buttons=(Button("Approve…", base, "primary", FORM_ACTION),))


def _form_text(value: Any, type_: str) -> str:
    if value is None:
        return ""
    return value if type_ == "string" and isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def run_cancelled(run: Run, actor: str | None, reason: str | None) -> Reply:
    return about(run, "run_cancelled", {"by": actor or run.status_by or "", "reason": reason or ""})


def node_resolved(run: Run, node: str, action: str, actor: str) -> Reply:
    return about(run, "node_resolved", {"node": node, "action": action, "by": actor})


def invalidated(run: Run, nodes: Sequence[str], downstream: bool) -> Reply:
    return about(run, "invalidated", {"nodes": list(nodes), "downstream": downstream})


def pinned(run: Run, *, pinned: bool, changed: bool) -> Reply:
    return about(run, "pinned", {"pinned": pinned, "changed": changed})


def plan(run: Run, p: Plan) -> Reply:
    return about(run, "plan", {"nodes": [dataclasses.asdict(n) for n in p.nodes]})


_SUMMARY_FIELDS = tuple(f.name for f in dataclasses.fields(RunSummary))
_NODE_FIELDS = tuple(f.name for f in dataclasses.fields(NodeSummary))


def summary_data(summary: RunSummary, ran: Set[str] | None = None) -> dict[str, Any]:
    """The summary as template data; `ran`: the nodes executed by the run's latest execution
    (a resume, an approval), when known: "Ran:" lists only those, not an earlier attempt's."""
    # what `dataclasses.asdict` gives, without its deep copy of every (immutable) value, which
    # every progress edit of a large run paid (docs/commands.md, "Progress")
    data = {name: getattr(summary, name) for name in _SUMMARY_FIELDS}
    data["nodes"] = tuple({name: getattr(n, name) for name in _NODE_FIELDS} for n in summary.nodes)
    for node in data["nodes"]:
        node["state"] = str(node["state"])
    data["ran"] = [n for n in data["nodes"] if n["state"] in (NodeState.DONE, NodeState.FAILED)
                   and (ran is None or n["node_id"] in ran)]
    data["cached"] = [n for n in data["nodes"] if n["state"] == NodeState.CACHED]
    return data


def status(run: Run, summary: RunSummary, queue: Mapping[str, Any] | None = None) -> Reply:
    """`queue`: a queued run's place (`queueing.waiting`): why it waits, with a Cancel button."""
    data = {**summary_data(summary), "requester": run.requester, "handle": run.handle,
            "resumed_from": run.resumed_from, "queue": dict(queue) if queue else None}
    if summary.status == "failed":  # the failed step's whole error (the run's reason is its first line)
        failed = next((n for n in summary.nodes if n.node_id == summary.failed_node), None)
        data["error_tail"] = _tail(failed.error if failed and failed.error else (summary.reason or ""))
    return about(run, "status", data, buttons=(cancel_button(run),) if queue else ())


def runs(items: Sequence[Run]) -> Reply:
    return Reply(kind="runs", data={"runs": [
        {"id": r.id, "workflow": r.workflow, "status": str(r.status), "requester": r.requester,
         "created_at": r.created_at} for r in items]})


def workflows(available: Sequence[dict[str, Any]], broken: Sequence[dict[str, Any]]) -> Reply:
    return Reply(kind="workflows", data={"workflows": list(available), "broken": list(broken)})


def unmet_gate(workflow: str, unmet: Mapping[str, Any]) -> Reply:
    """A gate of `workflow` nobody can ever approve under the access settings (`voting.unmet`):
    what `baton list` prints under it."""
    return Reply(kind="unmet_gate", data={"workflow": workflow, **unmet})


def args(run: Run, canonical: str) -> Reply:
    return about(run, "args", {"handle": run.handle, "json": canonical})


def audit(run: Run, events: Sequence[AuditEvent]) -> Reply:
    return about(run, "audit", {"events": [
        {"at": e.at, "actor": e.actor, "action": e.action, "details": dict(e.details)} for e in events]})


def audit_export(count: int, since: str, fmt: str, name: str, content: bytes) -> Reply:
    """`audit --since`: how many events, and the file holding them (`Reply.file`)."""
    return Reply(kind="audit_export", data={"count": count, "since": since, "format": fmt, "filename": name},
                 file=Attachment(name=name, content=content))


def _where(run: Run) -> Address:
    return Address(run.platform, run.conversation, run.thread, run.requester)


#: Above this many nodes a progress message is a summary (counts per state, the nodes running,
#: failed or waiting), so it fits one message at any size; the full table is on the run page.
SUMMARY_OVER = 25
#: Nodes named per state in a summary (the rest are counted); only a failure keeps its reason.
SUMMARY_NAMES = 5
#: States whose nodes a summary names, in the order it lists them.
_NAMED = (NodeState.FAILED, NodeState.ATTENTION, NodeState.WAITING, NodeState.RUNNING)


def progress_data(summary: RunSummary) -> dict[str, Any]:
    """A progress message's data: the node table, or past `SUMMARY_OVER` nodes a summary whose
    size does not grow with the run (`data.large`)."""
    if len(summary.nodes) <= SUMMARY_OVER:
        return summary_data(summary)
    counts = Counter(str(n.state) for n in summary.nodes)
    named = []
    for state in _NAMED:
        nodes = [n for n in summary.nodes if n.state == state]
        if nodes:
            shown = [{name: getattr(n, name) for name in _NODE_FIELDS} | {"state": str(state), "reason": (
                      preview(n.reason, 80) if state is NodeState.FAILED and n.reason else None)}
                     for n in nodes[:SUMMARY_NAMES]]
            named.append({"state": str(state), "nodes": shown, "more": len(nodes) - len(shown)})
    tally = [[str(state), counts[str(state)]] for state in NodeState if counts[str(state)]]
    return {"status": summary.status, "seconds": summary.seconds, "large": True,
            "total": len(summary.nodes), "counts": tally, "named": named}


def progress(run: Run, summary: RunSummary, *, page: bool = False,
             queue: Mapping[str, Any] | None = None) -> Reply:
    """`page`: the run has a page; the message offers "Open run" (each clicker's own link).
    `queue`: the run waits in its key's queue (`queueing.waiting`): said, with a Cancel button."""
    buttons = (cancel_button(run),) if queue else ()
    return Reply(kind="progress", data={"run_id": run.id, "workflow": run.workflow,
                                        "started_by": run.started_by,
                                        **progress_data(summary), "queue": dict(queue) if queue else None},
                 buttons=buttons + ((open_button(run.id),) if page else ()),
                 run_id=run.id, run_status=summary.status, to=_where(run),
                 how=Mode(replace_key=f"progress:{run.id}"))


def final(run: Run, summary: RunSummary, gate: Gate | None, attention: str | None,
          ran: Set[str] | None = None, state: Mapping[str, Any] | None = None,
          child: Run | None = None) -> Reply:
    """The reply for a run that came to rest, by its status; `ran`: see `summary_data`;
    `state`: a waiting gate's policy state (`voting.state`: quorum, groups, expiry, choices);
    `child`: for a run paused with no gate of its own, the child run it waits on."""
    data = summary_data(summary, ran)
    rid = run.id
    if summary.status == "paused" and gate is None and child is not None:
        return about(run, "child_waiting", {"child": child.id, "child_workflow": child.workflow,
                                            "node": child.parent_node or "",
                                            "reason": summary.reason or run.reason or ""},
                     to=_where(run))  # fmt: skip
    kind = "run_completed"
    buttons: tuple[Button, ...] = ()
    if summary.status == "failed":
        kind = "run_failed"
        failed = next((n for n in summary.nodes if n.node_id == summary.failed_node), None)
        data["error_tail"] = _tail(failed.error if failed else (summary.reason or ""))
        buttons = (Button("Resume", f"resume {rid}", "primary", "resume"),
                   Button("Plan", f"plan {rid}", None, "plan"),
                   Button("Abandon", f"abandon {rid}", "danger", "abandon"))
    elif summary.status == "paused":  # what the message shows, and no more: it is kept (offers.py)
        choices = tuple((state or {}).get("choices") or ())
        return Reply(kind="gate_waiting", buttons=approve_buttons(rid, choices), run_id=rid,
                     run_status=summary.status,
                     data={"run_id": rid, "workflow": run.workflow, "node": gate.node_id if gate else "",
                           "question": gate.prompt if gate else "", "state": dict(state or {})},
                     to=_where(run))
    elif summary.status == "needs_attention":
        kind = "needs_attention"
        node = attention or ""
        data["node"] = node
        buttons = (Button("It happened: done", f"resolve {rid} {node} done", "primary", "resolve_done"),
                   Button("Run it again", f"resolve {rid} {node} retry", None, "resolve_retry"),
                   Button("Mark failed", f"resolve {rid} {node} fail", "danger", "resolve_fail"))
    elif summary.status == "cancelled":
        kind = "run_cancelled"
        data.update(by=run.status_by or "", reason=run.reason or "")
    return Reply(kind=kind, data={"run_id": rid, "workflow": run.workflow, **data}, buttons=buttons,
                 run_id=rid, run_status=summary.status, to=_where(run))


def approve_buttons(run_id: str, choices: Sequence[str] = ()) -> tuple[Button, ...]:
    """Approve / Reject; a gate with `choices:` beyond approve gets a button per choice."""
    others = tuple(Button(c.replace("_", " ").replace("-", " ").capitalize(), f"approve {run_id} {c}", None,
                          "approve") for c in choices if c not in ("approve", "reject"))
    return (Button("Approve", f"approve {run_id}", "primary", "approve"), *others,
            Button("Reject", f"reject {run_id}", "danger", "reject"))


def approval_question(run: Run, gate: Gate) -> Reply:
    return about(run, "approval_question", {"node": gate.node_id, "question": gate.prompt},
                 buttons=approve_buttons(run.id))


#: Up to this many gates "which gate?" offers a button each; past it, a choice list.
BUTTONS_UP_TO = 5
#: A choice list shows this many gates, the newest (a Discord select menu holds 25 options).
CHOICES_UP_TO = 25


def which_gate(gates: Sequence[tuple[Run, Gate]], decision: str) -> Reply:
    """"Which gate do you mean?": a button per gate and verb for a few gates; for more, one
    choice list per verb with the newest `CHOICES_UP_TO` gates, and the rest counted."""
    verbs = ("approve", "reject") if decision == "unclear" else (decision,)
    newest = sorted(gates, key=lambda rg: rg[1].created_at, reverse=True)
    shown = newest if len(newest) <= BUTTONS_UP_TO else newest[:CHOICES_UP_TO]

    def choice(verb: str, run: Run, gate: Gate, label: str) -> Button:
        return Button(label, f"{verb} {run.id}", "primary" if verb == "approve" else "danger", verb)

    data = {"decision": decision, "total": len(gates), "more": len(gates) - len(shown), "gates": [
        {"run_id": r.id, "workflow": r.workflow, "node": g.node_id, "question": g.prompt} for r, g in shown]}
    if len(gates) <= BUTTONS_UP_TO:
        buttons = tuple(choice(verb, r, g, f"{verb.capitalize()} {r.workflow} ({r.id[:8]})")
                        for r, g in shown for verb in verbs)
        return Reply(kind="which_gate", buttons=buttons, data=data)
    menus = tuple(
        Menu(f"{verb.capitalize()} which run?",
             tuple(choice(verb, r, g, f"{r.workflow} {r.id[:8]} · {g.node_id}") for r, g in shown))
        for verb in verbs
    )
    return Reply(kind="which_gate", menus=menus, data=data)


def home(uid: str, runs: Sequence[dict[str, Any]], gates: Sequence[dict[str, Any]], more_gates: int,
         conversations: Sequence[dict[str, Any]], *, pages: bool) -> Reply:
    """A person's home (`home.py`): their runs, the gates waiting for them, their conversations'
    run lists; shown to them alone, so it may carry their own page links."""
    return Reply(kind="home", how=Mode(ephemeral=True), data={
        "user": uid, "pages": pages, "runs": list(runs), "gates": list(gates), "more_gates": more_gates,
        "conversations": list(conversations)})


def no_gate_hint() -> Reply:
    return Reply(kind="no_gate_hint", how=Mode(ephemeral=True), data={})


def _tail(text: str, lines: int = 15, chars: int = 1500) -> str:
    tail = "\n".join(text.rstrip().splitlines()[-lines:])
    return tail[-chars:]


# -- subscriptions and notices (subscribing.py, notices.py) -----------------------------------


def subscribed(platform: str, conversation: str, workflow: str, events: Sequence[str], by: str) -> Reply:
    return Reply(kind="subscribed", data={"platform": platform, "conversation": conversation,
                                          "workflow": workflow, "events": list(events), "by": by})


def unsubscribed(platform: str, conversation: str, workflow: str | None, events: Sequence[str] | None,
                 removed: int, left: int) -> Reply:
    return Reply(kind="unsubscribed", data={"platform": platform, "conversation": conversation,
                                            "workflow": workflow or "", "events": list(events or ()),
                                            "removed": removed, "left": left})


def subscriptions(platform: str, conversation: str, rows: Sequence[Subscription],
                  rules: Sequence[Mapping[str, Any]]) -> Reply:
    grouped: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        grouped.setdefault((row.workflow, row.created_by), []).append(row.event)
    return Reply(kind="subscriptions", data={
        "platform": platform, "conversation": conversation,
        "subscriptions": [{"workflow": w, "by": by, "events": ev} for (w, by), ev in grouped.items()],
        "rules": [dict(r) for r in rules]})


def notice(run: Run, event: str, facts: Mapping[str, Any], *, page: bool) -> Reply:
    """A notice (`notices.py`): one line about `run` for a conversation that subscribed; for a
    gate waiting, its Approve / Reject buttons (kept as an offer, withdrawn once decided)."""
    buttons = approve_buttons(run.id) if event == "gate_waiting" else ()
    if page:
        buttons = (*buttons, open_button(run.id))
    return Reply(kind="notice", data={"run_id": run.id, "workflow": run.workflow, "event": event,
                                      "requester": run.requester, "run_platform": run.platform,
                                      "run_conversation": run.conversation, "pages": page, **facts},
                 buttons=buttons, run_status=str(run.status))


def notice_digest(workflow: str, window: float, runs: Sequence[tuple[str, str]], shown: int = 10) -> Reply:
    """The notices a flood folded into one window: how many, of which events, which runs."""
    events = Counter(event for _, event in runs)
    ids = list(dict.fromkeys(run for run, _ in runs))
    return Reply(kind="notice_digest", data={"workflow": workflow, "window": window, "count": len(runs),
                                             "events": sorted(events.items()), "runs": ids[:shown],
                                             "more": max(0, len(ids) - shown)})


def subscription_stopped(platform: str, conversation: str, workflow: str, by: str) -> Reply:
    return Reply(kind="subscription_stopped", data={"platform": platform, "conversation": conversation,
                                                    "workflow": workflow, "by": by})
