"""A decision on a gate, under its policy (DESIGN.md "Approvals"): every approve or reject,
typed, clicked or replied, is a vote.

    replies = await cast(ctx, run, words=("hotfix", "replicas=5", "ship", "it"))

1. Which gate, and its policy (`policy_of`: the node's `approval:` with BATON_ACCESS's
   approvers, admins and four-eyes rule).
2. Whether this person may vote now (`Policy.standing`: listed or admin, escalation from its
   time on, the requester excluded when the policy says so). Others are refused politely.
3. What they vote (`read_ballot`): a choice of the gate, the form's `name=value`s, a comment.
   Values are typed and checked like inputs. A quorum approves one thing: once a first vote
   made the gate's *proposal* (its choice and values), an approval that gives no values (a
   button, a plain reply, `approve <run>`) approves the proposal. Before one, an approval of a
   gate with a form that gives no values, or lacks one without a default, asks for them (the
   platform's form, prefilled with the defaults, or the text to type) and records nothing;
   a person whose vote already counted is told so instead.
4. The vote is decided in the engine (`Engine.vote` -> `GateKeeper.vote`): the policy is
   evaluated over the votes recorded and this one, and the ballot, its audit row and, when it
   completes the decision, the decision (approve with the choice, the values and who decided,
   or reject) are written in one unit of work, a compare-and-swap on the votes read (read
   again when another arrived). A repeat counts once; a vote for anything else than the
   proposal is refused (`VoteDiffers`) and its voter told the difference and the two ways on.
   Pending: the reply says where the quorum stands. Of two people completing the quorum at
   once, one opens the gate; the other's vote counts after it and they are told who opened it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.commands import authz, queueing, replies
from core.commands.messages import Reply
from core.config import ANYONE, Access
from core.engine.approval_policy import (
    APPROVE,
    REJECT,
    Members,
    Policy,
    Shortfall,
    Standing,
    Tally,
    Verdict,
    Vote,
    shortfall,
    tally,
)
from core.errors import PermissionDenied, UsageError, VoteDiffers, WorkflowError
from core.store.records import Gate, GateVote, Run
from core.workflows.approval_spec import ApprovalSpec
from core.workflows.args import check_value
from core.workflows.input_spec import InputSpec
from core.workflows.model import Workflow

_VALUE = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<text>.*)$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Ballot:
    choice: str
    texts: dict[str, str]  # form field -> the text typed for it
    comment: str
    chose: bool = False  # the choice was named (`hotfix`), not the default approval


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
    return policy_in(ctx.access, run.workflow, spec)


def policy_in(access: Access, workflow: str, spec: ApprovalSpec | None) -> Policy:
    """The policy of a gate of `workflow` written as `spec`, under these access settings."""
    fallback = [*access.approve.get(workflow, ()), *access.approve.get(ANYONE, ())]
    return Policy.of(
        spec, approvers=fallback, admins=access.admins, approver_not_requester=access.approver_not_requester
    )


def unmet(access: Access, workflow: Workflow) -> list[dict[str, Any]]:
    """The gates of `workflow` nobody can ever approve under these access settings (e.g. 2 of
    `group:sre` with no BATON_ACCESS, where the group has no members): `baton list` says so."""
    found = []
    for node in workflow.nodes:
        if node.approval is not None:
            lack = shortfall(policy_in(access, workflow.name, node.approval), members_of(access))
            if lack is not None:
                found.append({"node": node.id, **shortfall_data(lack)})
    return found


def shortfall_data(lack: Shortfall) -> dict[str, Any]:
    return {"required": lack.required, "people": lack.people, "groups": list(lack.empty)}


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
    chose = bool(rest) and rest[0] in answers
    if chose:
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
    return Ballot(choice, texts, text, chose)


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
    if standing is Standing.AGENT_OWN_RUN:
        return PermissionDenied(
            f"{uid} started run {run.id}, and an agent never approves a gate of its own run.",
            users=[uid],
            hint=f"A person decides it in the run's thread (`/workflow approve {run.id}`) or on its page.",
        )
    if standing is Standing.HUMANS_ONLY:
        return PermissionDenied(
            f"The gate of run {run.id} is humans_only: {uid} is an agent and may not decide it.",
            users=[uid],
            hint=f"A person decides it in the run's thread (`/workflow approve {run.id}`) or on its page.",
        )
    return PermissionDenied(
        f"Sorry, {uid} is not an approver of `{run.workflow}`.",
        users=[uid],
        hint="Ask one of its approvers (or a Baton admin) to decide this gate.",
    )


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
    before = so_far(ctx, run, gate, policy)
    proposal = before.proposal
    choice, values = ballot.choice, dict[str, Any]()
    if proposal is not None and approves_proposal(ballot, proposal):
        choice, values = proposal.choice, dict(proposal.values)
    elif choice != REJECT and spec is not None and spec.form:
        values, missing = typed_values(spec, ballot.texts)
        if ctx.uid in before.voters and not ballot.texts:  # "lgtm" again: their vote is in
            return [replies.vote_counted(run, gate, before, state(policy, before, run, gate, now, members),
                                         False)]  # fmt: skip
        if missing or not ballot.texts:  # a form is filled in, never assumed: ask (defaults shown)
            return [replies.approval_values(run, gate, spec, choice, values, missing)]
    vote = GateVote(run.id, gate.node_id, gate.created_at, ctx.uid, choice, now, ballot.comment, values)
    if reject:  # a rejection ends the run: this reply tells it (the background one is skipped)
        ctx.announced.add(run.id)
    try:  # decided in the engine: the ballot, its audit and any decision in one unit of work
        voted = await ctx.engine.vote(run, gate, vote, policy, members, args=args)
    except VoteDiffers as other:  # a quorum approves one thing: not counted, and the ways on
        ctx.announced.discard(run.id)
        ctx.store.audit(actor=ctx.uid, action="vote", run_id=run.id, details={
            "node": gate.node_id, "choice": choice, "counted": False, "differs_from": other.by,
            "comment": ballot.comment})  # fmt: skip
        return [replies.vote_differs(run, gate, other, choice, values)]
    except BaseException:
        ctx.announced.discard(run.id)
        raise
    result = voted.tally
    if not voted.decides:
        ctx.announced.discard(run.id)
        now_state = state(policy, result, run, gate, now, members)
        if voted.decided is not None:  # others completed the decision before this vote counted: who
            return [replies.vote_counted(run, gate, result, now_state, voted.counted,
                                         decided_by=voted.decided.decided_by)]  # fmt: skip
        if ctx.restate is not None and voted.counted:
            await ctx.restate(run.id, run.platform, now_state)
        return [replies.vote_counted(run, gate, result, now_state, voted.counted, comment=ballot.comment)]
    return [
        replies.gate_decided(
            voted.run,
            gate,
            result.verdict is Verdict.DECIDED,
            ctx.uid,
            ballot.comment or None,
            decision=result.decision,
            queue=queueing.waiting(ctx.store, voted.run, now),  # approved, and waits for a slot
            approvers=[v.user for v in result.deciders()],
        )
    ]


def so_far(ctx: Any, run: Run, gate: Gate, policy: Policy) -> Tally:
    """What the votes recorded so far on this opening of `gate` decide (its proposal, who voted)."""
    return tally(policy, _votes(ctx, run, gate), requester=run.requester, opened_at=gate.created_at,
                 members=members_of(ctx.access))  # fmt: skip


def approves_proposal(ballot: Ballot, proposal: Vote) -> bool:
    """An approval naming no values, and no choice other than the proposal's, approves the
    proposal (a button, a plain reply, `approve <run>`)."""
    return (ballot.choice != REJECT and not ballot.texts
            and (not ballot.chose or ballot.choice == proposal.choice))  # fmt: skip


def _votes(ctx: Any, run: Run, gate: Gate) -> list[Vote]:
    """The votes recorded on this opening of `gate`, for the policy's arithmetic."""
    return [Vote(v.user, v.choice, v.at, v.comment, v.values)
            for v in ctx.store.gate_votes(run.id, gate.node_id, gate.created_at)]  # fmt: skip


