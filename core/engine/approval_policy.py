"""The arithmetic of an approval policy (DESIGN.md "Approvals"): who is eligible, what the
votes so far decide, and when each deadline falls. Pure: no store, no clock, no chat.

Rules
- Eligible: an admin, or a person the gate's approvers list (users, `group:<name>`, `*`),
  widened by `escalate.to` once `escalate.after` has passed since the gate opened. When the
  requester is excluded (`requester_may_approve: false`, or BATON_ACCESS's
  `approver_not_requester`), the requester never is, admins included (four eyes).
- Agents (`mcp:` principals) are people's delegates, never their own reviewers: an agent is
  never eligible on a run it started, and never on a gate marked `humans_only`.
- A person's first vote is their vote: the same person voting again counts once, and a
  later different choice does not replace it, with one exception in the safe direction: a
  person who approved may still reject, and that rejection ends the gate. A person is one
  whichever of their accounts they use (BATON_ACCESS's `people`, `Policy.people`): their
  Discord account cannot complete a quorum their Slack account began, nor approve a run their
  other account requested when the requester is excluded.
- A quorum approves one thing: the first counted non-rejecting vote is the gate's *proposal*
  (its choice and form values); only votes for the same choice with the same values count
  toward it, others count for nothing (the store refuses them: `VoteDiffers`).
- One eligible rejection ends the gate. Otherwise the proposal decides it once `required`
  distinct eligible people voted for it. Votes of people who are not eligible count for nothing.
- Deadlines are offsets from the moment the gate opened: each `remind`, `escalate.after`,
  `timeout`; on timeout the gate's `on_timeout` applies (reject unless `approve` was written).

`members` (how `group:` names expand) is passed in: `core.commands.authz.members` bound to
the access settings; this module never reads settings.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from core.principals import AGENT_PREFIX, ANYONE
from core.store.records import Gate
from core.workflows.approval_spec import APPROVE, DEFAULT_CHOICES, REJECT, ApprovalSpec


def is_agent(user: str) -> bool:
    return user.startswith(AGENT_PREFIX)
Members = Callable[[Iterable[str]], frozenset[str]]


class Standing(StrEnum):
    ELIGIBLE = "eligible"
    REQUESTER = "requester"  # the requester, and the policy excludes them
    NOT_LISTED = "not_listed"  # neither an approver (yet) nor an admin
    AGENT_OWN_RUN = "agent_own_run"  # an agent, on a run it started
    HUMANS_ONLY = "humans_only"  # an agent, on a gate only people decide


@dataclass(frozen=True, slots=True)
class Vote:
    user: str
    choice: str
    at: float
    comment: str = ""
    values: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Policy:
    """A gate's policy with the settings' parts resolved: `approvers` are the refs that decide
    it (the node's list, else the workflow's approvers from BATON_ACCESS), `admins` the
    admins' refs."""

    approvers: tuple[str, ...]
    admins: tuple[str, ...] = ()
    required: int = 1
    exclude_requester: bool = False
    choices: tuple[str, ...] = DEFAULT_CHOICES
    timeout: float | None = None
    on_timeout: str = REJECT
    remind: tuple[float, ...] = ()
    escalate_after: float | None = None
    escalate_to: tuple[str, ...] = ()
    humans_only: bool = False
    #: an id -> the person it belongs to (`person:<name>`), for the ids BATON_ACCESS's `people` lists
    people: Mapping[str, str] = field(default_factory=dict, hash=False)

    def who(self, user: str) -> str:
        """The person `user` is: one of several accounts' `person:<name>`, else the id itself."""
        return self.people.get(user, user)

    @classmethod
    def of(
        cls,
        spec: ApprovalSpec | None,
        *,
        approvers: Sequence[str],
        admins: Sequence[str] = (),
        approver_not_requester: bool = False,
        people: Mapping[str, str] | None = None,
    ) -> Policy:
        """The policy of a gate written as `spec` (None: a short-form gate); `approvers` are
        the refs deciding it when the node lists none; `people`: whose accounts are one person's."""
        if spec is None:
            return cls(tuple(approvers), tuple(admins), exclude_requester=approver_not_requester,
                       people=people or {})
        return cls(
            people=people or {},
            approvers=tuple(spec.approvers if spec.approvers is not None else approvers),
            admins=tuple(admins),
            required=spec.required,
            exclude_requester=approver_not_requester or spec.requester_may_approve is False,
            choices=spec.answers,
            timeout=spec.timeout,
            on_timeout=spec.on_timeout,
            remind=tuple(sorted(spec.remind)),
            escalate_after=spec.escalate.after if spec.escalate else None,
            escalate_to=tuple(spec.escalate.to) if spec.escalate else (),
            humans_only=spec.humans_only,
        )

    def escalated(self, opened_at: float, now: float) -> bool:
        return self.escalate_after is not None and now >= opened_at + self.escalate_after

    def refs(self, opened_at: float, now: float) -> tuple[str, ...]:
        """Who may decide at `now` (refs, before group expansion), escalation included."""
        return (*self.approvers, *self.escalate_to) if self.escalated(opened_at, now) else self.approvers

    def standing(
        self, user: str, *, requester: str, opened_at: float, now: float, members: Members
    ) -> Standing:
        if is_agent(user) and self.humans_only:
            return Standing.HUMANS_ONLY
        if is_agent(user) and user == requester:
            return Standing.AGENT_OWN_RUN
        if self.exclude_requester and self.who(user) == self.who(requester):
            return Standing.REQUESTER  # their other account included
        if user in members(self.admins):
            return Standing.ELIGIBLE
        people = members(self.refs(opened_at, now))
        return Standing.ELIGIBLE if ANYONE in people or user in people else Standing.NOT_LISTED


