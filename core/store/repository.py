"""`SqlStore`: the one implementation of the `Store` port, for SQLite and PostgreSQL.

    SqlStore = RunsSql (runs, CAS transitions, leases)      runs_sql.py
             + JournalSql (journal, blobs, lineage)          journal_sql.py
             + GatesSql (gates, audit trail, event dedupe)   gates_sql.py
             + DispatchSql (queued steps, lease release)     dispatch_sql.py
             + StateSql (values chat adapters keep)          state_sql.py
             + ViewsSql (what run pages read)                views_sql.py
             on SqlBase (engine, clock, hot path)            sql_base.py

Reads and CAS changes go through SQLAlchemy Core on the tables of `tables.py`; rows
become frozen records (`rows.py`) before they leave. Driver errors become `StoreError`.

    store = SqlStore("sqlite:///./.baton/baton.db")   # or postgresql://user@host/db
    store.migrate()                                    # alembic upgrade head, safe to race
"""

from __future__ import annotations

from core.store import migration
from core.store.database import store_operation
from core.store.dispatch_sql import DispatchSql
from core.store.gates_sql import GatesSql
from core.store.journal_sql import JournalSql
from core.store.runs_sql import DEFAULT_LEASE_SECONDS, RunsSql
from core.store.state_sql import StateSql
from core.store.views_sql import ViewsSql

__all__ = ["DEFAULT_LEASE_SECONDS", "SqlStore"]


class SqlStore(RunsSql, JournalSql, GatesSql, DispatchSql, StateSql, ViewsSql):
    """The run store on SQLite (WAL) or PostgreSQL (psycopg 3), through the same code.

    `sqlite_synchronous`: "NORMAL" (default; a power cut may lose the last commits but
    never corrupts) or "FULL". `clock` is injectable for lease tests.
    """

    @store_operation("migrate the database schema")
    def migrate(self) -> None:
        """Bring the schema to the newest alembic revision (idempotent, safe to race)."""
        migration.upgrade(self._engine)

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
