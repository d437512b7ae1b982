"""Admission: which runs of a concurrency key are active at once, and who waits behind them
(DESIGN.md, "Concurrency and the queue"). The policy lives here once; each store applies it
over its own tables through a `Ledger`.

A unit of work that touches a run with a concurrency key runs under the key's lock (SQLite:
the single writer; PostgreSQL: the key's row of `concurrency_locks`, `SELECT … FOR UPDATE`,
taken before any run row), so two replicas never admit past the limit. Inside it:

    ask(ledger, run, now, actor)    a run asks for a slot (created, resumed, approved): its
                                    `on_limit` applies at a full key (refused: cancel_new or a
                                    full queue; active runs cancelled: cancel_running; the
                                    queued ones cancelled: replace_queued), then it joins the
                                    key's queue (`queued`, `queued_at` now)
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

    def holders(self, key: str) -> list[Run]:
        """The key's runs that may hold a slot (running, needs_attention, paused), oldest first."""

    def queued(self, key: str) -> list[Run]:
        """The key's queued runs, in queue order (`queued_at`)."""

    def put(self, run: Run) -> None:
        """Write `run` over its row (status, version, lease, reason, times)."""

    def close_gates(self, run_id: str, *, by: str, comment: str) -> None: ...

    def audit(self, *, actor: str, action: str, run_id: str, details: dict[str, Any]) -> None: ...

    def tell(self, run_id: str, payload: dict[str, Any]) -> None:
        """A `run_finished` reply for the run in the outbox (its thread learns it ended)."""


def active(ledger: Ledger, key: str) -> list[Run]:
    return [run for run in ledger.holders(key) if run.holds_slot]


def ask(ledger: Ledger, run: Run, now: float, *, actor: str) -> None:
    """`run` asks for a slot of its key: apply its `on_limit` when the key is full (module
    docstring). Raises `ConcurrencyLimitReached` when the run is refused."""
    policy = run.concurrency
    assert policy is not None  # the stores ask only for keyed runs
    holding = [r for r in active(ledger, policy.key) if r.id != run.id]
    waiting = [r for r in ledger.queued(policy.key) if r.id != run.id]
    full = len(holding) >= policy.limit
    if not full and not waiting:
        return
    if full and policy.on_limit is OnLimit.CANCEL_NEW:
        raise _refused(policy.key, "cancel_new", holding, waiting, policy.limit, run)
    if full and policy.on_limit is OnLimit.CANCEL_RUNNING:
        for old in holding[: len(holding) - policy.limit + 1]:
            _cancel(ledger, old, now, actor=actor, by_run=run, policy=policy.on_limit)
        return
    if policy.on_limit is OnLimit.REPLACE_QUEUED:
        for old in waiting:
            _cancel(ledger, old, now, actor=actor, by_run=run, policy=policy.on_limit)
        waiting = []
    if len(waiting) >= policy.max_queued:
        raise _refused(policy.key, "max_queued", holding, waiting, policy.limit, run)


def settle(
    ledger: Ledger, key: str, now: float, *, own: Mapping[str, tuple[str | None, float | None]],
    asked: Collection[str] = (),
) -> list[Run]:  # fmt: skip
    """Admit the key's oldest queued runs while its active runs are fewer than their limit;
    the runs admitted. `own`: the lease each run this unit asked for takes (its caller runs
    it); `asked`: those runs, audited `queued` when they still wait."""
    count = len(active(ledger, key))
    admitted: list[Run] = []
    queue = ledger.queued(key)
    for run in queue:
        limit = run.concurrency.limit if run.concurrency is not None else 1
        if count >= limit:
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
    done = {a.id for a in admitted}
    waiting = [run for run in queue if run.id not in done]
    for position, run in enumerate(waiting, start=1):
        if run.id in asked:
            ledger.audit(actor=run.status_by or run.requester, action="queued", run_id=run.id,
                         details={"key": key, "position": position})  # fmt: skip
    return admitted


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
    key: str, why: str, holding: list[Run], waiting: list[Run], limit: int, run: Run
) -> ConcurrencyLimitReached:
    return ConcurrencyLimitReached(
        key=key, why=why, active=[(r.id, r.status.value) for r in holding], queued=len(waiting), limit=limit,
        run_id=run.id, workflow=run.workflow,
    )  # fmt: skip
