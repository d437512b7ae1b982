"""A decision on a gate, under its policy (DESIGN.md "Approvals"): every approve or reject,
typed, clicked, replied, sent from the run's page or by an agent, is a `Ballot`
(`core/engine/ballots.py`) the engine decides.

    replies = await cast(ctx, ballot, run=run, gate=gate)

1. What is voted: chat words are read into a ballot here (`read_ballot`: a choice of the gate,
   the form's `name=value`s, a comment); the page, buttons, forms and agents build theirs
   from their fields (`Handler.decide`), so no comment is ever parsed as a command.
2. The engine decides it (`Engine.vote` -> `GateKeeper.vote`): the gate's policy resolved
   (the node's `approval:` with BATON_ACCESS's approvers, admins and four-eyes rule, through
   the `Approvers` port), the voter's standing (others are refused politely), the form's
   values typed and checked like inputs. A quorum approves one thing: once a first vote made
   the gate's *proposal* (its choice and values), an approval that gives no values (a button,
   a plain reply, `approve <run>`) approves the proposal. Before one, an approval of a gate
   with a form that gives no values, or lacks one without a default, asks for them (the
   platform's form, prefilled with the defaults, or the text to type) and records nothing; a
   person whose vote already counted is told so instead. Then the ballot, its audit row and,
   when it completes the decision, the decision are written in one unit of work, a
   compare-and-swap on the votes read (read again when another arrived). A repeat counts once;
   a vote for anything else than the proposal is refused (`VoteDiffers`) and its voter told
   the difference and the two ways on. Pending: the reply says where the quorum stands. Of two
   people completing the quorum at once, one opens the gate; the other's vote counts after it
   and they are told who opened it.
3. What it came to is worded here (`replies`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.commands import authz, queueing, replies
from core.commands.messages import Reply
from core.config import ANYONE, Access
from core.engine.approval_policy import APPROVE, REJECT, Policy, Verdict, shortfall
from core.engine.ballots import Ballot, Source, shortfall_data, state, typed_values
from core.store.records import Gate, Run
from core.workflows.approval_spec import ApprovalSpec
from core.workflows.model import Workflow

__all__ = ["APPROVE", "REJECT", "AccessApprovers", "button_ballot", "cast", "read_ballot", "shortfall_data",
           "state", "typed_values", "unmet"]

_VALUE = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<text>.*)$", re.DOTALL)


@dataclass(frozen=True)
class AccessApprovers:
    """The engine's `Approvers` port over BATON_ACCESS: the workflow's approvers (a node that
    lists none), the admins, the four-eyes rule, and the groups' members."""

    access: Access

    def policy(self, workflow: str, spec: ApprovalSpec | None) -> Policy:
        return policy_in(self.access, workflow, spec)

    def members(self, refs: Iterable[str]) -> frozenset[str]:
        return authz.members(self.access, refs)


def policy_in(access: Access, workflow: str, spec: ApprovalSpec | None) -> Policy:
    """The policy of a gate of `workflow` written as `spec`, under these access settings."""
    fallback = [*access.approve.get(workflow, ()), *access.approve.get(ANYONE, ())]
    return Policy.of(
        spec, approvers=fallback, admins=access.admins, approver_not_requester=access.approver_not_requester,
        people=access.accounts(),
    )


def unmet(access: Access, workflow: Workflow) -> list[dict[str, Any]]:
    """The gates of `workflow` nobody can ever approve under these access settings (e.g. 2 of
    `group:sre` with no BATON_ACCESS, where the group has no members): `baton list` says so."""
    found = []
    for node in workflow.nodes:
        if node.approval is not None:
            lack = shortfall(policy_in(access, workflow.name, node.approval), AccessApprovers(access).members)
            if lack is not None:
                found.append({"node": node.id, **shortfall_data(lack)})
    return found


