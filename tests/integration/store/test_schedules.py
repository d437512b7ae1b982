"""The `Schedules` role on every store (memory, SQLite, PostgreSQL): a fire is unique per
(schedule, due time), also inside the unit of work that creates its run (a lost fire creates
no run); schedule changes are compare-and-swaps; a YAML sync keeps a schedule's state."""

from __future__ import annotations

import pytest

from core.errors import FireAlreadyRecorded, ScheduleChanged, ScheduleNotFound
from core.store.port import NewRun, Store, Transition
from core.store.records import Concurrency, Fire, FireOutcome, OnLimit, Run, RunStatus, Schedule
from core.store.repository import SqlStore
from core.store.unit_of_work import Batch
from tests.integration.store.conftest import Clock


def _schedule(
    sid: str = "hello-ab12",
    *,
    source: str = "chat",
    every: float | None = 5.0,
    now: float = 1_000_000.0,
    **kw: object,
) -> Schedule:
    fields: dict[str, object] = dict(
        id=sid,
        workflow="hello",
        source=source,
        cron=None,
        every=every,
        timezone="UTC",
        args={"message": "hi"},
        overlap="skip",
        catchup="latest",
        catchup_window=3600.0,
        platform="console",
        conversation="ops",
        principal="console:ana",
        owner="console:ana",
        created_at=now,
        updated_at=now,
        evaluated_until=now,
    )
    fields.update(kw)
    return Schedule(**fields)  # type: ignore[arg-type]


def _fire(
    due: float, outcome: FireOutcome = FireOutcome.STARTED, run_id: str | None = None, sid: str = "hello-ab12"
) -> Fire:
    return Fire(
        schedule_id=sid,
        due_at=due,
        outcome=outcome,
        at=due + 0.1,
        by="r1",
        run_id=run_id,
        detail={"note": "x"},
    )


def test_add_get_list_and_a_taken_id(store: Store) -> None:
    assert store.schedules.add_schedule(_schedule())
    assert not store.schedules.add_schedule(_schedule(workflow="other"))
    got = store.schedules.get_schedule("hello-ab12")
    assert got == _schedule()
    assert [s.id for s in store.schedules.list_schedules()] == ["hello-ab12"]
    with pytest.raises(ScheduleNotFound):
        store.schedules.get_schedule("nope")


def test_a_fire_is_written_once_per_due_time(store: Store) -> None:
    store.schedules.add_schedule(_schedule())
    assert store.schedules.record_fire(_fire(1_000_005.0, FireOutcome.SKIPPED))
    assert not store.schedules.record_fire(_fire(1_000_005.0, FireOutcome.MISSED))
    assert store.schedules.record_fire(_fire(1_000_010.0, FireOutcome.MISSED))
    fires = store.schedules.schedule_fires("hello-ab12")
    assert [(f.due_at, f.outcome) for f in fires] == [
        (1_000_010.0, FireOutcome.MISSED),
        (1_000_005.0, FireOutcome.SKIPPED),
    ]
    assert fires[1].detail == {"note": "x"}


def test_latest_fires_reads_many_schedules_at_once(store: Store) -> None:
    for sid in ("a", "b", "c"):
        store.schedules.add_schedule(_schedule(sid))
    for sid, due in (("a", 5.0), ("a", 15.0), ("a", 10.0), ("b", 7.0)):
        assert store.schedules.record_fire(_fire(due, FireOutcome.MISSED, sid=sid))
    assert store.schedules.latest_fires(["a", "b", "c", "nope"]) == {"a": 15.0, "b": 7.0}
    assert store.schedules.latest_fires(["b"]) == {"b": 7.0}
    assert store.schedules.latest_fires([]) == {}


def test_a_lost_fire_undoes_the_run_created_with_it(store: Store) -> None:
    """The unit of work that creates a fire's run holds the fire: of two, one run exists."""
    store.schedules.add_schedule(_schedule())
    with store.transaction() as tx:
        run = tx.create_run(NewRun(
            workflow="hello",
            platform="console",
            conversation="ops",
            thread=None,
            requester="console:ana",
            args_digest="0" * 64,
            status=RunStatus.PENDING,
            started_by="schedule:hello-ab12",
            scheduled_for=1_000_005.0,
        ))
        tx.record_fire(_fire(1_000_005.0, run_id=run.id))
    with pytest.raises(FireAlreadyRecorded), store.transaction() as tx:
        lost = tx.create_run(NewRun(
            workflow="hello",
            platform="console",
            conversation="ops",
            thread=None,
            requester="console:ana",
            args_digest="0" * 64,
            status=RunStatus.PENDING,
            started_by="schedule:hello-ab12",
            scheduled_for=1_000_005.0,
        ))
        tx.audit(actor="console:ana", action="start", run_id=lost.id)
        tx.record_fire(_fire(1_000_005.0, run_id=lost.id))
    kept = store.runs.get_run(run.id)
    assert (kept.started_by, kept.scheduled_for) == ("schedule:hello-ab12", 1_000_005.0)
    assert [r.id for r in store.runs.recent_runs(limit=10)] == [run.id]
    assert store.events.audit_log(lost.id) == []
    assert [r.id for r in store.schedules.active_runs("schedule:hello-ab12")] == [run.id]
    assert store.schedules.active_runs("schedule:other") == []
    store.runs.transition(Transition(run.id, RunStatus.CANCELLED, actor="x"))
    assert store.schedules.active_runs("schedule:hello-ab12") == []


