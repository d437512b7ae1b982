"""Eight replicas admit runs of one concurrency key at the same moment: never past the limit.

Each process has its own store on the shared database (PostgreSQL: the key's row lock; SQLite:
the single writer). After a barrier all of them create runs of a `limit: 3` key at once:
exactly three are admitted. Then, round after round, the running runs are brought to rest by
different processes at the same moment: each rest admits one queued run, never the same one
twice and never past the limit, in queue order, until the queue is empty.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import pytest

from core.store.port import NewRun, Transition
from core.store.records import Concurrency, RunStatus
from core.store.repository import SqlStore

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

REPLICAS = 8
PER_REPLICA = 4
LIMIT = 3
TIMEOUT = 120.0
POLICY = Concurrency(key="deploy-prod", limit=LIMIT)


def _replica(n: int, url: str, barrier: Any, results: Any) -> None:
    try:
        store = SqlStore(url)
        digest = store.blobs.put_blob(b"{}")
        store.runs.get_run  # noqa: B018 (warm: the race is tight)
        barrier.wait(TIMEOUT)
        for _ in range(PER_REPLICA):
            with store.transaction() as tx:
                tx.create_run(NewRun(workflow="deploy", platform="console", conversation="ops", thread=None,
                                     requester=f"console:r{n}", args_digest=digest, status=RunStatus.RUNNING,
                                     lease_owner=f"r{n}:1:x", lease_seconds=600,
                                     concurrency=POLICY))  # fmt: skip
        barrier.wait(TIMEOUT)
        while True:
            barrier.wait(TIMEOUT)  # a round starts: everyone reads the same running runs
            running = sorted(
                r.id for r in store.views.key_runs(key=POLICY.key) if r.status is RunStatus.RUNNING
            )
            barrier.wait(TIMEOUT)
            if not running:
                break
            if n < len(running):  # different replicas rest the running runs at the same moment
                store.runs.transition(Transition(running[n], RunStatus.COMPLETED, actor=f"console:r{n}",
                                                 allowed_from=[RunStatus.RUNNING]))  # fmt: skip
            barrier.wait(TIMEOUT)  # the round is over: the parent looks
        store.close()
        results.put({"n": n})
    except Exception as exc:  # reported, never swallowed: the parent asserts on it
        results.put({"n": n, "error": f"{type(exc).__name__}: {exc}"})
        barrier.abort()


@pytest.fixture
def race_url(database_url: str) -> str:
    with SqlStore(database_url) as store:
        store.migrate()
    return database_url


def test_replicas_admitting_at_once_never_pass_the_limit(race_url: str) -> None:
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(REPLICAS + 1)
    results = context.Queue()
    procs = [context.Process(target=_replica, args=(n, race_url, barrier, results)) for n in range(REPLICAS)]
    for proc in procs:
        proc.start()
    store = SqlStore(race_url)
    try:
        barrier.wait(TIMEOUT)  # they create their runs now
        barrier.wait(TIMEOUT)
        runs = store.views.key_runs(key=POLICY.key)
        assert len(runs) == REPLICAS * PER_REPLICA
        assert len([r for r in runs if r.status is RunStatus.RUNNING]) == LIMIT
        queue = [r.id for r in runs if r.status is RunStatus.QUEUED]  # in queue order
        admitted: list[str] = []
        rounds = 0
        while True:
            barrier.wait(TIMEOUT)
            now = store.views.key_runs(key=POLICY.key)  # read with the replicas: no writes till the barrier
            barrier.wait(TIMEOUT)
            if not now:
                break
            barrier.wait(TIMEOUT)
            rounds += 1
            now = store.views.key_runs(key=POLICY.key)
            running = [r.id for r in now if r.status is RunStatus.RUNNING]
            assert len(running) == min(LIMIT, len(now)), f"round {rounds}: {len(running)} running"
            fresh = {r for r in running if r in queue and r not in admitted}
            assert fresh == set(queue[len(admitted):len(admitted) + len(fresh)]), "the oldest queued first"
            admitted += [r for r in queue if r in fresh]
        outcomes = [results.get(timeout=TIMEOUT) for _ in procs]
    finally:
        store.close()
        for proc in procs:
            proc.join(TIMEOUT)
    causes = [o for o in outcomes if "error" in o and not o["error"].startswith("BrokenBarrierError")]
    assert not causes, causes  # the replica that broke the barrier, not the ones it stopped
    assert not [o for o in outcomes if "error" in o], outcomes
    assert admitted == queue, "admitted in queue order, each once"
    with SqlStore(race_url) as final:
        statuses = {r.status for r in final.runs.recent_runs(limit=100)}
    assert statuses == {RunStatus.COMPLETED}
