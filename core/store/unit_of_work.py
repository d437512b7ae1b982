"""A unit of work: several writes that commit together, or not at all.

    with store.transaction() as tx:
        tx.decide_gate(run.id, "review", approved=True, by=actor, comment=None)
        resumed = tx.transition(Transition(run.id, RunStatus.RUNNING, actor=actor,
                                           expected_version=run.version, allowed_from=[RunStatus.PAUSED]))
        tx.audit(actor=actor, action="approve", run_id=run.id, details={"node": "review"})
    running = resumed.value                     # the run as the unit left it

Writes are collected while the block runs and sent when it ends without an exception (an
exception inside the block sends nothing). A compare-and-swap write (`transition`,
`decide_gate`) that matches no row undoes the whole unit, and the store raises the same typed
error the single call raises (`RunNotResumable`, `InvalidTransition`, `GateAlreadyDecided`,
`RunNotFound`), built from the state as it is now. A unit holds only writes: read what a
decision needs before it, and let the CAS writes in it guard against changes in between.

How a unit travels is the store's business: `SqlStore` on PostgreSQL sends it as ONE
statement (each write a data-modifying CTE: one round trip, one commit), on SQLite as one
transaction; `MemoryStore` applies it under its lock. A unit writes each row at most once.

Values a write returns exist once the unit committed: `Pending.value` before that raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Generic, Protocol, TypeVar

from core.errors import BatonError, StoreError
from core.store.records import (
    Fire,
    Gate,
    GateDeadline,
    GateVote,
    NewRun,
    Run,
    Transition,
)

T = TypeVar("T")


class Pending(Generic[T]):
    """What a write in a unit of work returns, once the unit committed."""

    __slots__ = ("_done", "_value")

    def __init__(self) -> None:
        self._done = False
        self._value: Any = None

    def set(self, value: T) -> None:
        self._value = value
        self._done = True

    @property
    def value(self) -> T:
        if not self._done:
            raise RuntimeError("a unit of work's results exist once its `with` block has ended")
        result: T = self._value
        return result


class UnitOfWork(Protocol):
    """The writes a unit may hold (see the module docstring); each as its single-call twin."""

    def put_blob(self, data: bytes) -> str:
        """Store bytes once; their sha256 hex digest (known at once)."""

    def create_run(self, new: NewRun) -> Run:
        """A new run (id drawn now: later writes of the unit may name it), as it will be
        stored (`NewRun` says what it holds). A keyed run asked `running` is admitted or
        queued when the unit commits (`admission.py`): read it back for its status."""

    def created(self, run_id: str) -> Pending[Run]:
        """A run this unit creates, as the unit left it: a keyed run admitted (`running`) or
        `queued` (no read: the unit knows)."""

    def transition(self, change: Transition) -> Pending[Run]:
        """`Runs.transition` (a CAS) inside the unit. A keyed run moved to `running` from a
        status holding no slot asks one (`admission.py`): the run returned may be `queued`.
        Every unit that touches a keyed run admits the key's oldest queued runs at its end."""

    def decide_gate(
        self, run_id: str, node_id: str, *, approved: bool, by: str, comment: str | None,
        decision: str | None = None, outcome: Mapping[str, Any] | None = None,
    ) -> Pending[Gate]:
        """CAS waiting -> approved | rejected; `GateAlreadyDecided` (carrying the decision and
        who made it) when the gate was not waiting, `RunNotFound` when there is none.
        `decision`: the choice (default `approve` / `reject`); `outcome`: values, approvers."""

    def close_gates(self, run_id: str, *, by: str, comment: str | None) -> Pending[list[Gate]]:
        """Reject every gate still waiting in the run (a run that ends stops asking); the
        gates closed, oldest first (none is fine)."""

    def audit(
        self, *, actor: str, action: str, run_id: str | None = None, details: dict[str, Any] | None = None
    ) -> None: ...

    def finish_event(self, platform: str, event_id: str) -> None:
        """`Events.finish_event` inside the unit (a command's audit row and its event marked
        handled travel together: a redelivery is audited once)."""

    def journal_note(
        self, *, run_id: str, node_id: str, cache_key: str, components: dict[str, Any], error: str
    ) -> None:
        """A journal entry written settled (`failed`, attempt 0, started and finished now)
        that records a decision about a node, never a result (a rejection, an invalidation)."""

    def invalidate(self, run_id: str, node_ids: Iterable[str], *, actor: str) -> Pending[int]:
        """Mark the completed entries of those nodes in `run_id` invalidated; how many."""

    def enqueue_delivery(self, run_id: str, kind: str, payload: Mapping[str, Any]) -> None:
        """A state-carrying reply in the outbox (`Deliveries`), to the run's platform,
        conversation and thread as the unit finds them: it exists exactly when the state
        change of the same unit does."""

    def enqueue_notice(
        self, run_id: str, kind: str, *, platform: str, conversation: str, payload: Mapping[str, Any],
        dedupe: str, due_at: float | None = None,
    ) -> None:
        """A notice in the outbox, to a place of its own (a subscribed conversation), due at
        `due_at` (default now); nothing when a row with the key `dedupe` exists already (one
        notice per place, run and event, however often it is written)."""

    def cast_vote(self, vote: GateVote, *, seen: int) -> Pending[bool]:
        """`vote` recorded as a CAS on its gate opening's votes: while the opening holds exactly
        the `seen` votes the caller read (and none of this person's same ballot). Otherwise
        the whole unit is undone and `VotesChanged` raised: read the votes again, decide again.
        A unit holding a vote goes in order, in one transaction that first locks the run's
        row, so of two units voting on one run, the later sees the earlier's vote."""

    def record_fire(self, fire: Fire) -> Pending[bool]:
        """A schedule's fire (schedule, due time): a compare-and-swap on that key; the unit is
        undone with `FireAlreadyRecorded` when the due time was fired already."""

    def fire_deadline(self, deadline: GateDeadline, by: str) -> Pending[bool]:
        """`Ballots.fire_deadline` inside the unit, as a CAS: when the deadline was fired
        already (another replica won it) the whole unit is undone and `DeadlineAlreadyFired`
        raised, so what the firing writes (its audit row, its outbox row) exists exactly once."""


