"""A decision on a gate, under its policy (DESIGN.md "Approvals"): every approve or reject,
typed, clicked or replied, is a vote.

    replies = await cast(ctx, run, words=("hotfix", "replicas=5", "ship", "it"))

1. Which gate, and its policy (`policy_of`: the node's `approval:` with BATON_ACCESS's
   approvers, admins and four-eyes rule).
2. Whether this person may vote now (`Policy.standing`: listed or admin, escalation from its
   time on, the requester excluded when the policy says so). Others are refused politely.
3. What they vote (`read_ballot`): a choice of the gate, the form's `name=value`s, a comment.
   Values are typed and checked like inputs. An approval of a gate with a form that gives no
   values (a button, a plain reply, `approve <run>`), or lacks one without a default, asks
   for them (the platform's form, prefilled with the defaults, or the text to type) and
   records nothing.
4. The vote is recorded (one per person: a repeat counts once), audited, and tallied over
   every vote on this opening of the gate. Pending: the reply says where the quorum stands.
   Decided: the engine approves (with the choice, the values and who decided) or rejects; of
   two people completing the quorum at once, the gate's own compare-and-swap lets one open
   it, and the other is told their vote counted and who opened it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.commands import authz, queueing, replies
from core.commands.messages import Reply
from core.config import ANYONE
from core.engine.approval_policy import (
    APPROVE,
    REJECT,
    Members,
    Policy,
    Standing,
    Tally,
    Verdict,
    Vote,
    tally,
)
from core.errors import GateAlreadyDecided, PermissionDenied, UsageError, WorkflowError
from core.store.records import Gate, GateVote, Run
from core.workflows.approval_spec import ApprovalSpec
from core.workflows.args import check_value
from core.workflows.input_spec import InputSpec

_VALUE = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<text>.*)$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Ballot:
    choice: str
    texts: dict[str, str]  # form field -> the text typed for it
    comment: str


def members_of(access: Any) -> Members:
    return lambda refs: authz.members(access, refs)


def spec_of(ctx: Any, run: Run, gate: Gate) -> ApprovalSpec | None:
    """The gate's policy as the workflow states it now; None when the workflow or node is
    gone (then BATON_ACCESS decides who may, as for a short-form gate)."""
    try:
        return ctx.catalog.get(run.workflow).node(gate.node_id).approval
    except (WorkflowError, KeyError):
        return None


def policy_of(ctx: Any, run: Run, spec: ApprovalSpec | None) -> Policy:
    access = ctx.access
    fallback = [*access.approve.get(run.workflow, ()), *access.approve.get(ANYONE, ())]
    return Policy.of(
        spec, approvers=fallback, admins=access.admins, approver_not_requester=access.approver_not_requester
    )


def read_ballot(
    spec: ApprovalSpec | None, words: Sequence[str], comment: str | None, *, reject: bool
) -> Ballot:
    """What a person votes: `reject`, or a choice of the gate (its first word when it names one,
    else `approve`), the form's `name=value` words that follow, and the rest as the comment."""
    if reject:
        return Ballot(REJECT, {}, comment or "")
    rest = list(words)
    choice = APPROVE
    answers = spec.answers if spec is not None else (APPROVE, REJECT)
    if rest and rest[0] in answers:
        choice = rest.pop(0)
    texts: dict[str, str] = {}
    fields = spec.form if spec is not None else {}
    while fields and rest and (match := _VALUE.match(rest[0])):
        name = match["name"]
        if name not in fields:
            raise UsageError(
                f"`{name}` is not a field of this gate (its fields: {', '.join(fields)})",
                hint="Type `approve <run> " + " ".join(f"{n}=…" for n in fields) + "`.",
            )
        texts[name] = match["text"]
        rest.pop(0)
    text = " ".join(rest) if words else (comment or "")
    return Ballot(choice, texts, text)


