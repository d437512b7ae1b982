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
