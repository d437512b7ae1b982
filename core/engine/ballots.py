"""A person's answer to a gate, as a record: what chat, the run page, buttons, forms and agents
hand the engine (`Engine.vote`), never command text to be parsed again (#27).

    Ballot(user="slack:U1", run="3f2a…", choice="approve", comment="ship it",
           texts={"replicas": "5"}, source=Source.PAGE, node="review", at=now)

The engine decides it (`GateKeeper.vote`): the gate's policy is resolved from the node's
`approval:` and the `Approvers` port it was given (BATON_ACCESS's approvers, admins, four-eyes
rule, groups), the voter's standing checked (`refusal`), the form's values typed, and the
vote counted under the policy. What is pure about that lives here: the refusals, the typed
values, which approval approves the proposal, the policy's live state a gate message shows.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from core.engine.approval_policy import (
    APPROVE,
    REJECT,
    Members,
    Policy,
    Shortfall,
    Standing,
    Tally,
    Vote,
    shortfall,
)
from core.errors import PermissionDenied, UsageError
from core.store.records import Gate, Run
from core.workflows.approval_spec import ApprovalSpec
from core.workflows.args import check_value
from core.workflows.input_spec import InputSpec


class Source(StrEnum):
    """Where a ballot was cast (kept in its audit row)."""

    CHAT = "chat"  # a command or a plain reply
    PAGE = "page"  # the run's page
    BUTTON = "button"  # a gate message's button
    MODAL = "modal"  # a gate's form, submitted
    AGENT = "agent"  # an agent's tool call (MCP)


@dataclass(frozen=True, slots=True)
class Ballot:
    """`user` (an immutable id: `slack:U…`, `mcp:…`) answers the gate of run `run` (`node`:
    that gate; None: the one waiting) with `choice` (`approve`, `reject`, or another of the
    gate's choices), the form's values as typed (`texts`: field -> text, or an agent's JSON
    value, checked and described by its JSON type) and a `comment`.
    `chose`: the choice was named (`hotfix`), not the default approval; `at`: when it was cast
    (escalation, deadlines; the handler's clock)."""

    user: str
    run: str
    choice: str = APPROVE
    comment: str = ""
    texts: Mapping[str, Any] = field(default_factory=dict)
    source: Source = Source.CHAT
    node: str | None = None
    chose: bool = False
    at: float = field(default_factory=time.time)

    @property
    def rejects(self) -> bool:
        return self.choice == REJECT


class Approvers(Protocol):
    """What the engine reads of the access settings to resolve a gate's policy (given at
    construction: `core.commands.authz.AccessApprovers` over BATON_ACCESS)."""

    def policy(self, workflow: str, spec: ApprovalSpec | None) -> Policy:
        """The policy of a gate of `workflow` written as `spec` (None: a short-form gate)."""
        ...

    def members(self, refs: Iterable[str]) -> frozenset[str]:
        """`refs` with each `group:<name>` replaced by its members (`*` stays: anyone)."""
        ...


def refusal(standing: Standing, uid: str, run: Run) -> PermissionDenied:
    if standing is Standing.REQUESTER:
        return PermissionDenied(
            f"{uid} requested run {run.id} and so may not approve its gate.",
            users=[uid],
            hint="Ask another approver of this workflow to decide it.",
        )
    if standing is Standing.AGENT_OWN_RUN:
        return PermissionDenied(
            f"{uid} started run {run.id}, and an agent never decides a gate of its own run.",
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


def check_ballot(spec: ApprovalSpec | None, policy: Policy, ballot: Ballot) -> None:
    """`UsageError` for a choice the gate does not offer, or a value given for a field it
    does not have."""
    if ballot.choice not in policy.choices:
        raise UsageError(
            f"`{ballot.choice}` is not a choice of this gate (its choices: {', '.join(policy.choices)})",
            hint=f"Choose one of {', '.join(policy.choices)}.",
        )
    fields = spec.form if spec is not None else {}
    for name in ballot.texts:
        if name not in fields:
            raise UsageError(
                f"`{name}` is not a field of this gate (its fields: {', '.join(fields)})",
                hint="Type `approve <run> " + " ".join(f"{n}=…" for n in fields) + "`.",
            )


def typed_values(spec: ApprovalSpec, texts: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The form's values (typed texts checked like inputs, defaults for the rest) and the
    fields without a default nobody gave (each is asked for: downstream steps read every
    field); `InputValidationError` for a value that is wrong."""
    values: dict[str, Any] = {}
    missing: list[str] = []
    for name, spec_field in spec.form.items():
        if name in texts:
            values[name] = _check(name, spec_field, texts[name])
        elif spec_field.default is not None:
            values[name] = spec_field.default
        else:  # a value the gate asks for, with no default: nothing downstream could read
            missing.append(name)
    return values, missing


#: how a form field's type is typed (the words `name=value` takes), with an example value
_TYPED = {"boolean": ("true or false", "true"), "integer": ("a whole number", "3"),
          "number": ("a number", "1.5")}


def _check(name: str, spec_field: InputSpec, text: Any) -> Any:
    said, example = _TYPED.get(spec_field.type, (spec_field.type, "…"))
    if spec_field.enum:
        said, example = "one of " + ", ".join(map(str, spec_field.enum)), str(spec_field.enum[0])
    return check_value(
        name,
        spec_field,
        text,
        noun="field",
        pass_as="`{name}=…`",
        hint=f"Give `{name}` as {said}, e.g. `approve <run> {name}={example}`.",
    )


def approves_proposal(ballot: Ballot, proposal: Vote) -> bool:
    """An approval naming no values, and no choice other than the proposal's, approves the
    proposal (a button, a plain reply, `approve <run>`)."""
    return (ballot.choice != REJECT and not ballot.texts
            and (not ballot.chose or ballot.choice == proposal.choice))  # fmt: skip


def shortfall_data(lack: Shortfall) -> dict[str, Any]:
    return {"required": lack.required, "people": lack.people, "groups": list(lack.empty)}


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
