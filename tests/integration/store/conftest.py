"""The store contract suite's fixtures: every test taking `store` runs against each
implementation of the port (`MemoryStore`, `SqlStore` on SQLite, `SqlStore` on PostgreSQL);
tests of what only SQL has (migrations, query plans, the hot path, processes racing) take
`sql_store` (SQLite and PostgreSQL). `-m memory_store` selects the in-memory third alone: it
does no I/O and runs in about a second, so a unit run may include it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from core.store.memory import MemoryStore
from core.store.port import Store, Transition
from core.store.records import Run, RunStatus
from core.store.repository import SqlStore
from tests.factories import create_run


class Clock:
    """A settable clock for lease tests (the store's clock is injectable)."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(
    params=[
        pytest.param("memory", marks=pytest.mark.memory_store),
        pytest.param("sqlite"),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def store(request: pytest.FixtureRequest, clock: Clock) -> Iterator[Store]:
    """The store under contract: in memory, on SQLite, on PostgreSQL."""
    if request.param == "memory":
        yield MemoryStore(clock=clock)
        return
    url = request.getfixturevalue(f"migrated_{request.param}_url")
    with SqlStore(url, clock=clock) as opened:
        opened.migrate()
        yield opened


@pytest.fixture
def sql_store(migrated_database_url: str, clock: Clock) -> Iterator[SqlStore]:
    """`SqlStore` alone, on SQLite and on PostgreSQL."""
    with SqlStore(migrated_database_url, clock=clock) as opened:
        opened.migrate()
        yield opened


#: How to reach each status from a new pending run, by legal transitions only.
PATHS: dict[RunStatus, list[RunStatus]] = {
    RunStatus.PENDING: [],
    RunStatus.RUNNING: [RunStatus.RUNNING],
    RunStatus.COMPLETED: [RunStatus.RUNNING, RunStatus.COMPLETED],
    RunStatus.FAILED: [RunStatus.RUNNING, RunStatus.FAILED],
    RunStatus.PAUSED: [RunStatus.RUNNING, RunStatus.PAUSED],
    RunStatus.NEEDS_ATTENTION: [RunStatus.RUNNING, RunStatus.NEEDS_ATTENTION],
    RunStatus.CANCELLED: [RunStatus.CANCELLED],
    RunStatus.QUEUED: [RunStatus.RUNNING, RunStatus.FAILED, RunStatus.QUEUED],
}

MakeRun = Callable[..., Run]


def run_factory(store: Store) -> MakeRun:
    """`make(status, workflow=..., conversation=..., ...)`: a run driven to `status`."""

    def make(status: RunStatus = RunStatus.PENDING, **fields: str | None) -> Run:
        values: dict[str, str | None] = {
            "workflow": "release-notes",
            "platform": "slack",
            "conversation": "C1",
            "thread": None,
            "requester": "slack:U1",
            "args_digest": store.blobs.put_blob(b'{"message":"B"}'),
        }
        values.update(fields)
        run = create_run(store, **values)
        for step in PATHS[status]:
            run = store.runs.transition(
                Transition(run.id, step, actor="engine:test", lease_owner="engine:test")
            )
        return run

    return make


@pytest.fixture
def make_run(store: Store) -> MakeRun:
    return run_factory(store)


@pytest.fixture
def make_sql_run(sql_store: SqlStore) -> MakeRun:
    return run_factory(sql_store)