def state(
    policy: Policy, result: Tally, run: Run, gate: Gate, now: float, members: Members
) -> dict[str, Any]:
    """The policy's live state, as the gate message shows it ("1/2 · needs @sre · requester
    excluded · expires in 3h 59m"): data, worded by the templates."""
    groups = [r for r in policy.refs(gate.created_at, now) if r.startswith("group:")]
    expires = None if policy.timeout is None else gate.created_at + policy.timeout - now
    lack = shortfall(policy, members, requester=run.requester)  # nobody could ever approve it
    return {
        "have": result.leading,
        "need": policy.required,
        "groups": [g.removeprefix("group:") for g in groups],
        "requester_excluded": policy.exclude_requester,
        "humans_only": policy.humans_only,  # no agent (mcp:…) may decide it
        "expires_in": expires,
        "voters": sorted(result.voters),
        "choices": [c for c in policy.choices if c != REJECT],
        "proposal": proposal_data(result.proposal),
        "shortfall": None if lack is None else shortfall_data(lack),
    }


def proposal_data(proposal: Vote | None) -> dict[str, Any] | None:
    """What the gate message shows of the proposal ("proposed by @sam: replicas=5"): only a
    proposal with values or a choice other than a plain approval says more than "1/2"."""
    if proposal is None or (not proposal.values and proposal.choice == APPROVE):
        return None
    return {"by": proposal.user, "choice": proposal.choice, "values": dict(proposal.values)}


def live_state(ctx: Any, run: Run, gate: Gate, now: float) -> dict[str, Any]:
    """The state of `gate`'s policy now, from the votes recorded so far (a message shown after
    a restart shows them)."""
    spec = spec_of(ctx, run, gate)
    policy = policy_of(ctx, run, spec)
    members = members_of(ctx.access)
    result = tally(policy, _votes(ctx, run, gate), requester=run.requester, opened_at=gate.created_at,
                   members=members)  # fmt: skip
    return state(policy, result, run, gate, now, members)
