"""`Batch.units`, the way a tick creates its fires' runs: per unit, its run or the error that
undid it; a fire's key decides which unit wins, never timing. On PostgreSQL the units travel
together (the fires claimed in one statement, the winners' rows in one statement per table)
and, with `share`, a fire whose schedule another replica's batch holds is left to it
(`FireBusy`); two stores on one database racing on the same due fires start exactly one
run per fire."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence

import pytest

from core.errors import BatonError, FireAlreadyRecorded, FireBusy
from core.store.port import Store
from core.store.records import Concurrency, Fire, FireOutcome, NewRun, OnLimit, Run, RunStatus
from core.store.repository import SqlStore
from core.store.unit_of_work import UnitOfWork
from tests.integration.store.test_schedules import _schedule

Build = Callable[[UnitOfWork], Run]


def _start(sid: str, due: float, by: str, *, key: str | None = None) -> Build:
    """A unit creating a running run with its fire and its `start` audit row, as a tick's does."""

    def build(tx: UnitOfWork) -> Run:
        run = tx.create_run(NewRun(
            workflow="hello", platform="console", conversation="ops", thread=None,
            requester="console:ana", args_digest="0" * 64, status=RunStatus.RUNNING,
            lease_owner=by, lease_seconds=30.0, started_by=f"schedule:{sid}", scheduled_for=due,
            concurrency=Concurrency(key=key, limit=1, on_limit=OnLimit.QUEUE) if key else None,
        ))  # fmt: skip
        tx.audit(actor="console:ana", action="start", run_id=run.id, details={"by": by})
        tx.record_fire(Fire(schedule_id=sid, due_at=due, outcome=FireOutcome.STARTED, at=due + 0.1, by=by,
                            run_id=run.id, detail={}))  # fmt: skip
        return run

    return build


def _ids(n: int) -> list[str]:
    return [f"s{i:03d}" for i in range(n)]


def _runs_per_fire(store: Store, ids: Sequence[str], due: float) -> Counter[str]:
    runs = store.runs.recent_runs(limit=10 * len(ids))
    return Counter(r.started_by or "" for r in runs if r.scheduled_for == due)


def _check_one_run_per_fire(store: Store, ids: Sequence[str], due: float) -> dict[str, str]:
    """Each schedule fired once for `due`, by the run its fire names; that run alone has an
    audit row. The fire's `by` per schedule."""
    assert _runs_per_fire(store, ids, due) == Counter(f"schedule:{sid}" for sid in ids)
    by: dict[str, str] = {}
    for sid in ids:
        (fire,) = [f for f in store.schedules.schedule_fires(sid) if f.due_at == due]
        assert fire.run_id is not None
        run = store.runs.get_run(fire.run_id)
        assert (run.started_by, run.scheduled_for, run.lease_owner) == (f"schedule:{sid}", due, fire.by)
        assert [e.details["by"] for e in store.events.audit_log(run.id)] == [fire.by]
        by[sid] = fire.by
    return by


def test_units_keep_each_won_fire_and_undo_only_the_lost_ones(store: Store) -> None:
    ids = _ids(4)
    for sid in ids:
        store.schedules.add_schedule(_schedule(sid))
    assert store.schedules.record_fire(Fire(schedule_id="s001", due_at=100.0, outcome=FireOutcome.STARTED,
                                            at=100.1, by="peer", run_id=None, detail={}))  # fmt: skip
    with store.batch() as batch:
        out = batch.units([_start(ids[0], 100.0, "r1"), _start(ids[1], 100.0, "r1"),
                           _start(ids[2], 100.0, "r1", key="schedule:s002"), _start(ids[3], 100.0, "r1"),
                           _start(ids[3], 100.0, "r1")])  # fmt: skip
    assert [type(o) for o in out] == [Run, FireAlreadyRecorded, Run, Run, FireAlreadyRecorded]
    runs = {r.id: r for r in store.runs.recent_runs(limit=10)}
    assert set(runs) == {o.id for o in out if isinstance(o, Run)}
    assert all(r.status is RunStatus.RUNNING for r in runs.values())  # the keyed one admitted
    assert _check_one_run_per_fire(store, [ids[0], ids[2], ids[3]], 100.0) == dict.fromkeys(
        [ids[0], ids[2], ids[3]], "r1"
    )
    with store.batch() as batch:  # a repeated tick: every fire is taken, nothing is written
        again = batch.units([_start(sid, 100.0, "r2") for sid in ids], share=True)
    assert all(isinstance(o, FireAlreadyRecorded) for o in again)
    assert len(store.runs.recent_runs(limit=10)) == 3


