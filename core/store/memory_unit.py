"""`MemoryStore`'s tables, its unit of work and `MemoryDb` (tables, lock, clock, units of
work: what every memory role holds).

`MemoryTables` holds the records in dicts (with the few indexes the store's queries need);
`MemoryUnitOfWork` collects a unit's writes as operations and applies them under the
store's lock: each records how to undo itself, and a write that fails (a lost CAS, a run
that does not exist) undoes the ones before it, in reverse, before its error propagates.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from core.errors import (
    BatonError,
    DeadlineAlreadyFired,
    FireAlreadyRecorded,
    RunNotFound,
    RunPruned,
    StoreError,
    VotesChanged,
)
from core.store import admission, cas
from core.store.records import (
    NO_NOTES,
    AuditEvent,
    Delivery,
    Fire,
    Gate,
    GateDeadline,
    GateStatus,
    GateVote,
    JournalEntry,
    NewRun,
    NodeStatus,
    Run,
    RunStatus,
    Schedule,
    Transition,
    split_stored,
    stored,
)
from core.store.unit_of_work import Pending, UnitOfWork, each_unit

T = TypeVar("T")
Undo = list[Callable[[], None]]


def copied(value: T) -> T:
    """`value` as a JSON column gives it back: a fresh copy, tuples as lists."""
    result: T = json.loads(json.dumps(value))
    return result


@dataclass
class MemoryTables:
    runs: dict[str, Run] = field(default_factory=dict)
    origin: dict[str, list[str]] = field(default_factory=dict)  # origin event -> run ids
    blobs: dict[str, bytes] = field(default_factory=dict)
    journal: dict[int, JournalEntry] = field(default_factory=dict)
    entries_of: dict[str, list[int]] = field(default_factory=dict)  # run id -> entry ids
    gates: dict[tuple[str, str], Gate] = field(default_factory=dict)
    audit: dict[int, AuditEvent] = field(default_factory=dict)
    events: dict[tuple[str, str], tuple[float, bool]] = field(default_factory=dict)  # (at, done)
    event_payloads: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # recorded messages
    state: dict[tuple[str, str], tuple[str, float]] = field(default_factory=dict)  # (value, at)
    outbox: dict[int, Delivery] = field(default_factory=dict)
    deadlines: dict[tuple[str, str, float, str], GateDeadline] = field(default_factory=dict)
    pins: dict[str, tuple[str, float]] = field(default_factory=dict)  # run id -> (by, at)
    pruned: dict[str, tuple[str, str, float]] = field(default_factory=dict)  # id -> (workflow, status, at)
    sweep: dict[str, float] = field(default_factory=dict)  # blob digest -> marked at
    votes: dict[tuple[str, str, float, str, str], GateVote] = field(default_factory=dict)
    schedules: dict[str, Schedule] = field(default_factory=dict)
    fires: dict[tuple[str, float], Fire] = field(default_factory=dict)
    last_entry: int = 0
    last_audit: int = 0
    last_delivery: int = 0

    def run(self, run_id: str) -> Run:
        run = self.runs.get(run_id)
        if run is None:
            self.raise_if_pruned(run_id, exact=True)
            raise RunNotFound(f"No run has the id {run_id}.", run_id=run_id)
        return run

    def raise_if_pruned(self, id_or_prefix: str, *, exact: bool) -> None:
        """RunPruned when a tombstone answers for this id (or this prefix, uniquely)."""
        found = [i for i in self.pruned if (i == id_or_prefix if exact else i.startswith(id_or_prefix))][:2]
        if len(found) == 1:
            workflow, status, at = self.pruned[found[0]]
            raise RunPruned(found[0], workflow=workflow, status=status, pruned_at=at)

    def gate(self, run_id: str, node_id: str) -> Gate:
        gate = self.gates.get((run_id, node_id))
        if gate is None:
            raise RunNotFound(f"Run {run_id} has no approval gate {node_id}.", run_id=run_id)
        return gate

    def gates_of(self, run_id: str) -> list[Gate]:
        """Oldest first."""
        mine = [g for (run, _), g in self.gates.items() if run == run_id]
        return sorted(mine, key=lambda g: (g.created_at, g.node_id))

    def waiting_gate(self, run_id: str) -> Gate | None:
        return next((g for g in self.gates_of(run_id) if g.status is GateStatus.WAITING), None)

    def add_entry(self, operation: str, undo: Undo | None = None, **fields: Any) -> JournalEntry:
        run_id = fields["run_id"]
        if run_id not in self.runs:  # the journal's foreign key
            cause = KeyError(run_id)
            raise StoreError(f"The run store could not {operation} (no run has the id {run_id}).") from cause
        self.last_entry += 1
        # as the journal's JSON column gives it back: the notes stored with the components
        as_stored = stored(fields["components"], fields.get("notes", NO_NOTES))
        fields["components"], fields["notes"] = split_stored(as_stored)
        entry = JournalEntry(id=self.last_entry, **fields)
        self.journal[entry.id] = entry
        self.entries_of.setdefault(run_id, []).append(entry.id)
        if undo is not None:
            undo.append(lambda: self._drop_entry(entry))
        return entry

    def _drop_entry(self, entry: JournalEntry) -> None:
        del self.journal[entry.id]
        self.entries_of[entry.run_id].remove(entry.id)

    def put(self, table: dict[Any, Any], key: Any, value: Any, undo: Undo) -> None:
        """`table[key] = value`, undoable."""
        if key in table:
            old = table[key]
            undo.append(lambda: table.__setitem__(key, old))
        else:
            undo.append(lambda: table.pop(key))
        table[key] = value


class MemoryUnitOfWork:
    """The writes of one `with store.transaction() as tx:` block (`UnitOfWork`)."""

    def __init__(self, tables: MemoryTables, now: Callable[[], float]) -> None:
        self._t = tables
        self._now = now
        self._ops: list[tuple[Callable[[Undo], Any], Pending[Any] | None]] = []
        # admission (`admission.py`): keys whose queue may move, runs the unit queued
        self._keys: set[str] = set()
        self._own: dict[str, tuple[str | None, float | None]] = {}
        self._created: dict[str, Pending[Run]] = {}

    def apply(self) -> None:
        """Every write, in order, or none (call it holding the store's lock); then the
        oldest queued runs of every concurrency key the unit touched are admitted."""
        undo: Undo = []
        results: list[Any] = []
        try:
            for op, _ in self._ops:
                results.append(op(undo))
            if self._keys:
                now = self._now()
                ledger = _MemoryLedger(self._t, undo, now)
                for key in sorted(self._keys):
                    admission.settle(ledger, key, now, own=self._own, asked=self._own.keys())
                results = [self._t.runs.get(r.id, r) if isinstance(r, Run) else r for r in results]
        except BaseException:
            for step in reversed(undo):
                step()
            raise
        for (_, pending), result in zip(self._ops, results, strict=True):
            if pending is not None:
                pending.set(result)

    def _ask(self, run: Run, now: float, undo: Undo, *, actor: str) -> Run:
        """`run` (as the unit would write it: running) asks a slot of its key: as written
        (running, or queued: then the key's queue is settled when the unit ends)."""
        if run.concurrency is None or admission.ask(_MemoryLedger(self._t, undo, now), run, now, actor=actor):
            return run
        self._own[run.id] = (run.lease_owner, run.lease_expires_at)
        self._keys.add(run.concurrency.key)
        return run.evolve(status=RunStatus.QUEUED, queued_at=now, lease_owner=None, lease_expires_at=None)

    def _later(self, op: Callable[[Undo], T]) -> Pending[T]:
        pending: Pending[T] = Pending()
        self._ops.append((op, pending))
        return pending

    def _then(self, op: Callable[[Undo], Any]) -> None:
        self._ops.append((op, None))

    def put_blob(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        kept = bytes(data)

        def op(undo: Undo) -> None:
            if digest not in self._t.blobs:
                self._t.put(self._t.blobs, digest, kept, undo)

        self._then(op)
        return digest

    def create_run(self, new: NewRun) -> Run:
        run, origin = cas.new_run(self._now(), new)

        def op(undo: Undo) -> Run:
            if run.id in self._t.runs:  # a 48-bit id collision
                raise StoreError(f"The run store could not create a run (the id {run.id} is taken).")
            stored = run
            if run.concurrency is not None:
                if run.status is RunStatus.RUNNING:
                    stored = self._ask(run, self._now(), undo, actor=run.requester)
                else:
                    self._keys.add(run.concurrency.key)
            self._t.put(self._t.runs, run.id, stored, undo)
            if origin is not None:
                self._t.put(self._t.origin, origin, [*self._t.origin.get(origin, []), run.id], undo)
            return stored

        self._created[run.id] = self._later(op)
        return run

    def created(self, run_id: str) -> Pending[Run]:
        return self._created[run_id]

    def transition(self, change: Transition) -> Pending[Run]:
        run_id, to, actor, reason = change.run_id, RunStatus(change.to), change.actor, change.reason
        expected_version = change.expected_version
        allowed = cas.allowed_sources(to, change.allowed_from)  # an illegal change fails at once
        now = self._now()
        owner, expires = cas.lease(
            to, now, holder=actor, lease_owner=change.lease_owner, lease_seconds=change.lease_seconds
        )

        def op(undo: Undo) -> Run:
            current = self._t.run(run_id)
            if current.status not in allowed or expected_version not in (None, current.version):
                raise cas.lost_race(current, to, allowed, expected_version)
            moved = current.evolve(
                status=to, version=current.version + 1, status_by=actor, reason=reason, updated_at=now,
                lease_owner=owner, lease_expires_at=expires,
                queued_at=now if to is RunStatus.QUEUED else None,
            )  # fmt: skip
            if current.concurrency is not None:
                if to is not RunStatus.RUNNING:  # at rest, cancelled, queued: the queue may move
                    self._keys.add(current.concurrency.key)
                elif not current.holds_slot:  # a resume, an approval: a slot is asked again
                    moved = self._ask(moved, now, undo, actor=actor)
            self._t.put(self._t.runs, run_id, moved, undo)
            return moved

        return self._later(op)

    def decide_gate(
        self, run_id: str, node_id: str, *, approved: bool, by: str, comment: str | None,
        decision: str | None = None, outcome: Mapping[str, Any] | None = None,
    ) -> Pending[Gate]:
        status = GateStatus.APPROVED if approved else GateStatus.REJECTED
        choice = decision or ("approve" if approved else "reject")
        kept = copied(dict(outcome or {}))
        now = self._now()

        def op(undo: Undo) -> Gate:
            gate = self._t.gate(run_id, node_id)
            if gate.status is not GateStatus.WAITING:
                raise cas.already_decided(gate)
            decided = gate.evolve(
                status=status, decided_by=by, comment=comment, decided_at=now, decision=choice, outcome=kept
            )
            self._t.put(self._t.gates, (run_id, node_id), decided, undo)
            return decided

        return self._later(op)

    def close_gates(self, run_id: str, *, by: str, comment: str | None) -> Pending[list[Gate]]:
        now = self._now()

        def op(undo: Undo) -> list[Gate]:
            closed = []
            for gate in self._t.gates_of(run_id):
                if gate.status is GateStatus.WAITING:
                    decided = gate.evolve(
                        status=GateStatus.REJECTED, decided_by=by, comment=comment, decided_at=now
                    )
                    self._t.put(self._t.gates, (run_id, gate.node_id), decided, undo)
                    closed.append(decided)
            return closed

        return self._later(op)

    def audit(
        self, *, actor: str, action: str, run_id: str | None = None, details: dict[str, Any] | None = None
    ) -> None:
        now = self._now()
        kept = copied(details or {})

        def op(undo: Undo) -> None:
            self._t.last_audit += 1
            event = AuditEvent(self._t.last_audit, now, actor, action, run_id, kept)
            self._t.put(self._t.audit, event.id, event, undo)

        self._then(op)

    def finish_event(self, platform: str, event_id: str) -> None:
        def op(undo: Undo) -> None:
            seen = self._t.events.get((platform, event_id))
            if seen is not None:
                self._t.put(self._t.events, (platform, event_id), (seen[0], True), undo)

        self._then(op)

    def journal_note(
        self, *, run_id: str, node_id: str, cache_key: str, components: dict[str, Any], error: str
    ) -> None:
        self.add_entry(
            "record a decision about a step", run_id=run_id, node_id=node_id, attempt=0, cache_key=cache_key,
            components=copied(components), status=NodeStatus.FAILED, started_at=(now := self._now()),
            finished_at=now, error=error,
        )  # fmt: skip

    def enqueue_delivery(self, run_id: str, kind: str, payload: Mapping[str, Any]) -> None:
        now = self._now()
        kept = copied(dict(payload))

        def op(undo: Undo) -> None:
            run = self._t.runs.get(run_id)
            if run is None:  # INSERT … SELECT from the run: no run, no row
                return
            self._t.last_delivery += 1
            row = Delivery(id=self._t.last_delivery, run_id=run_id, kind=kind, platform=run.platform,
                           conversation=run.conversation, thread=run.thread, payload=kept,
                           created_at=now, due_at=now)  # fmt: skip
            self._t.put(self._t.outbox, row.id, row, undo)

        self._then(op)

    def enqueue_notice(
        self, run_id: str, kind: str, *, platform: str, conversation: str, payload: Mapping[str, Any],
        dedupe: str, due_at: float | None = None,
    ) -> None:
        now = self._now()
        kept = copied(dict(payload))

        def op(undo: Undo) -> None:
            if run_id not in self._t.runs or any(r.dedupe == dedupe for r in self._t.outbox.values()):
                return  # a foreign key and a unique key: no run, or once per key
            self._t.last_delivery += 1
            row = Delivery(id=self._t.last_delivery, run_id=run_id, kind=kind, platform=platform,
                           conversation=conversation, thread=None, payload=kept, created_at=now,
                           due_at=now if due_at is None else due_at, dedupe=dedupe)  # fmt: skip
            self._t.put(self._t.outbox, row.id, row, undo)

        self._then(op)

    def fire_deadline(self, deadline: GateDeadline, by: str) -> Pending[bool]:
        key = (deadline.run_id, deadline.node_id, deadline.opened_at, deadline.name)
        now = self._now()

        def op(undo: Undo) -> bool:
            current = self._t.deadlines.get(key)
            if current is None or current.fired_at is not None:
                where = f"{deadline.run_id}/{deadline.node_id}"
                raise DeadlineAlreadyFired(
                    f"The {deadline.name} deadline of {where} was fired already.",
                    run_id=deadline.run_id, by=None if current is None else current.fired_by,
                )
            self._t.put(self._t.deadlines, key, current.evolve(fired_at=now, fired_by=by), undo)
            return True

        return self._later(op)

    def cast_vote(self, vote: GateVote, *, seen: int) -> Pending[bool]:
        key = (vote.run_id, vote.node_id, vote.opened_at, vote.user, vote.ballot)

        def op(undo: Undo) -> bool:
            self._t.run(vote.run_id)  # RunNotFound when it is gone
            opening = (vote.run_id, vote.node_id, vote.opened_at)
            if sum(1 for k in self._t.votes if k[:3] == opening) != seen or key in self._t.votes:
                where = f"{vote.node_id} of run {vote.run_id}"
                raise VotesChanged(f"another vote arrived on {where}", run_id=vote.run_id)
            self._t.put(self._t.votes, key, vote.evolve(values=copied(dict(vote.values))), undo)
            return True

        return self._later(op)

    def record_fire(self, fire: Fire) -> Pending[bool]:
        kept = fire.evolve(detail=copied(fire.detail))

        def op(undo: Undo) -> bool:
            key = (fire.schedule_id, fire.due_at)
            there = self._t.fires.get(key)
            if there is not None:
                raise FireAlreadyRecorded(
                    f"Schedule {fire.schedule_id} fired at {fire.due_at} already "
                    f"({there.outcome}, by {there.by}).",
                    schedule_id=fire.schedule_id)
            self._t.put(self._t.fires, key, kept, undo)
            return True

        return self._later(op)

    def add_entry(self, operation: str, **fields: Any) -> None:
        """A journal entry with these fields (its id drawn when the unit is applied)."""
        self._then(lambda undo: self._t.add_entry(operation, undo, **fields))

    def invalidate(self, run_id: str, node_ids: Iterable[str], *, actor: str) -> Pending[int]:
        nodes = set(node_ids)

        def op(undo: Undo) -> int:
            marked = 0
            for entry_id in self._t.entries_of.get(run_id, []):
                entry = self._t.journal[entry_id]
                if entry.node_id in nodes and entry.status is NodeStatus.COMPLETED:
                    gone = entry.evolve(status=NodeStatus.INVALIDATED, invalidated_by=actor)
                    self._t.put(self._t.journal, entry_id, gone, undo)
                    marked += 1
            return marked

        return self._later(op)


class _MemoryLedger:
    """`admission.Ledger` over the tables, every write undoable with the unit."""

    def __init__(self, tables: MemoryTables, undo: Undo, now: float) -> None:
        self._t = tables
        self._undo = undo
        self._now = now

    def get(self, run_id: str) -> Run | None:
        return self._t.runs.get(run_id)

    def holders(self, key: str) -> list[Run]:
        busy = (RunStatus.RUNNING, RunStatus.NEEDS_ATTENTION, RunStatus.PAUSED)
        mine = [r for r in self._t.runs.values() if _key(r) == key and r.status in busy]
        return sorted(mine, key=lambda r: (r.updated_at, r.id))

    def _queue(self, key: str) -> list[Run]:
        mine = [r for r in self._t.runs.values() if _key(r) == key and r.status is RunStatus.QUEUED]
        return sorted(mine, key=lambda r: (r.queued_at or 0.0, r.id))

    def queued(self, key: str, first: int) -> list[Run]:
        return self._queue(key)[:first]

    def queued_count(self, key: str, up_to: float | None = None) -> int:
        return len([r for r in self._queue(key) if up_to is None or (r.queued_at or 0.0) <= up_to])

    def slots(self, key: str) -> tuple[list[Run], int]:
        return self.holders(key), self.queued_count(key)

    def put(self, run: Run) -> None:
        self._t.put(self._t.runs, run.id, run, self._undo)

    def close_gates(self, run_id: str, *, by: str, comment: str) -> None:
        for gate in self._t.gates_of(run_id):
            if gate.status is GateStatus.WAITING:
                decided = gate.evolve(status=GateStatus.REJECTED, decided_by=by, comment=comment,
                                      decided_at=self._now)  # fmt: skip
                self._t.put(self._t.gates, (run_id, gate.node_id), decided, self._undo)

    def audit(self, *, actor: str, action: str, run_id: str, details: dict[str, Any]) -> None:
        self._t.last_audit += 1
        event = AuditEvent(self._t.last_audit, self._now, actor, action, run_id, copied(details))
        self._t.put(self._t.audit, event.id, event, self._undo)

    def tell(self, run_id: str, payload: dict[str, Any]) -> None:
        run = self._t.run(run_id)
        self._t.last_delivery += 1
        row = Delivery(id=self._t.last_delivery, run_id=run_id, kind=admission.RUN_FINISHED,
                       platform=run.platform, conversation=run.conversation, thread=run.thread,
                       payload=copied(payload), created_at=self._now, due_at=self._now)  # fmt: skip
        self._t.put(self._t.outbox, row.id, row, self._undo)


def _key(run: Run) -> str | None:
    return None if run.concurrency is None else run.concurrency.key


class MemoryDb:
    """What every role of `MemoryStore` shares, handed to each in its constructor: the
    tables, the one re-entrant lock that guards them, the clock, and the units of work."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._last_now = 0.0
        self.lock = threading.RLock()
        self.t = MemoryTables()

    def now(self) -> float:
        """The clock, strictly increasing within this store (so "newest first" never ties)."""
        with self.lock:
            self._last_now = max(self.clock(), self._last_now + 1e-6)
            return self._last_now

    @contextmanager
    def transaction(self) -> Iterator[MemoryUnitOfWork]:
        unit = MemoryUnitOfWork(self.t, self.now)
        yield unit
        with self.lock:
            unit.apply()

    @contextmanager
    def batch(self) -> Iterator[MemoryBatch]:
        """Units applied one by one, each atomically (nothing here outlives the process, so a
        batch's one commit has nothing to save)."""
        yield MemoryBatch(self)

    def one(self, write: Callable[[MemoryUnitOfWork], Pending[Any]]) -> Any:
        """A single call: a unit of this one write; its result."""
        with self.transaction() as tx:
            pending = write(tx)
        return pending.value


class MemoryBatch:
    def __init__(self, db: MemoryDb) -> None:
        self._db = db

    def unit(self) -> AbstractContextManager[MemoryUnitOfWork]:
        return self._db.transaction()

    def units(
        self, builds: Sequence[Callable[[UnitOfWork], T]], *, share: bool = False
    ) -> list[T | BatonError]:
        return each_unit(self, builds)
