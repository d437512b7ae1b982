"""Gate deadlines firing: reminders, escalation and timeouts (DESIGN.md "Approvals").

The executor plans a gate's deadlines when it opens it (`Ballots.plan_deadlines`: durable
rows, so a restart loses none). `GateDeadlines.tick(now)` fires those due:

    for each due deadline whose gate still waits in that opening:
        remind    -> tell the eligible approvers who have not answered, in the run's thread
                     and directly (a DM on each one's platform: `replies.told_directly`)
        escalate  -> tell the people the escalation adds that they may now decide (thread and DM)
                     (both: ONE unit of work holds the deadline's compare-and-swap, exactly one
                     replica wins it, its audit row and its outbox row; the outbox delivers
                     the messages, `ProgressReporter.deliver`, at once when this process can)
        timeout   -> `on_timeout` through the engine: reject (the default) cancels the run,
                     fail marks it failed (its reason naming the gate's timeout); approve
                     opens the gate with the form's defaults; skip opens it as a skip. The
                     engine's unit of work for that decision (a CAS on the gate) also holds
                     the deadline's CAS, the `timeout` audit row and the `gate_timed_out` line
                     as an outbox row (before the run's rest row when the run ends): of
                     replicas racing, the one whose decision wins writes them, the others
                     nothing; the outbox delivers the line, at once when this process can
    each audited (`remind`, `escalate`, `timeout`) by the engine's actor; a deadline whose gate
    no longer waits is marked fired (stale).

The clock is injected, and `tick` is all there is: the bot calls it on its own loop (SQLite,
or PostgreSQL without workers); with workers, a periodic Procrastinate job may call it too,
since the compare-and-swap makes any number of callers safe.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from core.engine.approval_policy import Policy, Vote, outstanding
from core.engine.engine import Engine
from core.engine.events import ENGINE_ACTOR
from core.engine.notify import NOTICED
from core.errors import BatonError, DeadlineAlreadyFired, StoreError
from core.store.port import Ballots, Gates, Runs, Transactions
from core.store.records import GateDeadline, GateStatus, Run, RunStatus
from core.store.unit_of_work import UnitOfWork
from core.workflows.durations import show_duration

log = logging.getLogger("baton.deadlines")
REMINDER = "gate_reminder"  # outbox kinds: what a fired reminder / escalation / timeout tells
ESCALATION = "gate_escalated"
TIMED_OUT = "gate_timed_out"
BATCH = 200  # due deadlines read at a time; a tick reads again while batches come back full


@dataclass(frozen=True, slots=True)
class Fired:
    deadline: GateDeadline
    action: str  # remind | escalate | timeout | stale (its gate no longer waits in that opening)
    to: tuple[str, ...] = ()  # who was told (remind, escalate)


class DeadlineStore(Transactions, Protocol):
    """The store roles `GateDeadlines` uses."""

    @property
    def runs(self) -> Runs: ...
    @property
    def gates(self) -> Gates: ...
    @property
    def ballots(self) -> Ballots: ...


class GateDeadlines:
    def __init__(
        self,
        *,
        store: DeadlineStore,
        engine: Engine,
        replica: str,
        deliver: Callable[[str], Awaitable[int]] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.engine = engine
        self.replica = replica
        self.deliver = deliver  # sends a run's due outbox rows now (else the outbox's loop does)
        self.clock = clock

    async def tick(self, now: float | None = None) -> list[Fired]:
        """Fire every deadline due at `now` (the clock's time by default) that this replica wins."""
        now = self.clock() if now is None else now
        fired: list[Fired] = []
        batch = self.store.ballots.due_deadlines(now, BATCH)
        while batch:
            for deadline in batch:
                done = await self._fired(deadline, now)
                if done is not None:  # else another replica fired it
                    fired.append(done)
            # a full batch: more may be due (a backlog after a restart); else this tick is done
            batch = self.store.ballots.due_deadlines(now, BATCH) if len(batch) == BATCH else []
        return fired

    async def _fired(self, deadline: GateDeadline, now: float) -> Fired | None:
        try:
            return await self._fire(deadline, now)
        except DeadlineAlreadyFired:
            return None
        except StoreError:
            # the database failed: the unit wrote nothing and the deadline stays due. Marked fired
            # here, a blink of the database would drop a timeout for good (the gate would wait
            # forever); the tick ends instead, and the next one fires it
            raise
        except BatonError as exc:  # the run moved on meanwhile (decided, cancelled): nothing to do
            # marked fired, or it stays due and every tick (and a full batch's re-read) finds it again
            self.store.ballots.fire_deadline(deadline, self.replica)
            log.info(
                "deadline %s of %s/%s: %s", deadline.name, deadline.run_id, deadline.node_id, exc.message,
                extra={"action": "deadline_skipped", "run_id": deadline.run_id},
            )
            return Fired(deadline, "stale")

    def _win(self, deadline: GateDeadline) -> None:
        """The deadline's compare-and-swap alone (a stale one: nothing else is written)."""
        if not self.store.ballots.fire_deadline(deadline, self.replica):
            raise DeadlineAlreadyFired(run_id=deadline.run_id)

    async def _fire(self, d: GateDeadline, now: float) -> Fired:
        run = self.store.runs.get_run(d.run_id)
        gate = self.store.gates.get_gate(d.run_id, d.node_id)
        if (
            gate.status is not GateStatus.WAITING
            or gate.created_at != d.opened_at
            or run.status is not RunStatus.PAUSED
        ):
            self._win(d)
            return Fired(d, "stale")
        spec, policy, members = self.engine.gates.policy(run, gate)  # resolved by the engine, as for votes
        kind = d.name.partition(":")[0]
        details: dict[str, Any] = {"node": d.node_id, "deadline": d.name, "due_at": d.due_at}
        if kind == "remind":
            votes = [
                Vote(v.user, v.choice, v.at)
                for v in self.store.ballots.gate_votes(run.id, gate.node_id, gate.created_at)
            ]
            to = tuple(
                sorted(
                    outstanding(
                        policy,
                        votes,
                        requester=run.requester,
                        opened_at=gate.created_at,
                        now=now,
                        members=members,
                    )
                )
            )
            await self._tell(d, "remind", REMINDER, {**details, "to": list(to)}, to,
                             _left(policy, gate.created_at, now), run=run)
            return Fired(d, "remind", to)
        if kind == "escalate":
            to = tuple(sorted(members(policy.escalate_to)))
            await self._tell(d, "escalate", ESCALATION, {**details, "to": list(policy.escalate_to)}, to,
                             _left(policy, gate.created_at, now))
            return Fired(d, "escalate", to)
        return await self._time_out(d, run, gate, policy, spec, details)

    async def _tell(self, d: GateDeadline, action: str, kind: str, details: dict[str, Any],
                    to: tuple[str, ...], left: float | None, run: Run | None = None) -> None:
        """One unit of work: the deadline's compare-and-swap (exactly one replica wins it), its
        audit row and its outbox row (the message in the run's thread and to each person of
        `to` directly, rendered when delivered: `ProgressReporter.deliver`). A crash right
        after leaves the row for the next process or a peer; then deliver it at once. A
        reminder (`run` given) also tells `gate_overdue` to the places that asked, in the same
        unit (the first reminder of the opening: later ones find the notice's key taken)."""
        payload: dict[str, Any] = {"node": d.node_id, "opened_at": d.opened_at, "deadline": d.name,
                                   "to": list(to), "left": left}  # fmt: skip
        if run is not None:
            payload[NOTICED] = True
        with self.store.transaction() as tx:
            tx.fire_deadline(d, self.replica)
            tx.audit(actor=ENGINE_ACTOR, action=action, run_id=d.run_id, details=details)
            tx.enqueue_delivery(d.run_id, kind, payload)
            if run is not None:
                self.engine.notifier.write(tx, run, "gate_overdue", node=d.node_id)
        await self._deliver_now(d.run_id)

    async def _deliver_now(self, run_id: str) -> None:
        if self.deliver is not None:
            try:
                await self.deliver(run_id)
            except Exception:  # the outbox's loop delivers it
                log.exception("deadline message not delivered at once",
                              extra={"action": "outbox", "run_id": run_id})

    async def _time_out(
        self, d: GateDeadline, run: Any, gate: Any, policy: Policy, spec: Any, details: dict[str, Any]
    ) -> Fired:
        """The engine applies `on_timeout` in one unit of work (a CAS on the gate: of replicas
        racing, one decides; a reject or fail writes the run's rest row with it) that also
        holds what the timeout writes (`written`): the deadline's CAS, the `timeout` audit row
        (a late decision's refusal reads what the rule did from it, committed with the
        decision) and the `gate_timed_out` line in the outbox, rendered when delivered
        (`ProgressReporter.deliver`). A replica that loses writes none of them; a crash right
        after leaves the line for the next process or a peer."""
        outcome = policy.on_timeout
        waited = show_duration(policy.timeout or 0)
        reason = f"no decision within {waited} (on_timeout: {outcome})"
        told = {"node": d.node_id, "opened_at": d.opened_at, "deadline": d.name, "outcome": outcome,
                "waited": waited}  # fmt: skip

        def written(tx: UnitOfWork) -> None:
            tx.fire_deadline(d, self.replica)
            tx.audit(actor=ENGINE_ACTOR, action="timeout", run_id=run.id,
                     details={**details, "on_timeout": outcome})  # fmt: skip
            tx.enqueue_delivery(run.id, TIMED_OUT, told)

        if outcome in ("approve", "skip"):
            values = {n: f.default for n, f in (spec.form.items() if spec else ()) if f.default is not None}
            await self.engine.approve(
                run,
                actor=ENGINE_ACTOR,
                comment=reason,
                gate=gate,
                decision=outcome,
                outcome={"values": values, "approvers": []},
                timed_out=True,
                alongside=written,
            )
        else:  # reject cancels the run; fail ends it failed, the reason naming the gate's timeout
            await self.engine.reject(run, actor=ENGINE_ACTOR, reason=reason, fail=outcome == "fail",
                                     timed_out=True, alongside=written)
        await self._deliver_now(run.id)
        return Fired(d, "timeout")


def _left(policy: Policy, opened_at: float, now: float) -> float | None:
    return None if policy.timeout is None else opened_at + policy.timeout - now
