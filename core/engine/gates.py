"""Approval gates, in one place: which gate a run means, asking one, deciding one.

    gates = GateKeeper(store)
    gates.waiting(run)              the gate a plain approve or reject answers (or None)
    gates.decided(run)              the gate decided last: who won a race (or None)
    gates.to_decide(run, gate)      the gate a decision answers, or the refusal saying why not
    gates.approve(run, gate, decision)
                                    one unit of work: gate CAS, run CAS paused -> running, audit row
    gates.reject(run, gate, decision)
                                    one unit of work: gate CAS, run CAS paused -> cancelled,
                                    rejection marker in the journal, audit row
                                    (either: the caller's `alongside` writes in the same unit, as a
                                    timeout's deadline CAS, `timeout` audit row and outbox line)
    gates.vote(run, gate, ballot)   a `Ballot` (`ballots.py`) decided under the gate's policy,
                                    resolved here (the node's `approval:`, the `Approvers` port):
                                    the voter's standing, the form's values, then the ballot, its
                                    audit row and, when it completes the decision, the decision,
                                    in one unit of work (`count`: a CAS on the votes read, read
                                    again when one arrived)
    gates.ask(run_id, node, ...)    the executor's side: the gate for a step's question (kept,
                                    opened, or re-opened when the question changed)

The rules: of several gates waiting in a run, the one that has waited longest is meant
(`Gates.waiting_gate` in the store, the same query everywhere); a gate counts as waiting only
while its run is paused (a run that runs, failed or ended asks nothing). Deciding a gate
decided before raises the one `GateAlreadyDecided` (`core.store.cas.already_decided`), naming
the decision, who made it and the run's status; the commands layer words what to do next.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from core.engine import ballots
from core.engine.approval_policy import REJECT, Members, Policy, Standing, Tally, Verdict, Vote, tally
from core.engine.ballots import Approvers, Ballot
from core.engine.events import ENGINE_ACTOR, tell_rest
from core.engine.journal_index import MARKER_KEY, REJECTED_MARKER
from core.engine.notify import Notifier
from core.errors import (
    GateAlreadyDecided,
    Next,
    RunNotFound,
    RunNotResumable,
    StoreError,
    VoteDiffers,
    VotesChanged,
    WorkflowError,
)
from core.store.cas import already_decided, refuse_other_proposal
from core.store.port import Ballots, Events, Gates, Transactions, Transition
from core.store.records import Gate, GateStatus, GateVote, Run, RunStatus
from core.store.unit_of_work import Pending, UnitOfWork
from core.workflows.approval_spec import ApprovalSpec
from core.workflows.catalog import Catalog

#: writes a caller adds to a decision's unit of work: they exist exactly when the decision does
Alongside = Callable[[UnitOfWork], None]


@dataclass(frozen=True, slots=True)
class Decision:
    """A gate decided outright, not by a person's vote (a gate's `on_timeout`, the engine's
    `approve` / `reject`): by `actor`, `approved` or not, with a `comment` (a rejection's
    reason, secrets hidden). Approved: the `choice` decided (default `approve`) and its
    `outcome` (values, approvers). Rejected: `fail` ends the run failed (`on_timeout: fail`).
    `timed_out`: the gate's `on_timeout` decided (told as such where the gate was offered);
    `alongside`: the caller's writes, in the decision's unit of work."""

    actor: str
    approved: bool
    comment: str | None = None
    choice: str | None = None
    outcome: Mapping[str, Any] | None = None
    fail: bool = False
    timed_out: bool = False
    alongside: Alongside | None = None


class GateStore(Transactions, Protocol):
    """The store roles a `GateKeeper` uses: gates, their votes, the audit, units of work."""

    @property
    def gates(self) -> Gates: ...
    @property
    def ballots(self) -> Ballots: ...
    @property
    def events(self) -> Events: ...


class GateKeeper:
    def __init__(
        self, store: GateStore, notifier: Notifier | None = None, *, catalog: Catalog | None = None,
        approvers: Approvers | None = None, owner: str = "", lease_seconds: float = 15.0,
    ) -> None:
        self.store = store
        self.notifier = notifier  # the engine's: a run a rejection ends tells its notices in the unit
        #: where a gate's `approval:` is read (None: every gate is a short-form one)
        self.catalog = catalog
        #: the access settings' part of every policy (approvers, admins, groups); set once by
        #: the composition (`Engine(approvers=…)`); a vote with none is refused (fail closed)
        self.approvers = approvers
        self.owner = owner  # the lease a run an approval opens takes
        self.lease_seconds = lease_seconds

    # -- which gate ---------------------------------------------------------------------------
    def waiting(self, run: Run) -> Gate | None:
        """The gate a plain approve or reject of `run` answers: the one that has waited
        longest, while the run is paused; None otherwise."""
        return self.store.gates.waiting_gate(run.id) if run.status is RunStatus.PAUSED else None

    def decided(self, run: Run) -> Gate | None:
        """The gate of `run` decided last (who won a race), or None."""
        return self.store.gates.decided_gate(run.id)

    def refusal(self, run: Run, gate: Gate) -> GateAlreadyDecided:
        """The error for deciding `gate` of `run` again: which decision, by whom, or that it
        timed out (its `on_timeout` decided, as the audit trail of that opening says)."""
        timed_out = None
        if gate.decided_by == ENGINE_ACTOR:
            timed_out = next((
                str(e.details.get("on_timeout") or "reject") for e in self.store.events.audit_log(run.id)
                if e.action == "timeout" and e.details.get("node") == gate.node_id and e.at >= gate.created_at
            ), None)  # fmt: skip
        return already_decided(gate, run.status, timed_out=timed_out)

    def to_decide(self, run: Run, gate: Gate | None = None) -> Gate:
        """The gate a decision about `run` answers: `gate` (read by the caller) while it still
        waits in the paused run, else the waiting one. `GateAlreadyDecided` when none waits
        and one was decided; `RunNotResumable` when the run asks nothing."""
        usable = gate is not None and gate.run_id == run.id and gate.status is GateStatus.WAITING
        if gate is not None and usable and run.status is RunStatus.PAUSED:
            return gate
        waiting = self.waiting(run)
        if waiting is not None:
            return waiting
        decided = self.decided(run)
        if decided is not None:  # another approver won: say who
            raise self.refusal(run, decided)
        raise RunNotResumable(
            f"run {run.id} is {run.status.value} and no approval waits in it",
            run_id=run.id,
            status=run.status.value,
            by=run.status_by,
            next_step=Next.RESUME if run.status.unfinished else Next.SEE,
        )

    # -- deciding -------------------------------------------------------------------------------
    def approve(self, run: Run, gate: Gate, decision: Decision) -> Run:
        """`gate` approved and the run `running` again under this keeper's lease, audited: one
        unit of work. The run's CAS is on the version read (`run.version`); the decision's
        `alongside` adds the caller's writes to the unit (after the two CAS writes)."""
        try:
            with self.store.transaction() as tx:
                resumed = approving(tx, run, gate, actor=decision.actor, comment=decision.comment,
                                    owner=self.owner, lease_seconds=self.lease_seconds,
                                    decision=decision.choice, outcome=decision.outcome,
                                    alongside=decision.alongside)  # fmt: skip
        except GateAlreadyDecided as exc:
            raise self._lost(run, exc) from exc
        return resumed.value

    def reject(self, run: Run, gate: Gate, decision: Decision) -> tuple[Run, str]:
        """`gate` rejected and the run cancelled (`decision.fail`: failed), with the rejection's
        marker in the journal and the audit row: one unit of work. The run as ended, and why
        (its reason). The decision's `alongside` adds the caller's writes to the unit (after
        the two CAS writes, so before the run's rest row: a timeout's line goes out before the
        run's final reply)."""
        try:
            with self.store.transaction() as tx:
                ended, why = rejecting(tx, run, gate, actor=decision.actor, reason=decision.comment,
                                       fail=decision.fail, alongside=decision.alongside,
                                       notifier=self.notifier)  # fmt: skip
        except GateAlreadyDecided as exc:
            raise self._lost(run, exc) from exc
        return ended.value, why

    # -- voting -------------------------------------------------------------------------------
    def spec(self, run: Run, gate: Gate) -> ApprovalSpec | None:
        """The gate's policy as the workflow states it now; None when the workflow or node is
        gone (then the access settings decide who may, as for a short-form gate)."""
        if self.catalog is None:
            return None
        try:
            return self.catalog.get(run.workflow).node(gate.node_id).approval
        except (WorkflowError, KeyError):
            return None

    def policy(self, run: Run, gate: Gate) -> tuple[ApprovalSpec | None, Policy, Members]:
        """The gate's spec, its policy (the node's `approval:` with the access settings' part)
        and how its groups expand."""
        if self.approvers is None:
            raise StoreError("No approvers were configured for this engine; no gate can be decided.")
        spec = self.spec(run, gate)
        return spec, self.approvers.policy(run.workflow, spec), self.approvers.members

    def so_far(self, run: Run, gate: Gate, policy: Policy, members: Members) -> Tally:
        """What the votes recorded so far on this opening of `gate` decide."""
        votes = [_as_vote(v) for v in self.store.ballots.gate_votes(run.id, gate.node_id, gate.created_at)]
        return tally(policy, votes, requester=run.requester, opened_at=gate.created_at, members=members)

    def live_state(self, run: Run, gate: Gate, now: float) -> dict[str, Any]:
        """The state of `gate`'s policy now, from the votes recorded so far."""
        _, policy, members = self.policy(run, gate)
        return ballots.state(policy, self.so_far(run, gate, policy, members), run, gate, now, members)

    def vote(self, run: Run, gate: Gate, ballot: Ballot) -> Voted:
        """`ballot` decided on `gate` (waiting in the paused `run`) under the gate's policy:
        refused (`PermissionDenied`: not eligible; `UsageError`: a field the gate lacks), the
        form's values asked for (`Voted.asks`, nothing recorded), a repeat told, or counted
        (`count`). A quorum approves one thing: an approval naming no values approves the
        proposal; a ballot for anything else is not counted (`Voted.differs`, audited)."""
        spec, policy, members = self.policy(run, gate)
        standing = policy.standing(ballot.user, requester=run.requester, opened_at=gate.created_at,
                                   now=ballot.at, members=members)  # fmt: skip
        if standing is not Standing.ELIGIBLE:
            raise ballots.refusal(standing, ballot.user, run)
        ballots.check_ballot(spec, policy, ballot)
        before = self.so_far(run, gate, policy, members)
        choice, values = ballot.choice, dict[str, Any]()
        if before.proposal is not None and ballots.approves_proposal(ballot, before.proposal):
            choice, values = before.proposal.choice, dict(before.proposal.values)
        elif choice != REJECT and spec is not None and spec.form:
            values, missing = ballots.typed_values(spec, ballot.texts)
            if before.voted(policy, ballot.user) and not ballot.texts:  # "lgtm" again: their vote is in
                return Voted(False, before, run, gate=gate, again=True,
                             state=ballots.state(policy, before, run, gate, ballot.at, members))  # fmt: skip
            if missing or not ballot.texts:  # a form is filled in, never assumed: ask (defaults shown)
                return Voted(False, before, run, gate=gate, asks=Asks(spec, choice, values, tuple(missing)))
        vote = GateVote(run.id, gate.node_id, gate.created_at, ballot.user, choice, ballot.at, ballot.comment,
                        values)  # fmt: skip
        try:
            voted = self.count(run, gate, vote, policy, members, source=ballot.source)
        except VoteDiffers as other:  # not counted: said so in the audit trail, and to the voter
            self.store.events.audit(actor=ballot.user, action="vote", run_id=run.id, details={
                "node": gate.node_id, "choice": choice, "counted": False, "differs_from": other.by,
                "comment": ballot.comment, "source": ballot.source.value})  # fmt: skip
            return Voted(False, before, run, gate=gate, choice=choice, values=values, differs=other)
        shown = {} if voted.decides else ballots.state(policy, voted.tally, run, gate, ballot.at, members)
        return dataclasses.replace(voted, gate=gate, choice=choice, values=values, state=shown)

    def count(
        self, run: Run, gate: Gate, ballot: GateVote, policy: Policy, members: Members, *,
        source: str = "chat",
    ) -> Voted:
        """`ballot` counted on `gate` under `policy`: the policy is evaluated over the votes
        recorded and this one, and the ballot, its audit row and, when it completes the
        decision, the decision (`approving` / `rejecting`: gate and run CAS, audit, journal
        marker, the run's rest row in the outbox) are written in ONE unit of work. The unit is
        a CAS on the votes read (`tx.cast_vote`): when another vote arrived meanwhile, the
        votes are read and the policy evaluated again. A ballot for anything else than the
        proposal raises `VoteDiffers`, recording nothing. The decision's comment is the
        ballot's (already redacted)."""
        comment = ballot.comment or None
        for _ in range(_VOTE_ATTEMPTS):
            recorded = self.store.ballots.gate_votes(run.id, gate.node_id, gate.created_at)
            votes = [_as_vote(v) for v in recorded]
            before = tally(policy, votes, requester=run.requester, opened_at=gate.created_at, members=members)
            details = {"node": gate.node_id, "choice": ballot.choice, "comment": ballot.comment,
                       "source": source}
            if any(policy.who(v.user) == policy.who(ballot.user) and v.ballot == ballot.ballot
                   for v in recorded):  # a person's vote counts once, whichever account cast it
                self.store.events.audit(actor=ballot.user, action="vote", run_id=run.id, details={**details,
                                 "counted": False})  # fmt: skip
                return Voted(False, before, run)
            if ballot.ballot == "vote":
                refuse_other_proposal(ballot, recorded)
            after = tally(policy, [*votes, _as_vote(ballot)], requester=run.requester,
                          opened_at=gate.created_at, members=members)  # fmt: skip
            decides = before.verdict is Verdict.PENDING and after.verdict is not Verdict.PENDING
            try:
                with self.store.transaction() as tx:
                    tx.cast_vote(ballot, seen=len(recorded))
                    tx.audit(actor=ballot.user, action="vote", run_id=run.id,
                             details={**details, "counted": True})  # fmt: skip
                    if decides and after.verdict is Verdict.DECIDED:
                        resumed = approving(
                            tx, run, gate, actor=ballot.user, comment=comment, owner=self.owner,
                            lease_seconds=self.lease_seconds, decision=after.decision,
                            outcome=outcome_of(after),
                        )  # fmt: skip
                    elif decides:
                        ended, why = rejecting(tx, run, gate, actor=ballot.user, reason=comment,
                                               notifier=self.notifier)
            except VotesChanged:
                continue  # another vote arrived since they were read: evaluate again
            except GateAlreadyDecided as exc:
                raise self._lost(run, exc) from exc
            if not decides:  # pending, or others completed the decision before: who did
                decided = None if before.verdict is Verdict.PENDING else self.decided(run)
                return Voted(True, after, run, decided)
            if after.verdict is Verdict.DECIDED:
                return Voted(True, after, resumed.value, decides=True)
            return Voted(True, after, ended.value, why=why, decides=True)
        raise StoreError(f"The votes on {gate.node_id} of run {run.id} kept changing; try again.")

    def _lost(self, run: Run, exc: GateAlreadyDecided) -> GateAlreadyDecided:
        """A decision that lost its race: who won, as the store has it now."""
        won = self.decided(run)
        return self.refusal(run, won) if won is not None else exc

    # -- asking ---------------------------------------------------------------------------------
    def ask(self, run_id: str, node_id: str, prompt: str, key: str, *, why: str,
            since: float | None = None) -> Gate:
        """The gate of `node_id` for the question `prompt` (its cache key `key`): the gate as
        it is when it answers this question (waiting or decided), a new waiting one when there
        was none, or the old one re-opened without its decision (audited with `why`) when it
        answered another question, or was decided before `since` (the node was invalidated
        then: `invalidate <run> <gate>` asks again, never re-uses the decision it dropped; a
        gate still waiting when it was invalidated keeps the decision made since)."""
        try:
            gate: Gate | None = self.store.gates.get_gate(run_id, node_id)
        except RunNotFound:
            gate = None
        decided = gate.decided_at if gate is not None else None
        dropped = since is not None and decided is not None and decided < since
        if gate is not None and answers(gate, key, prompt) and not dropped:
            return gate
        if gate is not None:
            self.store.events.audit(
                actor=ENGINE_ACTOR,
                action="reopen_gate",
                run_id=run_id,
                details={"node": node_id, "was": gate.status.value, "by": gate.decided_by, "why": why},
            )
        return self.store.gates.open_gate(run_id, node_id, prompt, key, decided_before=since)


