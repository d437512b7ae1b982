"""Admission: which runs of a concurrency key are active at once, and who waits behind them
(DESIGN.md, "Concurrency and the queue"). The policy lives here once; each store applies it
over its own tables through a `Ledger`.

A unit of work that touches a run with a concurrency key runs under the key's lock (SQLite:
the single writer; PostgreSQL: the key's row of `concurrency_locks`, locked by an upsert as
`SELECT … FOR UPDATE` would, before any run row), so two replicas never admit past the
limit. Inside it:

    ask(ledger, run, now, actor)    a run asks for a slot (created, resumed, approved): its
                                    `on_limit` applies at a full key (refused: cancel_new or a
                                    full queue; active runs cancelled and it starts at once:
                                    cancel_running; the queued ones cancelled: replace_queued;
                                    both only of its own workflow or requester, `_may_take`),
                                    else it joins the key's queue (`queued`, `queued_at` now)
    settle(ledger, key, now, …)     once the unit's writes are done: the oldest queued runs are
                                    admitted (-> `running`) while the key's active runs are
                                    fewer than their limit; FIFO, nobody passes the head

Active = `Run.holds_slot`: running, needs_attention, and paused while `hold_while_paused`.
A run the unit itself asked for is admitted with the lease its caller asked for (the caller
executes it); any other run admitted gets a lapsed lease under `ADMITTED_OWNER`, so the
process that admitted it, or any replica's recovery loop, takes it over and starts it:
nothing depends on a process staying alive.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Protocol

from core.errors import ConcurrencyLimitReached
from core.store.records import OnLimit, Run, RunStatus

#: the lease owner of a run admitted for whoever takes it over first (its lease has lapsed)
ADMITTED_OWNER = "admitted"
#: the outbox kind a run cancelled by a limit is told with (the engine's `run_finished`)
RUN_FINISHED = "run_finished"


class Ledger(Protocol):
    """What admission reads and writes of one key, inside a unit holding the key's lock."""

    def get(self, run_id: str) -> Run | None: ...

    def holders(self, key: str) -> list[Run]:
        """The key's runs that may hold a slot (running, needs_attention, paused), oldest first."""

    def queued(self, key: str, first: int) -> list[Run]:
        """The head of the key's queue: its `first` queued runs in queue order (`queued_at`)."""

    def queued_count(self, key: str, up_to: float | None = None) -> int:
        """How many runs of the key are queued (with `up_to`: queued at or before it)."""

    def slots(self, key: str) -> tuple[list[Run], int]:
        """`holders(key)` and `queued_count(key)` together (one read where the store can)."""

    def put(self, run: Run) -> None:
        """Write `run` over its row (status, version, lease, reason, times)."""

    def close_gates(self, run_id: str, *, by: str, comment: str) -> None: ...

    def audit(self, *, actor: str, action: str, run_id: str, details: dict[str, Any]) -> None: ...

    def tell(self, run_id: str, payload: dict[str, Any]) -> None:
        """A `run_finished` reply for the run in the outbox (its thread learns it ended)."""


#: how many queued runs `settle` reads at a time (it reads the head of the queue, never all of it)
HEAD = 16


def ask(ledger: Ledger, run: Run, now: float, *, actor: str) -> bool:
    """`run` asks for a slot of its key: apply its `on_limit` when the key is full (module
    docstring). True: it starts now (a free slot, nobody queued ahead); False: it joins the
    queue (`settle` may still admit it). Raises `ConcurrencyLimitReached` when it is refused."""
    policy = run.concurrency
    if policy is None:  # no key: nothing limits it
        return True
    holders, queued = ledger.slots(policy.key)
    holding = [r for r in holders if r.holds_slot and r.id != run.id]
    waiting = queued - (1 if run.status is RunStatus.QUEUED else 0)
    full = len(holding) >= policy.limit
    if not full and not waiting:
        return True
    if full and policy.on_limit is OnLimit.CANCEL_NEW:
        raise _refused(policy.key, "cancel_new", holding, waiting, policy.limit, run)
    if full and policy.on_limit is OnLimit.CANCEL_RUNNING:
        excess = len(holding) - policy.limit + 1
        takeable = [old for old in holding if _may_take(run, old)]
        if len(takeable) >= excess:  # else others' runs hold the key: it waits like `queue`
            for old in takeable[:excess]:
                _cancel(ledger, old, now, actor=actor, by_run=run, policy=policy.on_limit)
            return True  # it took the place it freed: it starts now, before the queue
    if policy.on_limit is OnLimit.REPLACE_QUEUED and waiting:
        for old in ledger.queued(policy.key, waiting + 1):
            if old.id != run.id and _may_take(run, old):
                _cancel(ledger, old, now, actor=actor, by_run=run, policy=policy.on_limit)
                waiting -= 1
    if waiting >= policy.max_queued:
        raise _refused(policy.key, "max_queued", holding, waiting, policy.limit, run)
    return False