@pytest.mark.postgres
def test_a_batch_leaves_the_fires_a_peers_batch_holds_to_it(migrated_postgres_url: str) -> None:
    """Two replicas' batches at the same time on one database, with `share`: the second
    does not wait for the first to lose the fires it holds; it leaves them (`FireBusy`) and
    fires the rest, and the first leaves the second's in turn. Each fire has one run."""
    ids = _ids(60)
    due = 1_000_000.0
    with SqlStore(migrated_postgres_url) as a, SqlStore(migrated_postgres_url) as b:
        a.migrate()
        for sid in ids:
            a.schedules.add_schedule(_schedule(sid))
        a_holds, b_holds, a_done = threading.Event(), threading.Event(), threading.Event()
        seen: dict[str, list[Run | BatonError]] = {}

        def replica_b() -> None:
            assert a_holds.wait(30)
            with b.batch() as batch:
                seen["b"] = batch.units([_start(sid, due, "r2") for sid in ids], share=True)
                b_holds.set()
                assert a_done.wait(30)

        thread = threading.Thread(target=replica_b)
        thread.start()
        try:
            with a.batch() as batch:
                seen["a1"] = batch.units([_start(sid, due, "r1") for sid in ids[:40]], share=True)
                a_holds.set()
                assert b_holds.wait(30)
                seen["a2"] = batch.units([_start(sid, due, "r1") for sid in ids[40:]], share=True)
        finally:
            a_done.set()
            thread.join(30)
        assert [type(o) for o in seen["a1"]] == [Run] * 40
        assert [type(o) for o in seen["b"]] == [FireBusy] * 40 + [Run] * 20
        assert [type(o) for o in seen["a2"]] == [FireBusy] * 20  # b holds them, uncommitted
        by = _check_one_run_per_fire(a, ids, due)
        assert Counter(by.values()) == {"r1": 40, "r2": 20}
        with a.batch() as batch:  # once b committed, they are taken: a later tick skips them
            assert all(isinstance(o, FireAlreadyRecorded) for o in batch.units(
                [_start(sid, due, "r1") for sid in ids[40:]], share=True))  # fmt: skip


@pytest.mark.postgres
@pytest.mark.parametrize("share", [True, False])
def test_two_stores_racing_on_the_same_fires_start_one_run_each(
    migrated_postgres_url: str, share: bool
) -> None:
    """Two stores fire the same 150 due times at once, in batches of 50, from different
    places (as two replicas' ticks do); whichever wins a fire, it has exactly one run, and
    every unit is either that run or the error that says why not."""
    ids = _ids(150)
    due = 2_000_000.0
    with SqlStore(migrated_postgres_url) as a, SqlStore(migrated_postgres_url) as b:
        a.migrate()
        for sid in ids:
            a.schedules.add_schedule(_schedule(sid))
        start = threading.Barrier(2, timeout=30)
        outcomes: dict[str, list[Run | BatonError]] = {"r1": [], "r2": []}

        def replica(store: SqlStore, name: str, order: list[str]) -> None:
            start.wait()
            for i in range(0, len(order), 50):
                builds = [_start(sid, due, name) for sid in sorted(order[i : i + 50])]
                with store.batch() as batch:
                    outcomes[name] += batch.units(builds, share=share)

        threads = [
            threading.Thread(target=replica, args=(a, "r1", ids[50:] + ids[:50])),
            threading.Thread(target=replica, args=(b, "r2", ids[100:] + ids[:100])),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        by = _check_one_run_per_fire(a, ids, due)
        for name, got in outcomes.items():
            assert len(got) == len(ids)
            won = [o for o in got if isinstance(o, Run)]
            assert len(won) == Counter(by.values())[name]
            allowed = (FireAlreadyRecorded, FireBusy) if share else (FireAlreadyRecorded,)
            assert all(isinstance(o, allowed) for o in got if not isinstance(o, Run))