_VOTE_ATTEMPTS = 20  # each lost round means another vote was recorded: the votes are few


@dataclass(frozen=True, slots=True)
class Asks:
    """A gate's form to fill in before a vote counts: its `choice`, the `values` known (the
    defaults, what was typed) and the fields without a default nobody gave."""

    spec: ApprovalSpec
    choice: str
    values: dict[str, Any]
    missing: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Voted:
    """What a vote came to: `counted` (False: that person's same ballot was in already), the
    tally with it, the run after it (running again, ended, or as it was), `decided`: the gate
    as others decided it before this vote counted, `why` a rejection ended the run, and
    `decides`: this vote completed the decision (`tally.verdict` says which). From
    `GateKeeper.vote`: the `gate` voted on, the `choice` and `values` voted for, the policy's
    live `state` after it (while the gate still waits), and `asks`: the form to fill in first
    (nothing recorded); `again`: this person's vote was in already (a repeat naming no values:
    nothing recorded); `differs`: the ballot was for something else than the proposal (not
    counted, audited)."""

    counted: bool
    tally: Tally
    run: Run
    decided: Gate | None = None
    why: str | None = None
    decides: bool = False
    gate: Gate | None = None
    choice: str = ""
    values: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    asks: Asks | None = None
    again: bool = False
    differs: VoteDiffers | None = None