def settle(
    ledger: Ledger, key: str, now: float, *, own: Mapping[str, tuple[str | None, float | None]],
    asked: Collection[str] = (),
) -> list[Run]:  # fmt: skip
    """Admit the key's oldest queued runs while its active runs are fewer than their limit;
    the runs admitted. `own`: the lease each run this unit asked for takes (its caller runs
    it); `asked`: those runs, audited `queued` when they still wait."""
    admitted: list[Run] = []
    head = ledger.queued(key, HEAD)
    count = len([r for r in ledger.holders(key) if r.holds_slot]) if head else 0  # nobody waits: done
    full = not head
    while not full:
        for run in head:
            limit = run.concurrency.limit if run.concurrency is not None else 1
            if count >= limit:
                full = True  # FIFO: the head waits, nobody passes it
                break
            owner, expires = own.get(run.id, (ADMITTED_OWNER, now))
            started = run.evolve(status=RunStatus.RUNNING, version=run.version + 1, updated_at=now,
                                 lease_owner=owner, lease_expires_at=expires)  # fmt: skip
            ledger.put(started)
            if run.id not in asked:
                waited = round(now - (run.queued_at or now), 3)
                ledger.audit(actor=run.status_by or run.requester, action="admitted", run_id=run.id,
                             details={"key": key, "waited_s": waited})  # fmt: skip
            admitted.append(started)
            count += 1
        full = full or len(head) < HEAD
        if not full:
            head = ledger.queued(key, HEAD)  # read again: the runs admitted are no longer queued
    done = {a.id for a in admitted}
    for run_id in asked:
        waits = None if run_id in done else ledger.get(run_id)
        if waits is None or waits.status is not RunStatus.QUEUED or waits.concurrency is None:
            continue
        if waits.concurrency.key == key:
            position = ledger.queued_count(key, up_to=waits.queued_at)
            ledger.audit(actor=waits.status_by or waits.requester, action="queued", run_id=waits.id,
                         details={"key": key, "position": position})  # fmt: skip
    return admitted


def _may_take(run: Run, old: Run) -> bool:
    """`cancel_running` and `replace_queued` cancel a run of the key only when it is of the same
    workflow (its policy is that workflow's own) or was requested by the same principal: a key
    is a template over inputs, so whoever may run one workflow could otherwise pick another
    team's key and cancel their runs, which `cancel` would refuse them."""
    return old.workflow == run.workflow or old.requester == run.requester


def _cancel(ledger: Ledger, old: Run, now: float, *, actor: str, by_run: Run, policy: OnLimit) -> None:
    key = by_run.concurrency.key if by_run.concurrency is not None else ""
    reason = f"cancelled by concurrency `{key}` ({policy.value}): run {by_run.id} took its place"
    ledger.put(old.evolve(status=RunStatus.CANCELLED, version=old.version + 1, status_by=actor, reason=reason,
                          updated_at=now, lease_owner=None, lease_expires_at=None))  # fmt: skip
    if old.status is RunStatus.PAUSED:
        ledger.close_gates(old.id, by=actor, comment=reason)
    ledger.audit(actor=actor, action="cancelled_by_limit", run_id=old.id,
                 details={"key": key, "on_limit": policy.value, "by_run": by_run.id,
                          "from": old.status.value})  # fmt: skip
    ledger.tell(old.id, {"status": RunStatus.CANCELLED.value, "reason": reason, "node": None})


def _refused(
    key: str, why: str, holding: list[Run], waiting: int, limit: int, run: Run
) -> ConcurrencyLimitReached:
    return ConcurrencyLimitReached(
        key=key, why=why, active=[(r.id, r.status.value) for r in holding], queued=waiting, limit=limit,
        run_id=run.id, workflow=run.workflow,
    )  # fmt: skip
