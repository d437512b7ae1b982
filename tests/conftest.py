"""Shared fixtures.

PostgreSQL: tests marked `postgres` (or using `postgres_url`) get a fresh database on the
server named by BATON_TEST_POSTGRES_URL (CI sets it). When BATON_REQUIRE_POSTGRES=1 (CI),
an unreachable server fails those tests; otherwise they are skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Property tests judge correctness, never speed: on a loaded shared machine a single example can
# take longer than Hypothesis's default 200 ms deadline, which failed correct code at random.
# In CI (CI=true) the examples are derandomized: a run judges the change, never a new random draw
# (a rare splitter example found locally is recorded in the closing note of issue 34, not left to
# fail an unrelated submission by chance); locally they stay random, to keep finding new ones.
settings.register_profile(
    "baton", deadline=None, suppress_health_check=[HealthCheck.too_slow],
    derandomize=os.environ.get("CI") == "true",
)
settings.load_profile("baton")

POSTGRES_URL_ENV = "BATON_TEST_POSTGRES_URL"
DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def _admin_url() -> str:
    return os.environ.get(POSTGRES_URL_ENV, DEFAULT_POSTGRES_URL)


@pytest.fixture(scope="session")
def postgres_server() -> str:
    """The admin URL of a reachable PostgreSQL server (fails in CI when unreachable)."""
    import sqlalchemy as sa

    url = _admin_url()
    try:
        engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        engine.dispose()
    except Exception as exc:  # any driver error means unreachable
        message = f"PostgreSQL at {url} is unreachable ({type(exc).__name__}: {exc})"
        if os.environ.get("BATON_REQUIRE_POSTGRES") == "1":
            pytest.fail(message)
        pytest.skip(message + f"; set {POSTGRES_URL_ENV}")
    return url


class _WorkerDatabase:
    """One PostgreSQL database per test process (xdist worker), handed to one test at a time.

    Creating and dropping a database per test cost seconds on a busy server (DROP DATABASE
    waits for a checkpoint). After each test the database is emptied instead (every
    connection to it ended, every schema dropped, `public` made anew: what a new database
    holds) and renamed, so a connection a test left behind can no more reach the next test's
    database than it could reach a dropped one. When any of that fails, it is dropped and
    created afresh."""

    def __init__(self, server_url: str) -> None:
        import sqlalchemy as sa

        self._server_url = server_url
        self._admin = sa.create_engine(server_url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
        self.name = ""
        self._create()

    def url(self) -> str:
        import sqlalchemy as sa

        return sa.engine.make_url(self._server_url).set(database=self.name).render_as_string(hide_password=False)

    def _create(self) -> None:
        import sqlalchemy as sa

        self.name = f"baton_t_{uuid.uuid4().hex[:12]}"
        with self._admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{self.name}"'))

    def drop(self) -> None:
        import sqlalchemy as sa

        with self._admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)'))

    def reset(self) -> None:
        """Empty the database and give it a new name, for the next test."""
        try:
            self._empty_and_rename()
        except Exception:  # anything left the database in doubt: a new one
            self.drop()
            self._create()

    def _empty_and_rename(self) -> None:
        import sqlalchemy as sa

        ending = sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = :db AND pid <> pg_backend_pid()")
        with self._admin.connect() as conn:  # a test may have refused connections, or set options
            conn.execute(sa.text(f'ALTER DATABASE "{self.name}" WITH ALLOW_CONNECTIONS true'))
            conn.execute(sa.text(f'ALTER DATABASE "{self.name}" RESET ALL'))
            conn.execute(ending, {"db": self.name})
        engine = sa.create_engine(self.url(), isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
        try:
            with engine.connect() as conn:
                schemas = conn.execute(sa.text(
                    "SELECT nspname FROM pg_namespace WHERE nspname <> 'information_schema'"
                    " AND nspname NOT LIKE 'pg\\_%'")).scalars().all()
                conn.execute(sa.text("; ".join([*(f'DROP SCHEMA "{n}" CASCADE' for n in schemas),
                                                "CREATE SCHEMA public", "GRANT ALL ON SCHEMA public TO PUBLIC"])))
        finally:
            engine.dispose()
        old, new = self.name, f"baton_t_{uuid.uuid4().hex[:12]}"
        with self._admin.connect() as conn:
            for _ in range(20):  # a pool the test left may reconnect in between: end it again
                conn.execute(ending, {"db": old})
                try:
                    conn.execute(sa.text(f'ALTER DATABASE "{old}" RENAME TO "{new}"'))
                    break
                except sa.exc.OperationalError:  # "being accessed by other users"
                    time.sleep(0.05)
            else:
                raise RuntimeError(f"database {old} stays in use")
        self.name = new


@pytest.fixture(scope="session")
def _worker_database(postgres_server: str) -> Iterator[_WorkerDatabase]:
    database = _WorkerDatabase(postgres_server)
    try:
        yield database
    finally:
        database.drop()


@pytest.fixture
def postgres_url(_worker_database: _WorkerDatabase) -> Iterator[str]:
    """A fresh, empty database for one test (this test process's, emptied and renamed after
    each test: `_WorkerDatabase`)."""
    try:
        yield _worker_database.url()
    finally:
        _worker_database.reset()


@pytest.fixture
def migrated_postgres_url(postgres_url: str) -> str:
    """`postgres_url` with the schema at head (`SqlStore.migrate()` there is then a no-op)."""
    from core.store.repository import SqlStore

    with SqlStore(postgres_url) as store:
        store.migrate()
    return postgres_url


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'baton.db'}"


@pytest.fixture(scope="session")
def _migrated_sqlite_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One SQLite database migrated to head per test process: tests copy it."""
    from core.store.repository import SqlStore

    path = tmp_path_factory.mktemp("migrated") / "baton.db"
    with SqlStore(f"sqlite:///{path}") as store:
        store.migrate()
    assert not path.with_name("baton.db-wal").exists()  # closed: everything is in the one file
    return path


@pytest.fixture
def migrated_sqlite_url(sqlite_url: str, tmp_path: Path, _migrated_sqlite_file: Path) -> str:
    """`sqlite_url` (the same file) with the schema at head: a copy of a database migrated once
    per test process, for tests that migrate first thing and test something else (migrating a
    new database is tests/integration/store/test_migrations.py's, on `sqlite_url`)."""
    shutil.copyfile(_migrated_sqlite_file, tmp_path / "baton.db")
    return sqlite_url


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest) -> str:
    """Run a test against SQLite and against the real PostgreSQL server."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url")
    return request.getfixturevalue("postgres_url")


@pytest.fixture(params=["sqlite", "postgres"])
def migrated_database_url(request: pytest.FixtureRequest) -> str:
    """`database_url` with the schema at head (for tests that migrate first thing)."""
    if request.param == "sqlite":
        return request.getfixturevalue("migrated_sqlite_url")
    return request.getfixturevalue("migrated_postgres_url")