def _as_vote(vote: GateVote) -> Vote:
    return Vote(vote.user, vote.choice, vote.at, vote.comment, vote.values)


def outcome_of(result: Tally) -> dict[str, Any]:
    """What an opened gate carries: the deciders' values (one proposal: all the same) and who
    they are."""
    values: dict[str, Any] = {}
    for vote in result.deciders():
        values.update(vote.values)
    approvers = [{"user": v.user, "at": v.at, "comment": v.comment} for v in result.deciders()]
    return {"values": values, "approvers": approvers}


def approving(
    tx: UnitOfWork, run: Run, gate: Gate, *, actor: str, comment: str | None, owner: str,
    lease_seconds: float, decision: str | None = None, outcome: Mapping[str, Any] | None = None,
    alongside: Alongside | None = None,
) -> Pending[Run]:
    """The writes of an approval in `tx`: gate CAS, run CAS paused -> running (on the version
    read), the caller's, the audit row. The run as resumed."""
    tx.decide_gate(run.id, gate.node_id, approved=True, by=actor, comment=comment,
                   decision=decision, outcome=outcome)  # fmt: skip
    resumed = tx.transition(Transition(
        run.id, RunStatus.RUNNING, actor=actor, expected_version=run.version,
        allowed_from=(RunStatus.PAUSED,), lease_owner=owner, lease_seconds=lease_seconds,
    ))  # fmt: skip
    if alongside is not None:
        alongside(tx)
    details: dict[str, Any] = {"node": gate.node_id, "comment": comment}
    if decision is not None:  # decided by a policy's votes: which choice
        details["decision"] = decision
    tx.audit(actor=actor, action="approve", run_id=run.id, details=details)
    return resumed


