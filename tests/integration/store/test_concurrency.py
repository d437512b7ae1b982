"""Eight processes race on one database: exactly one wins each race, on SQLite and PostgreSQL.

One batch of 8 spawned processes per database runs five races in step (a barrier before
each): `migrate()` on a fresh database, `failed -> running` on one run, `claim_event` on
one event id, `decide_gate` on one gate, an approval (a unit of work) on a paused run. Spawning is the
slow part, so the batch runs once per database (module fixture) and each race is asserted
by its own test.
"""

from __future__ import annotations

import multiprocessing
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from core.store.port import Transition
from core.store.records import GateStatus, RunStatus
from core.store.repository import SqlStore
from tests.factories import create_run
from tests.integration.store import race_workers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # spawning 8 interpreters is slow

WORKERS = 8
RESULT_TIMEOUT = 240.0


def _fresh_postgres_database(server_url: str) -> Iterator[str]:
    name = f"baton_race_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield sa.engine.make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def race_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{Path(tmp_path_factory.mktemp('race')) / 'baton.db'}"
        return
    yield from _fresh_postgres_database(request.getfixturevalue("postgres_server"))


@pytest.fixture(scope="module")
def race(race_url: str) -> dict[str, Any]:
    """Run the races once; returns the workers' outcomes and the final state."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WORKERS + 1)  # the workers and this process
    setup = ctx.Queue()
    results = ctx.Queue()
    processes = [
        ctx.Process(target=race_workers.race, args=(n, race_url, barrier, setup, results), daemon=True)
        for n in range(WORKERS)
    ]
    for process in processes:
        process.start()
    store = SqlStore(race_url)
    try:
        barrier.wait(RESULT_TIMEOUT)  # 1: all started; they migrate now
        try:
            barrier.wait(RESULT_TIMEOUT)  # 2: all migrated
        except threading.BrokenBarrierError:  # a worker failed: say how, not only that it broke
            errors = [results.get(timeout=RESULT_TIMEOUT).get("error") for _ in processes]
            raise AssertionError(f"a worker failed to migrate: {[e for e in errors if e]}") from None
        failed = create_run(
            store,
            workflow="w",
            platform="slack",
            conversation="C1",
            thread=None,
            requester="slack:U0",
            args_digest="d",
        )
        store.runs.transition(Transition(failed.id, RunStatus.RUNNING, actor="engine"))
        store.runs.transition(Transition(failed.id, RunStatus.FAILED, actor="engine", reason="boom"))
        gated = create_run(
            store,
            workflow="w",
            platform="slack",
            conversation="C1",
            thread=None,
            requester="slack:U0",
            args_digest="d",
        )
        store.gates.open_gate(gated.id, "review", "ship?")
        paused = create_run(
            store,
            workflow="w",
            platform="slack",
            conversation="C1",
            thread=None,
            requester="slack:U0",
            args_digest="d",
        )
        store.runs.transition(Transition(paused.id, RunStatus.RUNNING, actor="engine"))
        store.gates.open_gate(paused.id, "ok", "go on?")
        store.runs.transition(Transition(paused.id, RunStatus.PAUSED, actor="engine"))
        for _ in processes:
            setup.put((failed.id, gated.id, paused.id))
        for _ in range(4):  # 3, 4, 5, 6: the four races start together
            barrier.wait(RESULT_TIMEOUT)
        outcomes = [results.get(timeout=RESULT_TIMEOUT) for _ in processes]
        for process in processes:
            process.join(timeout=RESULT_TIMEOUT)
        return {
            "outcomes": sorted(outcomes, key=lambda o: o["worker"]),
            "run": store.runs.get_run(failed.id),
            "gate": store.gates.get_gate(gated.id, "review"),
            "approved": (
                store.runs.get_run(paused.id),
                store.gates.get_gate(paused.id, "ok"),
                store.events.audit_log(paused.id),
            ),
            "exit_codes": [p.exitcode for p in processes],
        }
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
        store.close()


def _by_race(race: dict[str, Any], name: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    outcomes = race["outcomes"]
    assert [o.get("error") for o in outcomes] == [None] * WORKERS
    won = [o[name] for o in outcomes if o[name][0] == "won"]
    lost = [o[name] for o in outcomes if o[name][0] == "lost"]
    return won, lost


def test_all_processes_finished(race: dict[str, Any]) -> None:
    assert race["exit_codes"] == [0] * WORKERS
    assert len(race["outcomes"]) == WORKERS


def test_racing_migrations_all_succeed(race: dict[str, Any], race_url: str) -> None:
    won, lost = _by_race(race, "migrate")
    assert (len(won), lost) == (WORKERS, [])
    with SqlStore(race_url) as store:
        store.migrate()  # still a no-op afterwards


def test_exactly_one_process_resumes_the_failed_run(race: dict[str, Any]) -> None:
    won, lost = _by_race(race, "resume")
    assert len(won) == 1, race["outcomes"]
    winner = won[0][2]
    assert won[0][1] == "running"
    assert lost == [("lost", "RunNotResumable", "running", winner)] * (WORKERS - 1)
    run = race["run"]
    assert (run.status, run.status_by, run.version) == (RunStatus.RUNNING, winner, 4)


def test_exactly_one_process_claims_the_event(race: dict[str, Any]) -> None:
    won, lost = _by_race(race, "claim")
    assert (len(won), len(lost)) == (1, WORKERS - 1)


def test_exactly_one_process_decides_the_gate(race: dict[str, Any]) -> None:
    won, lost = _by_race(race, "decide")
    assert len(won) == 1, race["outcomes"]
    winner = won[0][2]
    assert lost == [("lost", "GateAlreadyDecided", "approved", winner)] * (WORKERS - 1)
    assert (race["gate"].status, race["gate"].decided_by) == (GateStatus.APPROVED, winner)


def test_exactly_one_process_approves_the_paused_run(race: dict[str, Any]) -> None:
    won, lost = _by_race(race, "approve")
    assert len(won) == 1, race["outcomes"]
    winner = won[0][2]
    assert won[0][1] == "running"
    assert lost == [("lost", "GateAlreadyDecided", "approved", winner)] * (WORKERS - 1)
    run, gate, audit = race["approved"]
    assert (run.status, run.status_by, run.lease_owner, run.version) == (RunStatus.RUNNING, winner, winner, 4)
    assert (gate.status, gate.decided_by) == (GateStatus.APPROVED, winner)
    assert [(a.action, a.actor) for a in audit] == [("approve", winner)]
