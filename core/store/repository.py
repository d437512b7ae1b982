"""`SqlStore`: the `Store` port (and `Dispatch`) on SQLite and PostgreSQL, composed of roles.

    db = SqlDatabase(url)          engine, clock, hot path, units of work    sql_base.py, unit_sql.py
    SqlStore.runs, .leases         = RunsSql(db)       (Runs, Leases)       runs_sql.py
            .steps, .blobs         = JournalSql(db)    (Journal, Blobs)     journal_sql.py
            .gates                 = GatesSql(db)      (Gates)              gates_sql.py
            .events                = EventsSql(db)     (Events)             gates_sql.py
            .ballots               = BallotsSql(db)    (Ballots)            ballots_sql.py
            .dispatch              = DispatchSql(db)   (Dispatch)           dispatch_sql.py
            .state                 = StateSql(db)      (PlatformState)      state_sql.py
            .outbox                = DeliveriesSql(db) (Deliveries)         outbox_sql.py
            .schedules             = SchedulesSql(db)  (Schedules)          schedules_sql.py
            .subscribers           = SubscriptionsSql(db) (Subscriptions)   subscriptions_sql.py
            .views                 = ViewsSql(db)      (Views)              views_sql.py
            .retention             = RetentionSql(db)  (Retention)          retention_sql.py
            .transactions          = db                (Transactions)       unit_sql.py

Each role object holds the one `SqlDatabase` (one connection pool serves them all) and
inherits nothing. Reads and CAS changes go through SQLAlchemy Core on the tables of
`tables.py`; rows become frozen records (`rows.py`) before they leave. Driver errors become
`StoreError`.

    store = SqlStore("sqlite:///./.baton/baton.db")   # or postgresql://user@host/db
    store.migrate()                                    # alembic upgrade head, safe to race
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from core.store import migration
from core.store.ballots_sql import BallotsSql
from core.store.cas import DEFAULT_LEASE_SECONDS
from core.store.database import SqliteSynchronous, store_operation
from core.store.dispatch_sql import DispatchSql
from core.store.gates_sql import EventsSql, GatesSql
from core.store.journal_sql import JournalSql
from core.store.outbox_sql import DeliveriesSql
from core.store.port import (
    Ballots,
    Blobs,
    Deliveries,
    Dispatch,
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
from core.store.retention_sql import RetentionSql
from core.store.runs_sql import RunsSql
from core.store.schedules_sql import SchedulesSql
from core.store.sql_base import SqlDatabase
from core.store.state_sql import StateSql
from core.store.subscriptions_sql import SubscriptionsSql
from core.store.views_sql import ViewsSql

__all__ = ["DEFAULT_LEASE_SECONDS", "SqlStore"]


class SqlStore:
    """The run store on SQLite (WAL) or PostgreSQL (psycopg 3), through the same code.

    `sqlite_synchronous`: "NORMAL" (default; a power cut may lose the last commits but
    never corrupts) or "FULL". `clock` is injectable for lease tests.
    """

    def __init__(
        self, url: str, *, sqlite_synchronous: SqliteSynchronous = "NORMAL",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.db = db = SqlDatabase(url, sqlite_synchronous=sqlite_synchronous, clock=clock)
        self.url = db.url
        self.dialect = db.dialect
        self._engine = db.engine
        self._hot = db.hot
        runs, journal = RunsSql(db), JournalSql(db)
        gates, events, ballots = GatesSql(db), EventsSql(db), BallotsSql(db)
        state, outbox, retention = StateSql(db), DeliveriesSql(db), RetentionSql(db)
        schedules, subscriptions, views = SchedulesSql(db), SubscriptionsSql(db), ViewsSql(db)
        # the roles (`port.Roles`), and the hand-off to distributed workers (`Dispatch`)
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
        self.dispatch: Dispatch = DispatchSql(db)
        self.vacuum = retention.vacuum
        self.ping = db.ping
        self.close = db.close
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

    @store_operation("migrate the database schema")
    def migrate(self) -> str | None:
        """Bring the schema to the newest alembic revision (idempotent, safe to race); the
        revision the database was at before (None: it had no schema)."""
        return migration.upgrade(self._engine)

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


if TYPE_CHECKING:  # mypy checks that this is a whole `Store`
    _store: Store = SqlStore("sqlite://")
