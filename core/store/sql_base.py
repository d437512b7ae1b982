"""`SqlDatabase`: what every role of `SqlStore` shares, handed to each in its constructor:
the engine, the clock, the hot path, a few statement helpers and the units of work
(`transaction()`, `batch()`, `apply()`: `unit_sql.py`). Each `*_sql.py` role class holds
one and adds its group of methods; `repository.py` builds one and composes the roles."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from core.errors import RunNotFound, RunPruned
from core.store.cas import prefix_upper_bound
from core.store.database import SqliteSynchronous, dialect_insert, normalize_url, open_engine, sqlite_pragmas
from core.store.hot_path import HotPath
from core.store.records import Run
from core.store.rows import run_from_row
from core.store.tables import PRUNED_RUNS, RUNS
from core.store.unit_sql import SqlBatch, SqlUnitOfWork, SqlUnits
from core.store.writes_sql import Write


class SqlDatabase:
    def __init__(
        self,
        url: str,
        *,
        sqlite_synchronous: SqliteSynchronous = "NORMAL",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = normalize_url(url)
        self.engine: Engine = open_engine(self.url, sqlite_synchronous=sqlite_synchronous)
        self.dialect: str = self.engine.dialect.name
        #: for ONE statement (a read, or a write that is atomic by itself): on PostgreSQL in
        #: autocommit, which saves the BEGIN and the COMMIT/ROLLBACK round trips (3 -> 1)
        self.single: Engine = (
            self.engine.execution_options(isolation_level="AUTOCOMMIT")
            if self.dialect == "postgresql"
            else self.engine
        )
        pragmas = sqlite_pragmas(sqlite_synchronous) if self.dialect == "sqlite" else []
        self.hot = HotPath(self.engine, pragmas=pragmas)
        self.clock = clock
        self._last_now = 0.0
        self._now_lock = threading.Lock()
        self._units = SqlUnits(self)

    # -- units of work (`unit_sql.py`) ------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self) -> Iterator[SqlUnitOfWork]:
        """A unit of work (`core/store/unit_of_work.py`): sent when the block ends."""
        unit = SqlUnitOfWork(self.now)
        yield unit
        self._units.apply(unit.writes)

    def batch(self) -> contextlib.AbstractContextManager[SqlBatch]:
        """Units of work committed together (`unit_sql.py`)."""
        return self._units.batch()

    def apply_one(self, write: Write) -> Any:
        """A single call: a unit of this one write; its result."""
        return self._units.apply_one(write)

    def now(self) -> float:
        """The clock, strictly increasing within this store (so "newest first" never ties)."""
        with self._now_lock:
            now = max(self.clock(), self._last_now + 1e-6)
            self._last_now = now
            return now

    def insert_ignore(self, table: sa.Table, keys: Sequence[str]) -> Any:
        """INSERT … ON CONFLICT (keys) DO NOTHING in this database's dialect."""
        insert = dialect_insert(self.dialect)
        return insert(table).on_conflict_do_nothing(index_elements=list(keys))

    def read_run(self, conn: sa.Connection, run_id: str) -> Run:
        row = conn.execute(sa.select(RUNS).where(RUNS.c.id == run_id)).first()
        if row is None:
            self.raise_if_pruned(conn, run_id, exact=True)
            raise RunNotFound(f"No run has the id {run_id}.", run_id=run_id)
        return run_from_row(row)

    @staticmethod
    def raise_if_pruned(conn: sa.Connection, id_or_prefix: str, *, exact: bool) -> None:
        """RunPruned when a tombstone answers for this id (or this prefix, uniquely)."""
        cond = (
            PRUNED_RUNS.c.id == id_or_prefix
            if exact
            else sa.and_(
                PRUNED_RUNS.c.id.startswith(id_or_prefix, autoescape=True),  # PostgreSQL: its index
                # SQLite: a range scan of the primary key (its LIKE … ESCAPE uses no index: with
                # a million tombstones, `status <old id>` scanned them all, 165 ms)
                PRUNED_RUNS.c.id >= id_or_prefix,
                PRUNED_RUNS.c.id < prefix_upper_bound(id_or_prefix),
            )
        )
        rows = conn.execute(sa.select(PRUNED_RUNS).where(cond).limit(2)).all()
        if len(rows) == 1:
            row = rows[0]
            raise RunPruned(row.id, workflow=row.workflow, status=row.status, pruned_at=row.pruned_at)

    def read_runs(self, query: sa.Select[Any]) -> list[Run]:
        with self.single.connect() as conn:
            return [run_from_row(row) for row in conn.execute(query)]

    def ping(self) -> None:
        """One trivial query on a pooled connection (readiness checks); raises when the database
        does not answer."""
        with self.single.connect() as conn:
            conn.execute(sa.text("SELECT 1"))

    def close(self) -> None:
        self.hot.close()
        self.engine.dispose()
