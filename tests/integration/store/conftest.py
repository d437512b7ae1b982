"""Store fixtures: a migrated `SqlStore` on SQLite and on PostgreSQL, a run factory, a clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from core.store.records import Run, RunStatus
from core.store.repository import SqlStore


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


@pytest.fixture
def store(database_url: str, clock: Clock) -> Iterator[SqlStore]:
    with SqlStore(database_url, clock=clock) as opened:
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
}

MakeRun = Callable[..., Run]


@pytest.fixture
def make_run(store: SqlStore) -> MakeRun:
    """`make_run(status, workflow=..., conversation=..., ...)`: a run driven to `status`."""

    def make(status: RunStatus = RunStatus.PENDING, **fields: str | None) -> Run:
        values: dict[str, str | None] = {
            "workflow": "release-notes",
            "platform": "slack",
            "conversation": "C1",
            "thread": None,
            "requester": "slack:U1",
            "args_digest": store.put_blob(b'{"message":"B"}'),
        }
        values.update(fields)
        run = store.create_run(**values)  # type: ignore[arg-type]
        for step in PATHS[status]:
            run = store.transition(run.id, step, actor="engine:test", lease_owner="engine:test")
        return run

    return make