class Batch(Protocol):
    """Several units of work sent as ONE change (`Store.batch()`): each `unit()` is applied in
    a savepoint of its own when its block ends, and raises there, as `transaction()` would,
    when one of its compare-and-swap writes lost (only that unit is undone); the batch
    commits when its own block ends, or nothing of it does. What a batch's writes return
    (`Pending.value`) is known when its unit's block ended; it is stored once the batch
    committed, so act on it (start a run) only after the batch's block."""

    def unit(self) -> AbstractContextManager[UnitOfWork]: ...

    def units(
        self, builds: Sequence[Callable[[UnitOfWork], T]], *, share: bool = False
    ) -> list[T | BatonError]:
        """Many units at once: each build writes one unit (as in a `unit()` block); per build,
        in order, what it returned, or the `BatonError` that undid its unit (a CAS it lost;
        a store error fails the batch). `share` (schedule fires): a fire whose schedule another
        replica's batch holds right now is left to it (`FireBusy`), instead of waiting for its
        commit to lose it; how many units travel together is the store's business
        (`SqlBatch.units`)."""
        ...


def each_unit(batch: Batch, builds: Sequence[Callable[[UnitOfWork], T]]) -> list[T | BatonError]:
    """`Batch.units` as one `unit()` after the other (the memory store; `share` changes nothing
    where one writer at a time holds the database)."""
    out: list[T | BatonError] = []
    for build in builds:
        try:
            with batch.unit() as tx:
                value = build(tx)
        except StoreError:
            raise
        except BatonError as exc:
            out.append(exc)
            continue
        out.append(value)
    return out