def _fired_run(batch: Batch, due: float, *, key: str | None = None) -> Run:
    """A unit of `batch` creating a running run with its fire, as a tick's fire does."""
    with batch.unit() as tx:
        run = tx.create_run(NewRun(
            workflow="hello", platform="console", conversation="ops", thread=None,
            requester="console:ana", args_digest="0" * 64, status=RunStatus.RUNNING,
            lease_owner="r1", lease_seconds=30.0, started_by="schedule:hello-ab12",
            scheduled_for=due,
            concurrency=Concurrency(key=key, limit=1, on_limit=OnLimit.QUEUE) if key else None,
        ))  # fmt: skip
        tx.audit(actor="console:ana", action="start", run_id=run.id)
        tx.record_fire(_fire(due, run_id=run.id))
        created = tx.created(run.id) if key else None
    return created.value if created is not None else run


def test_a_batch_of_fires_keeps_each_won_fire_and_undoes_only_a_lost_one(store: Store) -> None:
    """A tick's batch (`Store.batch`): a fire another replica recorded first undoes its own
    unit alone (no run, no audit row); the others' runs exist, keyed ones admitted or
    queued as in a unit of their own."""
    store.schedules.add_schedule(_schedule())
    assert store.schedules.record_fire(_fire(1_000_005.0, FireOutcome.STARTED))  # the other replica's
    lost: list[Run] = []
    with store.batch() as batch:
        first = _fired_run(batch, 1_000_000.0)
        with pytest.raises(FireAlreadyRecorded):
            lost.append(_fired_run(batch, 1_000_005.0))
        assert lost == []
        head = _fired_run(batch, 1_000_010.0, key="schedule:hello-ab12")
        behind = _fired_run(batch, 1_000_015.0, key="schedule:hello-ab12")
    assert (head.status, behind.status) == (RunStatus.RUNNING, RunStatus.QUEUED)  # limit 1, in order
    runs = {r.id: r for r in store.runs.recent_runs(limit=10)}
    assert set(runs) == {first.id, head.id, behind.id}
    assert runs[behind.id].status is RunStatus.QUEUED
    fires = {f.due_at: f.run_id for f in store.schedules.schedule_fires("hello-ab12")}
    assert fires == {1_000_000.0: first.id, 1_000_005.0: None, 1_000_010.0: head.id, 1_000_015.0: behind.id}
    assert all(store.events.audit_log(run_id) for run_id in runs)


def test_a_batch_commits_once_or_not_at_all(sql_store: SqlStore, database_url: str) -> None:
    """The units of a batch become visible together, when its block ends; an error in the
    block leaves none of them written."""
    store = sql_store
    store.schedules.add_schedule(_schedule())
    with store.batch() as batch:
        run = _fired_run(batch, 1_000_000.0)
        with SqlStore(database_url) as other:  # another process's view: nothing yet
            assert other.schedules.schedule_fires("hello-ab12") == []
            assert other.runs.recent_runs(limit=10) == []
    assert [r.id for r in store.runs.recent_runs(limit=10)] == [run.id]
    with pytest.raises(RuntimeError), store.batch() as batch:
        _fired_run(batch, 1_000_010.0)
        raise RuntimeError("the tick failed half-way")
    assert [f.due_at for f in store.schedules.schedule_fires("hello-ab12")] == [1_000_000.0]
    assert [r.id for r in store.runs.recent_runs(limit=10)] == [run.id]


def test_changes_are_compare_and_swaps(store: Store, clock: Clock) -> None:
    store.schedules.add_schedule(_schedule())
    first = store.schedules.get_schedule("hello-ab12")
    paused = store.schedules.change_schedule(first, paused=True, note="holiday", paused_by="console:ana")
    assert (paused.paused, paused.note, paused.version) == (True, "holiday", 2)
    with pytest.raises(ScheduleChanged):
        store.schedules.change_schedule(first, paused=False)
    with pytest.raises(ScheduleChanged):
        store.schedules.remove_schedule(first)
    store.schedules.advance_schedules({"hello-ab12": 1_000_100.0})
    store.schedules.advance_schedules({"hello-ab12": 1_000_050.0, "gone": 1.0})  # never back
    now = store.schedules.get_schedule("hello-ab12")
    assert (now.evaluated_until, now.version) == (1_000_100.0, 2)
    store.schedules.remove_schedule(now)
    with pytest.raises(ScheduleNotFound):
        store.schedules.change_schedule(now, paused=False)


def test_a_yaml_sync_adds_updates_keeps_state_and_removes(store: Store) -> None:
    a = _schedule("hello.nightly", source="yaml", owner=None)
    b = _schedule("hello.hourly", source="yaml", owner=None)
    chat = _schedule("hello-ab12")
    store.schedules.add_schedule(chat)
    assert sorted(store.schedules.sync_schedules([a, b])[0]) == ["hello.hourly", "hello.nightly"]
    assert store.schedules.sync_schedules([a, b]) == ([], [])  # unchanged: nothing written
    store.schedules.change_schedule(
        store.schedules.get_schedule("hello.nightly"), paused=True, note="by hand"
    )
    store.schedules.advance_schedules({"hello.nightly": 1_000_500.0})
    touched, removed = store.schedules.sync_schedules([a.evolve(every=60.0, updated_at=1_000_600.0)])
    assert (touched, removed) == (["hello.nightly"], ["hello.hourly"])
    kept = store.schedules.get_schedule("hello.nightly")
    assert (kept.every, kept.paused, kept.note, kept.evaluated_until) == (60.0, True, "by hand", 1_000_500.0)
    assert sorted(
        s.id for s in store.schedules.list_schedules()
    ) == ["hello-ab12", "hello.nightly"]  # chat ones stay
