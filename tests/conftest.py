"""Shared fixtures.

PostgreSQL: tests marked `postgres` (or using `postgres_url`) get a fresh database on the
server named by BATON_TEST_POSTGRES_URL (CI sets it). When BATON_REQUIRE_POSTGRES=1 (CI),
an unreachable server fails those tests; otherwise they are skipped with the reason.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

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


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A fresh, empty database for one test; dropped afterwards."""
    import sqlalchemy as sa

    name = f"baton_t_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(postgres_server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = sa.engine.make_url(postgres_server).set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'baton.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest) -> str:
    """Run a test against SQLite and against the real PostgreSQL server."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url")
    return request.getfixturevalue("postgres_url")