def typed_values(spec: ApprovalSpec, texts: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """The form's values (typed texts checked like inputs, defaults for the rest) and the
    fields without a default nobody gave (each is asked for: downstream steps read every
    field); `InputValidationError` for a value that is wrong."""
    values: dict[str, Any] = {}
    missing: list[str] = []
    for name, field in spec.form.items():
        if name in texts:
            values[name] = _check(name, field, texts[name])
        elif field.default is not None:
            values[name] = field.default
        else:  # a value the gate asks for, with no default: nothing downstream could read
            missing.append(name)
    return values, missing


def _check(name: str, field: InputSpec, text: str) -> Any:
    return check_value(
        name,
        field,
        text,
        noun="field",
        pass_as="`{name}=…`",
        hint=f"Give `{name}` as {field.type}, e.g. `approve <run> {name}=…`.",
    )


def refusal(standing: Standing, uid: str, run: Run) -> PermissionDenied:
    if standing is Standing.REQUESTER:
        return PermissionDenied(
            f"{uid} requested run {run.id} and so may not approve its gate.",
            users=[uid],
            hint="Ask another approver of this workflow to decide it.",
        )
    return PermissionDenied(
        f"Sorry, {uid} is not an approver of `{run.workflow}`.",
        users=[uid],
        hint="Ask one of its approvers (or a Baton admin) to decide this gate.",
    )


def outcome_of(result: Tally) -> dict[str, Any]:
    """What an opened gate carries: the deciders' values (a later one's over an earlier one's)
    and who they are."""
    values: dict[str, Any] = {}
    for vote in result.deciders():
        values.update(vote.values)
    approvers = [{"user": v.user, "at": v.at, "comment": v.comment} for v in result.deciders()]
    return {"values": values, "approvers": approvers}


async def cast(
    ctx: Any,
    run: Run,
    gate: Gate,
    args: Mapping[str, Any],
    *,
    reject: bool,
    words: Sequence[str] = (),
    comment: str | None = None,
    by_reply: bool = False,
) -> list[Reply]:
    """`ctx.uid`'s vote on `gate` (waiting in `run`): refused, asked for values, counted, or
    deciding the gate (see the module docstring)."""
    spec = spec_of(ctx, run, gate)
    policy = policy_of(ctx, run, spec)
    members = members_of(ctx.access)
    now = ctx.clock()
    standing = policy.standing(
        ctx.uid, requester=run.requester, opened_at=gate.created_at, now=now, members=members
    )
    if standing is not Standing.ELIGIBLE:
        raise refusal(standing, ctx.uid, run)
    ballot = read_ballot(spec, words, comment, reject=reject)
    values: dict[str, Any] = {}
    if ballot.choice != REJECT and spec is not None and spec.form:
        values, missing = typed_values(spec, ballot.texts)
        if missing or not ballot.texts:  # a form is filled in, never assumed: ask (defaults shown)
            return [replies.approval_values(run, gate, spec, ballot.choice, values, missing)]
    vote = GateVote(
        run.id, gate.node_id, gate.created_at, ctx.uid, ballot.choice, now, ballot.comment, values
    )
    counted = ctx.store.cast_vote(vote)
    ctx.store.audit(
        actor=ctx.uid,
        action="vote",
        run_id=run.id,
        details={
            "node": gate.node_id,
            "choice": ballot.choice,
            "counted": counted,
            "comment": ballot.comment,
        },
    )
    votes = [
        Vote(v.user, v.choice, v.at, v.comment, v.values)
        for v in ctx.store.gate_votes(run.id, gate.node_id, gate.created_at)
    ]
    result = tally(policy, votes, requester=run.requester, opened_at=gate.created_at, members=members)
    if result.verdict is Verdict.PENDING:
        if ctx.restate is not None and counted:
            await ctx.restate(run.id, run.platform, state(policy, result, run, gate, now, members))
        return [
            replies.vote_counted(run, gate, result, state(policy, result, run, gate, now, members), counted,
                                     comment=ballot.comment)
        ]
    try:
        if result.verdict is Verdict.REJECTED:
            after = await ctx.announcing(
                run.id, ctx.engine.reject(run, actor=ctx.uid, reason=ballot.comment or None)
            )
        else:
            after = await ctx.engine.approve(
                run,
                actor=ctx.uid,
                comment=ballot.comment or None,
                gate=gate,
                args=args,
                decision=result.decision,
                outcome=outcome_of(result),
            )
    except GateAlreadyDecided:
        if counted:  # completed the quorum at the same time as someone else: say who opened it
            winner = ctx.engine.gates.decided(run)
            if winner is not None:
                return [
                    replies.vote_counted(
                        run,
                        gate,
                        result,
                        state(policy, result, run, gate, now, members),
                        counted,
                        decided_by=winner.decided_by,
                    )
                ]
        raise
    return [
        replies.gate_decided(
            after,
            gate,
            result.verdict is Verdict.DECIDED,
            ctx.uid,
            ballot.comment or None,
            decision=result.decision,
            queue=queueing.waiting(ctx.store, after, now),  # approved, and waits for a slot
        )
    ]


def state(
    policy: Policy, result: Tally, run: Run, gate: Gate, now: float, members: Members
) -> dict[str, Any]:
    """The policy's live state, as the gate message shows it ("1/2 · needs @sre · requester
    excluded · expires in 3h 59m"): data, worded by the templates."""
    groups = [r for r in policy.refs(gate.created_at, now) if r.startswith("group:")]
    expires = None if policy.timeout is None else gate.created_at + policy.timeout - now
    return {
        "have": result.leading,
        "need": policy.required,
        "groups": [g.removeprefix("group:") for g in groups],
        "requester_excluded": policy.exclude_requester,
        "expires_in": expires,
        "voters": sorted(result.voters),
        "choices": [c for c in policy.choices if c != REJECT],
    }


def live_state(ctx: Any, run: Run, gate: Gate, now: float) -> dict[str, Any]:
    """The state of `gate`'s policy now, from the votes recorded so far (a message shown after
    a restart shows them)."""
    spec = spec_of(ctx, run, gate)
    policy = policy_of(ctx, run, spec)
    members = members_of(ctx.access)
    votes = [Vote(v.user, v.choice, v.at, v.comment, v.values)
             for v in ctx.store.gate_votes(run.id, gate.node_id, gate.created_at)]  # fmt: skip
    result = tally(policy, votes, requester=run.requester, opened_at=gate.created_at, members=members)
    return state(policy, result, run, gate, now, members)