def rejecting(
    tx: UnitOfWork, run: Run, gate: Gate, *, actor: str, reason: str | None, fail: bool = False,
    alongside: Alongside | None = None, notifier: Notifier | None = None,
) -> tuple[Pending[Run], str]:
    """The writes of a rejection in `tx`: gate CAS, run CAS paused -> cancelled (`fail`:
    failed), the caller's, the journal marker, the audit row, the run's rest row. The run
    as ended, and why."""
    if fail:
        why = f"timed out at `{gate.node_id}`" + (f": {reason}" if reason else "")
    else:
        why = f"rejected at `{gate.node_id}` by {actor}" + (f": {reason}" if reason else "")
    status = RunStatus.FAILED if fail else RunStatus.CANCELLED
    tx.decide_gate(run.id, gate.node_id, approved=False, by=actor, comment=reason)
    ended = tx.transition(Transition(run.id, status, actor=actor, reason=why,
                                     allowed_from=(RunStatus.PAUSED,)))
    if alongside is not None:
        alongside(tx)
    marker = rejection_marker(gate.node_id, actor, reason)
    tx.journal_note(run_id=run.id, node_id=gate.node_id, cache_key=MARKER_KEY, components=marker, error=why)
    tx.audit(actor=actor, action="fail" if fail else "reject", run_id=run.id,
             details={"node": gate.node_id, "reason": reason})  # fmt: skip
    if notifier is not None:  # the run's rest row and the notices of its end, in this unit
        notifier.rest(tx, run, status, reason=why, node=gate.node_id)
    else:
        tell_rest(tx, run.id, status, reason=why, node=gate.node_id)
    return ended, why


def answers(gate: Gate, key: str, prompt: str) -> bool:
    """True when `gate` was opened for this question: the same key (or, for a gate from
    before keys were recorded, the same prompt)."""
    return gate.cache_key == key if gate.cache_key else gate.prompt == prompt


def rejection_marker(node_id: str, actor: str, reason: str | None) -> dict[str, Any]:
    """Components of the entry a rejected approval leaves in the journal."""
    return {"marker": REJECTED_MARKER, "by": actor, "node": node_id, "reason": reason or ""}
