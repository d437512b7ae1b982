"""`MemoryStore`: the `Store` port in this process's memory, for tests and trials.

    store = MemoryStore()                 # or MemoryStore(clock=fake_clock)
    with store.transaction() as tx: ...   # units of work, all or nothing

It keeps the same records, compare-and-swap rules and errors as `SqlStore` (the contract
suite in tests/integration/store/ runs against both): a lost CAS raises `RunNotResumable`,
`InvalidTransition` or `GateAlreadyDecided` carrying who won, timestamps are strictly
increasing, JSON values are copied as a database would store them. One re-entrant lock
guards every call, so the engine's threads (`asyncio.to_thread`) and its event loop may
share it. Nothing survives the process and there is no `Dispatch` (distributed execution
needs PostgreSQL). A unit of work applies its writes under the lock and undoes them, in
reverse, when one fails (`memory_unit.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from core.store.memory_ballots import MemoryBallots
from core.store.memory_outbox import MemoryDeliveries
from core.store.memory_retention import MemoryRetention
from core.store.memory_roles import (
    MemoryEvents,
    MemoryGates,
    MemoryJournal,
    MemoryRuns,
    MemoryState,
    MemoryViews,
)
from core.store.memory_schedules import MemorySchedules
from core.store.memory_subscriptions import MemorySubscriptions
from core.store.memory_unit import MemoryDb
from core.store.port import (
    Ballots,
    Blobs,
    Deliveries,
    Events,
    Gates,
    Journal,
    Leases,
    PlatformState,
    Retention,
    Runs,
    Schedules,
    Store,
    Subscriptions,
    Transactions,
    Views,
)


class MemoryStore:
    """The store's roles over one `MemoryDb` (tables, lock, clock, units of work), each a
    part of its own (`memory_roles.py`, `memory_*.py`)."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self.db = db = MemoryDb(clock)
        lock, tables, now = db.lock, db.t, db.now
        runs, journal, gates, events = MemoryRuns(db), MemoryJournal(db), MemoryGates(db), MemoryEvents(db)
        state, views = MemoryState(db), MemoryViews(db)
        ballots = MemoryBallots(lock, now, tables.deadlines, tables.votes)  # `memory_ballots.py`
        outbox = MemoryDeliveries(lock, tables, now)  # `memory_outbox.py`
        retention = MemoryRetention(lock, tables, now, ballots)  # `memory_retention.py`
        schedules = MemorySchedules(lock, tables, now)  # `memory_schedules.py`
        subscriptions = MemorySubscriptions(lock, now)  # `memory_subscriptions.py`
        # the roles (`port.Roles`)
        self.blobs: Blobs = journal
        self.runs: Runs = runs
        self.leases: Leases = runs
        self.steps: Journal = journal
        self.gates: Gates = gates
        self.ballots: Ballots = ballots
        self.events: Events = events
        self.state: PlatformState = state
        self.outbox: Deliveries = outbox
        self.retention: Retention = retention
        self.schedules: Schedules = schedules
        self.subscribers: Subscriptions = subscriptions
        self.views: Views = views
        self.transactions: Transactions = db
        # the flat surface, while callers move to the roles
        # Blobs (`store.blobs`)
        self.put_blob = journal.put_blob
        self.get_blob = journal.get_blob
        self.get_blobs = journal.get_blobs
        # Runs (`store.runs`)
        self.get_run = runs.get_run
        self.find_run = runs.find_run
        self.runs_with_args = runs.runs_with_args
        self.recent_runs = runs.recent_runs
        self.runs_in_thread = runs.runs_in_thread
        self.child_runs = runs.child_runs
        self.paused_parents = runs.paused_parents
        self.adopt_child = runs.adopt_child
        self.set_thread = runs.set_thread
        self.transition = runs.transition
        # Leases (`store.leases`)
        self.renew_leases = runs.renew_leases
        self.lapsed_runs = runs.lapsed_runs
        self.runs_leased_by = runs.runs_leased_by
        self.take_over = runs.take_over
        self.release_leases = runs.release_leases
        # Journal (`store.steps`)
        self.journal_start = journal.journal_start
        self.journal_finish = journal.journal_finish
        self.journal_complete_many = journal.journal_complete_many
        self.journal_record_cached = journal.journal_record_cached
        self.journal = journal.journal
        self.journal_outline = journal.journal_outline
        self.lineage = journal.lineage
        # Gates (`store.gates`)
        self.open_gate = gates.open_gate
        self.get_gate = gates.get_gate
        self.waiting_gate = gates.waiting_gate
        self.decided_gate = gates.decided_gate
        self.waiting_gates = gates.waiting_gates
        self.waiting_gates_on = gates.waiting_gates_on
        self.run_gates = gates.run_gates
        # Ballots (`store.ballots`)
        self.cast_vote = ballots.cast_vote
        self.gate_votes = ballots.gate_votes
        self.plan_deadlines = ballots.plan_deadlines
        self.due_deadlines = ballots.due_deadlines
        self.gate_deadlines = ballots.gate_deadlines
        self.fire_deadline = ballots.fire_deadline
        # Events (`store.events`)
        self.audit = events.audit
        self.audit_log = events.audit_log
        self.audit_since = events.audit_since
        self.claim_event = events.claim_event
        self.open_events = events.open_events
        self.finish_event = events.finish_event
        self.forget_events = events.forget_events
        # PlatformState (`store.state`)
        self.put_state = state.put_state
        self.get_state = state.get_state
        self.keep_state = state.keep_state
        self.forget_state = state.forget_state
        # Deliveries (`store.outbox`)
        self.claim_deliveries = outbox.claim_deliveries
        self.settle_delivery = outbox.settle_delivery
        self.defer_delivery = outbox.defer_delivery
        self.release_deliveries = outbox.release_deliveries
        self.renew_delivery = outbox.renew_delivery
        self.delivery_claimants = outbox.delivery_claimants
        self.deliveries = outbox.deliveries
        self.undelivered = outbox.undelivered
        self.forget_deliveries = outbox.forget_deliveries
        # Retention (`store.retention`)
        self.prunable_runs = retention.prunable_runs
        self.prune_counts = retention.prune_counts
        self.prune_runs = retention.prune_runs
        self.pin_run = retention.pin_run
        self.unpin_run = retention.unpin_run
        self.is_pinned = retention.is_pinned
        self.sweep_blobs = retention.sweep_blobs
        self.forget_audit = retention.forget_audit
        self.count_audit = retention.count_audit
        # Schedules (`store.schedules`)
        self.add_schedule = schedules.add_schedule
        self.get_schedule = schedules.get_schedule
        self.list_schedules = schedules.list_schedules
        self.change_schedule = schedules.change_schedule
        self.remove_schedule = schedules.remove_schedule
        self.sync_schedules = schedules.sync_schedules
        self.advance_schedules = schedules.advance_schedules
        self.record_fire = schedules.record_fire
        self.schedule_fires = schedules.schedule_fires
        self.latest_fires = schedules.latest_fires
        self.active_runs = schedules.active_runs
        # Subscriptions (`store.subscribers`)
        self.subscribe = subscriptions.subscribe
        self.unsubscribe = subscriptions.unsubscribe
        self.subscriptions = subscriptions.subscriptions
        # Views (`store.views`)
        self.command_runs = views.command_runs
        self.gate_and_args = views.gate_and_args
        self.run_pulse = views.run_pulse
        self.key_runs = views.key_runs
        self.queued_runs = views.queued_runs
        # Transactions (`store.transactions`)
        self.transaction = db.transaction
        self.batch = db.batch

    # -- lifecycle -------------------------------------------------------------------------
    def migrate(self) -> None:
        """Nothing to migrate."""

    def ping(self) -> None:
        """Always answers (readiness checks)."""

    def close(self) -> None:
        """Nothing to close (the data stays readable until the store is dropped)."""


if TYPE_CHECKING:  # mypy checks that this is a whole `Store`
    _: Store = MemoryStore()

