"""The `Schedules` role on every store (memory, SQLite, PostgreSQL): a fire is unique per
(schedule, due time), also inside the unit of work that creates its run (a lost fire creates
no run); schedule changes are compare-and-swaps; a YAML sync keeps a schedule's state."""

from __future__ import annotations

import pytest

from core.errors import FireAlreadyRecorded, ScheduleChanged, ScheduleNotFound
from core.store.port import Store
from core.store.records import Fire, FireOutcome, RunStatus, Schedule
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
    assert store.add_schedule(_schedule())
    assert not store.add_schedule(_schedule(workflow="other"))
    got = store.get_schedule("hello-ab12")
    assert got == _schedule()
    assert [s.id for s in store.list_schedules()] == ["hello-ab12"]
    with pytest.raises(ScheduleNotFound):
        store.get_schedule("nope")


def test_a_fire_is_written_once_per_due_time(store: Store) -> None:
    store.add_schedule(_schedule())
    assert store.record_fire(_fire(1_000_005.0, FireOutcome.SKIPPED))
    assert not store.record_fire(_fire(1_000_005.0, FireOutcome.MISSED))
    assert store.record_fire(_fire(1_000_010.0, FireOutcome.MISSED))
    fires = store.schedule_fires("hello-ab12")
    assert [(f.due_at, f.outcome) for f in fires] == [
        (1_000_010.0, FireOutcome.MISSED),
        (1_000_005.0, FireOutcome.SKIPPED),
    ]
    assert fires[1].detail == {"note": "x"}


def test_a_lost_fire_undoes_the_run_created_with_it(store: Store) -> None:
    """The unit of work that creates a fire's run holds the fire: of two, one run exists."""
    store.add_schedule(_schedule())
    with store.transaction() as tx:
        run = tx.create_run(
            workflow="hello",
            platform="console",
            conversation="ops",
            thread=None,
            requester="console:ana",
            args_digest="0" * 64,
            status=RunStatus.PENDING,
            started_by="schedule:hello-ab12",
            scheduled_for=1_000_005.0,
        )
        tx.record_fire(_fire(1_000_005.0, run_id=run.id))
    with pytest.raises(FireAlreadyRecorded), store.transaction() as tx:
        lost = tx.create_run(
            workflow="hello",
            platform="console",
            conversation="ops",
            thread=None,
            requester="console:ana",
            args_digest="0" * 64,
            status=RunStatus.PENDING,
            started_by="schedule:hello-ab12",
            scheduled_for=1_000_005.0,
        )
        tx.audit(actor="console:ana", action="start", run_id=lost.id)
        tx.record_fire(_fire(1_000_005.0, run_id=lost.id))
    kept = store.get_run(run.id)
    assert (kept.started_by, kept.scheduled_for) == ("schedule:hello-ab12", 1_000_005.0)
    assert [r.id for r in store.recent_runs(limit=10)] == [run.id]
    assert store.audit_log(lost.id) == []
    assert [r.id for r in store.active_runs("schedule:hello-ab12")] == [run.id]
    assert store.active_runs("schedule:other") == []
    store.transition(run.id, RunStatus.CANCELLED, actor="x")
    assert store.active_runs("schedule:hello-ab12") == []


def test_changes_are_compare_and_swaps(store: Store, clock: Clock) -> None:
    store.add_schedule(_schedule())
    first = store.get_schedule("hello-ab12")
    paused = store.change_schedule(first, paused=True, note="holiday", paused_by="console:ana")
    assert (paused.paused, paused.note, paused.version) == (True, "holiday", 2)
    with pytest.raises(ScheduleChanged):
        store.change_schedule(first, paused=False)
    with pytest.raises(ScheduleChanged):
        store.remove_schedule(first)
    store.advance_schedules({"hello-ab12": 1_000_100.0})
    store.advance_schedules({"hello-ab12": 1_000_050.0, "gone": 1.0})  # never back
    now = store.get_schedule("hello-ab12")
    assert (now.evaluated_until, now.version) == (1_000_100.0, 2)
    store.remove_schedule(now)
    with pytest.raises(ScheduleNotFound):
        store.change_schedule(now, paused=False)


def test_a_yaml_sync_adds_updates_keeps_state_and_removes(store: Store) -> None:
    a = _schedule("hello.nightly", source="yaml", owner=None)
    b = _schedule("hello.hourly", source="yaml", owner=None)
    chat = _schedule("hello-ab12")
    store.add_schedule(chat)
    assert sorted(store.sync_schedules([a, b])[0]) == ["hello.hourly", "hello.nightly"]
    assert store.sync_schedules([a, b]) == ([], [])  # unchanged: nothing written
    store.change_schedule(store.get_schedule("hello.nightly"), paused=True, note="by hand")
    store.advance_schedules({"hello.nightly": 1_000_500.0})
    touched, removed = store.sync_schedules([a.evolve(every=60.0, updated_at=1_000_600.0)])
    assert (touched, removed) == (["hello.nightly"], ["hello.hourly"])
    kept = store.get_schedule("hello.nightly")
    assert (kept.every, kept.paused, kept.note, kept.evaluated_until) == (60.0, True, "by hand", 1_000_500.0)
    assert sorted(s.id for s in store.list_schedules()) == ["hello-ab12", "hello.nightly"]  # chat ones stay
