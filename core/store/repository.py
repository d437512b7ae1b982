"""`SqlStore`: the `Store` port (and `Dispatch`) on SQLite and PostgreSQL.

    SqlStore = RunsSql (Runs, Leases)                        runs_sql.py
               on UnitSql (`transaction()`, units of work)   unit_sql.py, writes_sql.py
             + JournalSql (Journal, Blobs)                   journal_sql.py
             + GatesSql (Gates, Events)                      gates_sql.py
             + BallotsSql (Ballots: votes, deadlines)        ballots_sql.py
             + DispatchSql (Dispatch: queued steps)          dispatch_sql.py
             + StateSql (PlatformState)                      state_sql.py
             + DeliveriesSql (Deliveries: the outbox)        outbox_sql.py
             + SchedulesSql (Schedules: schedules, fires)    schedules_sql.py
             + SubscriptionsSql (Subscriptions)              subscriptions_sql.py
             + ViewsSql (Views)                              views_sql.py
             + RetentionSql (Retention: prune, pins, sweep)  retention_sql.py
             on SqlBase (engine, clock, hot path)            sql_base.py

Reads and CAS changes go through SQLAlchemy Core on the tables of `tables.py`; rows
become frozen records (`rows.py`) before they leave. Driver errors become `StoreError`.

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
from core.store.gates_sql import GatesSql
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
from core.store.state_sql import StateSql
from core.store.subscriptions_sql import SubscriptionsSql
from core.store.views_sql import ViewsSql

__all__ = ["DEFAULT_LEASE_SECONDS", "SqlStore"]


class SqlStore(
    RunsSql, JournalSql, GatesSql, BallotsSql, DispatchSql, StateSql, ViewsSql, DeliveriesSql, RetentionSql,
    SchedulesSql,
    SubscriptionsSql,
):
    """The run store on SQLite (WAL) or PostgreSQL (psycopg 3), through the same code.

    `sqlite_synchronous`: "NORMAL" (default; a power cut may lose the last commits but
    never corrupts) or "FULL". `clock` is injectable for lease tests.
    """

    def __init__(
        self, url: str, *, sqlite_synchronous: SqliteSynchronous = "NORMAL",
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(url, sqlite_synchronous=sqlite_synchronous, clock=clock)
        # the roles (`port.Roles`): one connection pool serves them all, so each is this store
        self.blobs: Blobs = self
        self.runs: Runs = self
        self.leases: Leases = self
        self.steps: Journal = self
        self.gates: Gates = self
        self.ballots: Ballots = self
        self.events: Events = self
        self.state: PlatformState = self
        self.outbox: Deliveries = self
        self.retention: Retention = self
        self.schedules: Schedules = self
        self.subscribers: Subscriptions = self
        self.views: Views = self
        self.transactions: Transactions = self

    @store_operation("migrate the database schema")
    def migrate(self) -> str | None:
        """Bring the schema to the newest alembic revision (idempotent, safe to race); the
        revision the database was at before (None: it had no schema)."""
        return migration.upgrade(self._engine)

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


if TYPE_CHECKING:  # mypy checks that this is a whole `Store`, and `Dispatch`
    _store: Store = SqlStore("sqlite://")
    _dispatch: Dispatch = SqlStore("sqlite://")