@dataclass(frozen=True, slots=True)
class Shortfall:
    """A policy nobody can ever satisfy: it needs `required` distinct people and at most
    `people` are eligible, escalation and admins included; `empty` names its groups that have
    no members (an undefined group is nobody)."""

    required: int
    people: int
    empty: tuple[str, ...]


def shortfall(policy: Policy, members: Members, *, requester: str | None = None) -> Shortfall | None:
    """Why `policy` can never be met (a `Shortfall`), or None when enough people may vote.
    Everyone who may ever vote counts: its approvers, those an escalation adds, the admins;
    not the `requester` when the policy excludes them (None: not known yet)."""
    refs = (*policy.approvers, *policy.escalate_to)
    ids = members((*refs, *policy.admins))
    if ANYONE in ids:
        return None
    people = {policy.who(uid) for uid in ids}  # one person's accounts are one voice
    if policy.exclude_requester and requester is not None:
        people -= {policy.who(requester)}
    if len(people) >= policy.required:
        return None
    groups = [r for r in refs if r.startswith("group:")]
    empty = tuple(dict.fromkeys(g.removeprefix("group:") for g in groups if not members([g])))
    return Shortfall(policy.required, len(people), empty)


class Verdict(StrEnum):
    PENDING = "pending"
    DECIDED = "decided"  # a non-reject choice reached the quorum
    REJECTED = "rejected"


@dataclass(frozen=True, slots=True)
class Tally:
    verdict: Verdict
    decision: str | None  # the choice decided (`reject` when rejected), None while pending
    counted: tuple[Vote, ...]  # the votes that count, first vote per eligible person, in order
    counts: Mapping[str, int]  # choice -> distinct eligible voters
    required: int
    proposal: Vote | None = None  # the first counted vote that is not a rejection: what the quorum approves

    @property
    def leading(self) -> int:
        """Votes of the best-placed non-reject choice (what "1/2" shows)."""
        return max((n for c, n in self.counts.items() if c != REJECT), default=0)

    @property
    def voters(self) -> frozenset[str]:
        return frozenset(v.user for v in self.counted)

    def voted(self, policy: Policy, user: str) -> bool:
        """Whether `user`'s person has a vote counted, cast with whichever of their accounts."""
        return any(policy.who(v.user) == policy.who(user) for v in self.counted)

    def deciders(self) -> tuple[Vote, ...]:
        """The votes that made the decision (the rejection, or the quorum of that choice)."""
        if self.decision is None:
            return ()
        return tuple(v for v in self.counted if v.choice == self.decision)[: max(self.required, 1)]


def _cast_order(vote: Vote) -> tuple[float, str, bool, str, str, str]:
    """Votes in the order cast; a tie (same instant) is broken the same way whatever order
    they arrive in: by user, an approval before a rejection, then by choice, values and comment
    (one person's two votes at one instant with other values must not let arrival order pick
    the one that counts)."""
    values = json.dumps(dict(vote.values), sort_keys=True, default=str)
    return vote.at, vote.user, vote.choice == REJECT, vote.choice, values, vote.comment


def first_votes(votes: Iterable[Vote]) -> list[Vote]:
    """Each person's first vote, in the order they were cast (ties: by user id, stable)."""
    seen: set[str] = set()
    kept: list[Vote] = []
    for vote in sorted(votes, key=_cast_order):
        if vote.user not in seen:
            seen.add(vote.user)
            kept.append(vote)
    return kept


def same_thing(a: Vote, b: Vote) -> bool:
    """True when two votes approve the same thing: the same choice with the same form values."""
    return _canonical(a) == _canonical(b)


def _canonical(vote: Vote) -> str:
    return json.dumps([vote.choice, dict(vote.values)], sort_keys=True, separators=(",", ":"), default=str)


