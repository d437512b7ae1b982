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