def read_ballot(
    spec: ApprovalSpec | None, words: Sequence[str], comment: str | None, *, reject: bool,
    user: str, run: Run, gate: Gate, at: float,
) -> Ballot:
    """What a person typed, as a ballot on `gate`: `reject`, or a choice of the gate (its first
    word when it names one, else `approve`), the form's `name=value` words that follow (the
    engine refuses a name the form lacks), and the rest as the comment."""
    if reject:
        return Ballot(user, run.id, REJECT, comment or "", node=gate.node_id, at=at)
    rest = list(words)
    choice = APPROVE
    answers = spec.answers if spec is not None else (APPROVE, REJECT)
    chose = bool(rest) and rest[0] in answers
    if chose:
        choice = rest.pop(0)
    texts: dict[str, str] = {}
    while spec is not None and spec.form and rest and (match := _VALUE.match(rest[0])):
        texts[match["name"]] = match["text"]
        rest.pop(0)
    text = " ".join(rest) if words else (comment or "")
    return Ballot(user, run.id, choice, text, texts, node=gate.node_id, chose=chose, at=at)


def button_ballot(command: str, source: Source = Source.BUTTON) -> Ballot | None:
    """The ballot a gate's button (or the form it opens) stands for: the commands the core
    gives them (`replies.approve_buttons`, `vote_differs`, `approval_values`: `approve <run>`,
    `approve <run> <choice>`, `reject <run>`) read as fields, never parsed as a command; None
    for any other button. Its voter is set by `Handler.decide` from who clicked."""
    words = command.split(" ")
    if len(words) not in (2, 3) or words[0] not in (APPROVE, REJECT) or not words[1]:
        return None
    verb, run, *choice = words
    if verb == REJECT:
        return None if choice else Ballot("", run, REJECT, source=source)
    return Ballot("", run, choice[0] if choice else APPROVE, source=source, chose=bool(choice))


async def cast(
    ctx: Any, ballot: Ballot, *, run: Run, gate: Gate | None, args: Mapping[str, Any] | None = None
) -> list[Reply]:
    """`ballot` decided by the engine on the gate of `run` (`gate`: the one the caller read
    waiting; None: the engine finds it, or refuses): refused, asked for values, counted, or
    deciding the gate (see the module docstring), worded."""
    if ballot.rejects:  # a rejection ends the run: this reply tells it (the background one is skipped)
        ctx.announced.add(run.id)
    try:  # decided in the engine: the policy, the ballot, its audit and any decision
        voted = await ctx.engine.vote(ballot, run=run, gate=gate, args=args)
    except BaseException:
        ctx.announced.discard(run.id)
        raise
    gate = voted.gate or gate
    assert gate is not None
    if not voted.decides:
        ctx.announced.discard(run.id)
    if voted.differs is not None:  # a quorum approves one thing: not counted, and the ways on
        return [replies.vote_differs(run, gate, voted.differs, voted.choice, voted.values)]
    if voted.asks is not None:
        asks = voted.asks
        return [replies.approval_values(run, gate, asks.spec, asks.choice, asks.values, list(asks.missing))]
    if voted.again:
        return [replies.vote_counted(run, gate, voted.tally, voted.state, False)]
    result = voted.tally
    if not voted.decides:
        if voted.decided is not None:  # others completed the decision before this vote counted: who
            return [replies.vote_counted(run, gate, result, voted.state, voted.counted,
                                         decided_by=voted.decided.decided_by)]  # fmt: skip
        if ctx.restate is not None and voted.counted:
            await ctx.restate(run.id, run.platform, voted.state)
        return [replies.vote_counted(run, gate, result, voted.state, voted.counted, comment=ballot.comment)]
    return [
        replies.gate_decided(
            voted.run,
            gate,
            result.verdict is Verdict.DECIDED,
            ballot.user,
            ballot.comment or None,
            decision=result.decision,
            queue=queueing.waiting(ctx.store, voted.run, ballot.at),  # approved, and waits for a slot
            approvers=[v.user for v in result.deciders()],
        )
    ]


def live_state(ctx: Any, run: Run, gate: Gate, now: float) -> dict[str, Any]:
    """The state of `gate`'s policy now, from the votes recorded so far (a message shown after
    a restart shows them): the engine's (`GateKeeper.live_state`)."""
    return ctx.engine.gates.live_state(run, gate, now)