def tally(
    policy: Policy,
    votes: Iterable[Vote],
    *,
    requester: str,
    opened_at: float,
    members: Members,
) -> Tally:
    """What `votes` decide under `policy`. A vote counts when its voter was eligible when it
    was cast (an escalation widens who may vote from then on; it never un-counts a vote)."""
    counted: list[Vote] = []
    counts: dict[str, int] = {}
    voted: set[str] = set()  # people (`Policy.who`), not accounts
    proposal: Vote | None = None
    for vote in sorted(votes, key=_cast_order):
        person = policy.who(vote.user)
        if vote.choice not in policy.choices or (person in voted and vote.choice != REJECT):
            continue
        if vote.choice != REJECT and proposal is not None and not same_thing(vote, proposal):
            continue  # for something else than the proposal: it counts for nothing
        standing = policy.standing(
            vote.user, requester=requester, opened_at=opened_at, now=vote.at, members=members
        )
        if standing is not Standing.ELIGIBLE:
            continue
        voted.add(person)
        counted.append(vote)
        counts[vote.choice] = counts.get(vote.choice, 0) + 1
        if vote.choice == REJECT:
            return Tally(Verdict.REJECTED, REJECT, tuple(counted), counts, policy.required, proposal)
        proposal = proposal or vote
        if counts[vote.choice] >= policy.required:
            return Tally(Verdict.DECIDED, vote.choice, tuple(counted), counts, policy.required, proposal)
    return Tally(Verdict.PENDING, None, tuple(counted), counts, policy.required, proposal)


def gate_output(gate: Gate) -> dict[str, Any]:
    """The output of an approved gate, as downstream nodes read it: `decision` (the choice),
    `values` (the form's), `approvers` ([{user, at, comment}], the people who decided), and,
    as before policies, `approved`, `by` and `comment`."""
    approvers = gate.outcome.get("approvers") or [
        {"user": gate.decided_by, "at": gate.decided_at, "comment": gate.comment or ""}
    ]
    return {
        "decision": gate.decision or APPROVE,
        "values": dict(gate.outcome.get("values") or {}),
        "approvers": approvers,
        "approved": True,
        "by": gate.decided_by,
        "comment": gate.comment,
    }


# -- deadlines ------------------------------------------------------------------------------


class DeadlineKind(StrEnum):
    REMIND = "remind"
    ESCALATE = "escalate"
    TIMEOUT = "timeout"


@dataclass(frozen=True, slots=True, order=True)
class Deadline:
    at: float
    kind: DeadlineKind
    index: int = 0  # which reminder (0 for escalate and timeout)

    @property
    def name(self) -> str:
        """Stable within a gate opening: the key of its durable row (`remind:1`, `timeout`)."""
        return f"{self.kind.value}:{self.index}" if self.kind is DeadlineKind.REMIND else self.kind.value


def deadlines(policy: Policy, opened_at: float) -> tuple[Deadline, ...]:
    """Every deadline of a gate opened at `opened_at`, in time order (a tie: remind, then
    escalate, then timeout). Reminders and escalations at or after the timeout never fire."""
    found = [Deadline(opened_at + after, DeadlineKind.REMIND, i) for i, after in enumerate(policy.remind)]
    if policy.escalate_after is not None:
        found.append(Deadline(opened_at + policy.escalate_after, DeadlineKind.ESCALATE))
    if policy.timeout is not None:
        end = opened_at + policy.timeout
        found = [d for d in found if d.at < end]
        found.append(Deadline(end, DeadlineKind.TIMEOUT))
    order = {DeadlineKind.REMIND: 0, DeadlineKind.ESCALATE: 1, DeadlineKind.TIMEOUT: 2}
    return tuple(sorted(found, key=lambda d: (d.at, order[d.kind], d.index)))


def due(all_deadlines: Iterable[Deadline], fired: Iterable[str], now: float) -> list[Deadline]:
    """The deadlines that are due at `now` and have not fired, in order."""
    done = set(fired)
    return [d for d in all_deadlines if d.at <= now and d.name not in done]


def timeout_decision(policy: Policy) -> str:
    """What a timeout decides: `on_timeout` (reject unless `approve`, `skip` or `fail` was written)."""
    return policy.on_timeout


def outstanding(
    policy: Policy, votes: Iterable[Vote], *, requester: str, opened_at: float, now: float, members: Members
) -> frozenset[str]:
    """The eligible people (by id) who have not voted: whom a reminder goes to. `*` and
    admins are not people to remind; a group's members are; a person who voted with one
    account is not reminded on another."""
    voted = {policy.who(v.user) for v in votes}
    if policy.exclude_requester:
        voted.add(policy.who(requester))
    ids = members(policy.refs(opened_at, now)) - {ANYONE}
    return frozenset(uid for uid in ids if policy.who(uid) not in voted)


__all__ = [
    "APPROVE", "REJECT", "Deadline", "DeadlineKind", "Members", "Policy", "Shortfall", "Standing", "Tally",
    "Verdict", "Vote", "deadlines", "due", "first_votes", "outstanding", "same_thing", "shortfall", "tally",
    "timeout_decision",
]
