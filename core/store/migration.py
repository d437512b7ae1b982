"""Running alembic migrations programmatically, safely when several processes start at once.

PostgreSQL: the upgrade runs under a session-level `pg_advisory_lock`, so the first
process migrates and the others wait, then find the schema at head (a no-op).
SQLite: the upgrade runs inside one `BEGIN IMMEDIATE` transaction (SQLite DDL is
transactional), which takes the database's write lock; the others wait (a busy timeout of
their own, long enough for a first migration on a loaded machine), then find the schema at
head.

Whoever gets the lock first reads the version with one SELECT: a process that finds the
schema at head releases the lock at once, without importing alembic or reading the migration
files under it (eight processes starting together on a fresh SQLite file used to hold the
lock one after the other for that, and the last gave up on the busy timeout).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from core.errors import ConfigurationError
from core.store.database import is_memory_sqlite, open_engine

if TYPE_CHECKING:  # alembic is slow to import: loaded only when a migration must run
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"

#: The newest revision in migrations/versions; a test keeps it equal to alembic's head. A
#: database already at it is left alone without importing alembic (process start-up).
HEAD_REVISION = "0016_runs_parent_partial"

#: How long a process waits for another one's migration on SQLite (a first migration on a
#: loaded machine takes seconds; the ordinary busy timeout is for single statements).
MIGRATION_BUSY_TIMEOUT_MS = 300_000

#: pg_advisory_lock key shared by every Baton process ("baton" in ASCII).
ADVISORY_LOCK_KEY = 0x6261746F6E


def alembic_config(connection: Connection | None = None) -> Config:
    """An alembic Config for our migrations, without an ini file."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str | None:
    """The head according to alembic (reads the migration files)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(connection: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


def at_head(engine: Engine) -> bool:
    """True when the database is already at `HEAD_REVISION`: one SELECT, no alembic."""
    try:
        with engine.connect() as conn:
            versions = set(conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars())
    except sa.exc.DBAPIError:  # no alembic_version table yet: a new database
        return False
    return versions == {HEAD_REVISION}


def _versions(connection: Connection) -> set[str]:
    """The revisions in `alembic_version` (empty: no schema yet), without alembic and without
    failing a statement (a failed one would abort a PostgreSQL transaction)."""
    if not sa.inspect(connection).has_table("alembic_version"):
        return set()
    return set(connection.execute(sa.text("SELECT version_num FROM alembic_version")).scalars())


def _upgrade_on(connection: Connection, revision: str) -> str | None:
    """Upgrade under the caller's lock; the revision found before (None: no schema yet)."""
    with connection.begin():
        if revision == "head" and _versions(connection) == {HEAD_REVISION}:
            return HEAD_REVISION  # a peer migrated while this process waited for the lock
        from alembic import command

        _refuse_unknown(_versions(connection))
        before = current_revision(connection)
        command.upgrade(alembic_config(connection), revision)
    return before


def _refuse_unknown(versions: set[str]) -> None:
    """A schema at a revision this Baton's migrations do not have (a newer Baton migrated the
    database, then an older one was started on it): one line, not alembic's traceback, and
    nothing touched (an older Baton would misread the newer tables)."""
    from alembic.script import ScriptDirectory

    known = {script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions()}
    unknown = sorted(versions - known)
    if unknown:
        raise ConfigurationError(
            f"the database of BATON_DATABASE_URL is at schema revision `{unknown[0]}`, which this "
            f"Baton does not know (its newest is `{HEAD_REVISION}`): a newer Baton migrated it",
            hint="Run that newer Baton against this database, or restore a backup made before the "
            "upgrade; Baton leaves the database as it is.",
        )


def _upgrade_postgres(engine: Engine, revision: str) -> str | None:
    with engine.connect() as conn:
        conn.exec_driver_sql(f"SELECT pg_advisory_lock({ADVISORY_LOCK_KEY})")
        conn.commit()
        try:
            return _upgrade_on(conn, revision)
        finally:
            conn.exec_driver_sql(f"SELECT pg_advisory_unlock({ADVISORY_LOCK_KEY})")
            conn.commit()


def _immediate_engine(engine: Engine) -> Engine:
    """A one-off engine on the same SQLite file whose transactions are BEGIN IMMEDIATE."""
    locked = open_engine(engine.url)

    @event.listens_for(locked, "connect")
    def _no_driver_transactions(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        dbapi_connection.execute(f"PRAGMA busy_timeout = {MIGRATION_BUSY_TIMEOUT_MS}")

    @event.listens_for(locked, "begin")
    def _begin_immediate(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return locked


def upgrade(engine: Engine, revision: str = "head") -> str | None:
    """Bring the database behind `engine` to `revision` (default: the newest). Returns the
    revision it was at before (None: no schema yet), for `baton migrate` to say what it did."""
    if revision == "head" and at_head(engine):
        return HEAD_REVISION  # the common start-up: nothing to do, alembic never imported
    if engine.dialect.name == "postgresql":
        return _upgrade_postgres(engine, revision)
    if is_memory_sqlite(engine.url):
        with engine.connect() as conn:  # private to this process: nobody to race
            return _upgrade_on(conn, revision)
    locked = _immediate_engine(engine)
    try:
        with locked.connect() as conn:
            return _upgrade_on(conn, revision)
    finally:
        locked.dispose()
