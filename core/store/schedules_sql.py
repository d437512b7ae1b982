"""`Schedules`: methods of `SqlStore` (a workflow's `schedules:` and those added in chat).

A fire's row is written by a unit of work (`record_fire`, with the run it starts): the
primary key (schedule, due time) makes it a compare-and-swap, so of replicas racing, one
writes each fire. Every change of a schedule is a compare-and-swap on its `version`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from core.errors import ScheduleChanged, ScheduleNotFound
from core.store.database import dialect_insert, store_operation
from core.store.records import Fire, Run, RunStatus, Schedule
from core.store.rows import fire_from_row, run_from_row, schedule_from_row
from core.store.sql_base import SqlDatabase
from core.store.tables import RUNS, SCHEDULE_FIRES, SCHEDULES

#: what a schedule's definition is (a YAML sync compares these); the rest is its state
DEFINITION = ("workflow", "cron", "every", "timezone", "args", "overlap", "catchup", "catchup_window",
              "platform", "conversation", "principal")
#: a run of a schedule that holds the overlap rule: not at rest for good
ACTIVE = (RunStatus.PENDING, RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.PAUSED, RunStatus.NEEDS_ATTENTION)


def schedule_values(schedule: Schedule) -> dict[str, Any]:
    return {f.name: getattr(schedule, f.name) for f in dataclasses.fields(schedule)}


def not_found(schedule_id: str) -> ScheduleNotFound:
    return ScheduleNotFound(f"No schedule has the id {schedule_id}.", schedule_id=schedule_id)


def changed(schedule_id: str) -> ScheduleChanged:
    return ScheduleChanged(f"Schedule {schedule_id} changed meanwhile; nothing was done.",
                           schedule_id=schedule_id)


class SchedulesSql:
    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    @store_operation("add a schedule")
    def add_schedule(self, schedule: Schedule) -> bool:
        """Insert it; False when a schedule has that id already."""
        insert = (dialect_insert(self._db.dialect)(SCHEDULES).values(schedule_values(schedule))
                  .on_conflict_do_nothing(index_elements=["id"]).returning(SCHEDULES.c.id))
        with self._db.engine.begin() as conn:
            return conn.execute(insert).first() is not None

    @store_operation("read a schedule")
    def get_schedule(self, schedule_id: str) -> Schedule:
        with self._db.single.connect() as conn:
            row = conn.execute(sa.select(SCHEDULES).where(SCHEDULES.c.id == schedule_id)).first()
        if row is None:
            raise not_found(schedule_id)
        return schedule_from_row(row)

    @store_operation("read the schedules")
    def list_schedules(self) -> list[Schedule]:
        with self._db.single.connect() as conn:
            return [schedule_from_row(r) for r in conn.execute(sa.select(SCHEDULES).order_by(SCHEDULES.c.id))]

    @store_operation("change a schedule")
    def change_schedule(self, schedule: Schedule, **changes: Any) -> Schedule:
        """CAS on `schedule.version`: the changed schedule, version + 1; ScheduleChanged when
        it changed since it was read, ScheduleNotFound when it is gone."""
        values = {**changes, "updated_at": self._db.now(), "version": schedule.version + 1}
        statement = (
            sa.update(SCHEDULES)
            .where(SCHEDULES.c.id == schedule.id, SCHEDULES.c.version == schedule.version)
            .values(values)
            .returning(*SCHEDULES.c)
        )
        with self._db.engine.begin() as conn:
            row = conn.execute(statement).first()
        if row is None:
            self.get_schedule(schedule.id)  # ScheduleNotFound when it is gone
            raise changed(schedule.id)
        return schedule_from_row(row)

    @store_operation("remove a schedule")
    def remove_schedule(self, schedule: Schedule) -> None:
        """CAS on `schedule.version` (ScheduleChanged / ScheduleNotFound, as `change_schedule`)."""
        statement = sa.delete(SCHEDULES).where(SCHEDULES.c.id == schedule.id,
                                               SCHEDULES.c.version == schedule.version)
        with self._db.engine.begin() as conn:
            gone = conn.execute(statement).rowcount == 1
        if not gone:
            self.get_schedule(schedule.id)
            raise changed(schedule.id)

    @store_operation("sync the workflows' schedules")
    def sync_schedules(self, schedules: Sequence[Schedule]) -> tuple[list[str], list[str]]:
        """Make the `yaml` schedules these: new ones added, changed definitions updated (state
        kept: paused, evaluated until), those no longer declared removed. Several replicas
        may sync at once (each change is conditional). (added or changed ids, removed ids)."""
        wanted = {s.id: s for s in schedules}
        with self._db.engine.begin() as conn:
            have = {r.id: schedule_from_row(r)
                    for r in conn.execute(sa.select(SCHEDULES).where(SCHEDULES.c.source == "yaml"))}
            touched: list[str] = []
            for sid, spec in wanted.items():
                old = have.get(sid)
                if old is None:
                    insert = (dialect_insert(self._db.dialect)(SCHEDULES).values(schedule_values(spec))
                              .on_conflict_do_nothing(index_elements=["id"]).returning(SCHEDULES.c.id))
                    if conn.execute(insert).first() is not None:
                        touched.append(sid)
                elif any(getattr(old, k) != getattr(spec, k) for k in DEFINITION):
                    update = (sa.update(SCHEDULES)
                              .where(SCHEDULES.c.id == sid, SCHEDULES.c.version == old.version)
                              .values({k: getattr(spec, k) for k in DEFINITION}
                                      | {"updated_at": spec.updated_at, "version": old.version + 1}))
                    if conn.execute(update).rowcount:
                        touched.append(sid)
            removed = sorted(set(have) - set(wanted))
            if removed:
                conn.execute(sa.delete(SCHEDULES).where(SCHEDULES.c.id.in_(removed),
                                                        SCHEDULES.c.source == "yaml"))
        return touched, removed

    @store_operation("advance schedules")
    def advance_schedules(self, untils: Mapping[str, float]) -> None:
        """Each schedule's `evaluated_until` moves forward to its value (never back; the
        version is unchanged), in one statement, in id order (two replicas' advances lock
        the rows they share in one order)."""
        if not untils:
            return
        statement = (sa.update(SCHEDULES)
                     .where(SCHEDULES.c.id == sa.bindparam("b_id"),
                            SCHEDULES.c.evaluated_until < sa.bindparam("b_until"))
                     .values(evaluated_until=sa.bindparam("b_until")))
        with self._db.engine.begin() as conn:
            conn.execute(statement, [{"b_id": k, "b_until": untils[k]} for k in sorted(untils)])

    @store_operation("record a schedule's fire")
    def record_fire(self, fire: Fire) -> bool:
        """Write the fire alone (a skip, a miss); False when that due time has a fire already."""
        values = dataclasses.asdict(fire) | {"outcome": fire.outcome.value}
        insert = (dialect_insert(self._db.dialect)(SCHEDULE_FIRES).values(values)
                  .on_conflict_do_nothing(index_elements=["schedule_id", "due_at"])
                  .returning(SCHEDULE_FIRES.c.schedule_id))
        with self._db.engine.begin() as conn:
            return conn.execute(insert).first() is not None

    @store_operation("read a schedule's fires")
    def schedule_fires(self, schedule_id: str, limit: int = 10) -> list[Fire]:
        """Its latest fires, latest due time first."""
        query = (sa.select(SCHEDULE_FIRES).where(SCHEDULE_FIRES.c.schedule_id == schedule_id)
                 .order_by(SCHEDULE_FIRES.c.due_at.desc()).limit(limit))
        with self._db.single.connect() as conn:
            return [fire_from_row(r) for r in conn.execute(query)]

    @store_operation("read schedules' latest fires")
    def latest_fires(self, schedule_ids: Iterable[str]) -> dict[str, float]:
        """The latest fire's due time per schedule, `_CHUNK` schedules a query."""
        ids = sorted(set(schedule_ids))
        c = SCHEDULE_FIRES.c
        latest: dict[str, float] = {}
        with self._db.single.connect() as conn:
            for i in range(0, len(ids), _CHUNK):
                query = (sa.select(c.schedule_id, sa.func.max(c.due_at))
                         .where(c.schedule_id.in_(ids[i : i + _CHUNK])).group_by(c.schedule_id))
                latest.update({sid: float(due) for sid, due in conn.execute(query)})
        return latest

    @store_operation("read a schedule's runs")
    def active_runs(self, started_by: str, statuses: Iterable[RunStatus] = ACTIVE) -> list[Run]:
        """Runs `started_by` started that are in one of `statuses` (default: not at rest for
        good), oldest first."""
        query = (sa.select(RUNS)
                 .where(RUNS.c.started_by == started_by, RUNS.c.status.in_([s.value for s in statuses]))
                 .order_by(RUNS.c.created_at))
        with self._db.single.connect() as conn:
            return [run_from_row(r) for r in conn.execute(query)]


_CHUNK = 500  # schedule ids per `latest_fires` query
