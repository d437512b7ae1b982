"""Compare-and-swap rules for run status changes (pure).

The repository asks `allowed_sources` which statuses an UPDATE may start from (an
illegal request fails here, before any SQL) and, when the UPDATE matched no row, asks
`lost_race` for the typed error that tells the caller who changed the run and to what
(`already_decided` for a gate decided before).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable

from core.errors import (
    GateAlreadyDecided,
    InvalidTransition,
    Next,
    RunNotResumable,
    RunStateError,
    VoteDiffers,
)
from core.store.records import (
    Gate,
    GateVote,
    JournalEntry,
    NewRun,
    Run,
    RunStatus,
    proposal_of,
    sources_of,
)

RUN_ID_BYTES = 6  # 12 lowercase hex characters
#: Lease length when a caller moves a run to `running` without naming one.
DEFAULT_LEASE_SECONDS = 15.0
_HEX = re.compile(r"[0-9a-f]+")


def new_run_id() -> str:
    """A fresh run id: 12 lowercase hex characters, easy to type as a prefix."""
    return secrets.token_hex(RUN_ID_BYTES)


def lease(
    to: RunStatus, now: float, *, holder: str, lease_owner: str | None, lease_seconds: float | None
) -> tuple[str | None, float | None]:
    """(lease owner, expiry) of a run that moves to `to`: going to `running` takes the lease
    (`lease_owner`, default `holder`, for `lease_seconds`); any other status has none."""
    if to is not RunStatus.RUNNING:
        return None, None
    return lease_owner or holder, now + (lease_seconds or DEFAULT_LEASE_SECONDS)


def new_run(now: float, new: NewRun) -> tuple[Run, str | None]:
    """A new run with a fresh id, version 1, changed by its requester; and its origin event."""
    status = RunStatus(new.status)
    owner, expires = lease(
        status, now, holder=new.requester, lease_owner=new.lease_owner, lease_seconds=new.lease_seconds
    )
    run = Run(
        id=new_run_id(), workflow=new.workflow, platform=new.platform, conversation=new.conversation,
        thread=new.thread, requester=new.requester, args_digest=new.args_digest, status=status, version=1,
        created_at=now, updated_at=now, resumed_from=new.resumed_from, lease_owner=owner,
        lease_expires_at=expires, status_by=new.requester, reason=None, started_by=new.started_by,
        scheduled_for=new.scheduled_for, concurrency=new.concurrency,
        queued_at=now if status is RunStatus.QUEUED else None,
        parent_run=new.parent_run, parent_node=new.parent_node, parent_key=new.parent_key,
    )  # fmt: skip
    return run, new.origin_event


def normalize_prefix(text: str) -> str | None:
    """A run id or digest prefix in canonical form, or None when it cannot match anything."""
    prefix = text.strip().lower()
    return prefix if _HEX.fullmatch(prefix) else None


def prefix_upper_bound(prefix: str) -> str:
    """Smallest string above every hex string starting with `prefix` (for `id < :bound`)."""
    return prefix + "g"


def allowed_sources(to: RunStatus, allowed_from: Iterable[RunStatus] | None) -> frozenset[RunStatus]:
    """Statuses the change to `to` may start from; InvalidTransition when there are none."""
    legal = sources_of(to)
    allowed = legal if allowed_from is None else legal & frozenset(RunStatus(s) for s in allowed_from)
    if not allowed:
        asked = ", ".join(sorted(RunStatus(s).value for s in allowed_from or ())) or "nothing"
        raise InvalidTransition(
            f"A run cannot move from {asked} to {to.value}.",
            status=None,
            next_step=Next.CHECK,
        )
    return allowed


_VERBS: dict[RunStatus, str] = {
    RunStatus.PENDING: "created",
    RunStatus.COMPLETED: "completed",
    RunStatus.FAILED: "failed",
    RunStatus.PAUSED: "paused",
    RunStatus.NEEDS_ATTENTION: "stopped",
    RunStatus.CANCELLED: "cancelled",
    RunStatus.QUEUED: "queued",
}


def who_changed(run: Run) -> str:
    """How the run got its status and who did it: `resumed by ana`, `cancelled by bob`."""
    if run.status is RunStatus.RUNNING:
        # created (v1) and started (v2) runs are "started"; later visits to running are resumes
        verb = "resumed" if run.version >= 3 else "started"
    else:
        verb = _VERBS[run.status]
    return f"{verb} by {run.status_by}" if run.status_by else verb


def lost_race(
    current: Run, to: RunStatus, allowed: frozenset[RunStatus], expected_version: int | None
) -> RunStateError:
    """The error for a CAS that matched no row, given the run as it is now."""
    kind: type[RunStateError] = RunNotResumable if to is RunStatus.RUNNING else InvalidTransition
    status = current.status
    if status is to:
        message = f"run {current.id} is already {status.value} ({who_changed(current)})"
        then = Next.FOLLOW
    elif status in allowed and expected_version is not None and current.version != expected_version:
        now = f"now {status.value}, {who_changed(current)}"
        message = f"run {current.id} changed while you acted on it ({now})"
        then = Next.RECHECK
    elif status.finished and to is RunStatus.RUNNING:
        message = f"run {current.id} is {status.value} ({who_changed(current)}) and cannot be resumed"
        then = Next.NEW_FROM
    else:
        message = f"run {current.id} is {status.value} ({who_changed(current)}); it cannot become {to.value}"
        then = Next.CHECK
    return kind(message, run_id=current.id, status=status.value, by=current.status_by,
                workflow=current.workflow, next_step=then)  # fmt: skip


def lost_takeover(current: Run) -> RunNotResumable:
    """The error for a recovery that another process won (or the owner renewed its lease)."""
    owner = current.lease_owner or current.status_by or "another process"
    return RunNotResumable(
        f"run {current.id} was already taken over by {owner} (now {current.status.value})",
        run_id=current.id,
        status=current.status.value,
        by=owner,
        hint="Nothing to do: that process continues the run.",
    )


def already_decided(
    gate: Gate, run_status: RunStatus | None = None, *, timed_out: str | None = None
) -> GateAlreadyDecided:
    """The error for deciding a gate decided before: which, how, and by whom (`timed_out`:
    the `on_timeout` that decided it)."""
    return GateAlreadyDecided(
        run_id=gate.run_id,
        node_id=gate.node_id,
        decision=gate.status.value,
        by=gate.decided_by,
        status=None if run_status is None else run_status.value,
        timed_out=timed_out,
        # closed with its run (`close_gates`: no choice recorded), not rejected by anyone
        closed=gate.decision is None and run_status is RunStatus.CANCELLED,
    )


def already_settled(entry: JournalEntry) -> InvalidTransition:
    """The error for settling a journal entry that is not `started` any more."""
    return InvalidTransition(
        f"step {entry.node_id} of run {entry.run_id} is already {entry.status.value}",
        run_id=entry.run_id,
        status=entry.status.value,
        next_step=Next.CHECK,
    )


def refuse_other_proposal(vote: GateVote, votes: list[GateVote]) -> None:
    """`VoteDiffers` when the opening's proposal (its first vote, `proposal_of`) is for another
    choice or other values than `vote`: a quorum approves one thing."""
    first = proposal_of(votes)
    if first is not None and first.proposal != vote.proposal:
        raise VoteDiffers(run_id=vote.run_id, node_id=vote.node_id, by=first.user, choice=first.choice,
                          values=dict(first.values))
