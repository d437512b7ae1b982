"""The `Schedules` role in memory (`MemoryStore` holds one): the same rules as
`schedules_sql.py`, under the store's lock."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from core.store.memory_unit import MemoryTables, copied
from core.store.records import Fire, Run, RunStatus, Schedule
from core.store.schedules_sql import ACTIVE, DEFINITION, changed, not_found


class MemorySchedules:
    def __init__(self, lock: threading.RLock, tables: MemoryTables, now: Callable[[], float]) -> None:
        self._lock = lock
        self._t = tables
        self._now = now

    def add_schedule(self, schedule: Schedule) -> bool:
        with self._lock:
            if schedule.id in self._t.schedules:
                return False
            self._t.schedules[schedule.id] = schedule.evolve(args=copied(schedule.args))
            return True

    def get_schedule(self, schedule_id: str) -> Schedule:
        with self._lock:
            found = self._t.schedules.get(schedule_id)
        if found is None:
            raise not_found(schedule_id)
        return found

    def list_schedules(self) -> list[Schedule]:
        with self._lock:
            return sorted(self._t.schedules.values(), key=lambda s: s.id)

    def change_schedule(self, schedule: Schedule, **changes: Any) -> Schedule:
        with self._lock:
            now = self.get_schedule(schedule.id)
            if now.version != schedule.version:
                raise changed(schedule.id)
            new = now.evolve(**changes, updated_at=self._now(), version=now.version + 1)
            self._t.schedules[schedule.id] = new
            return new

    def remove_schedule(self, schedule: Schedule) -> None:
        with self._lock:
            now = self.get_schedule(schedule.id)
            if now.version != schedule.version:
                raise changed(schedule.id)
            del self._t.schedules[schedule.id]

    def sync_schedules(self, schedules: Sequence[Schedule]) -> tuple[list[str], list[str]]:
        wanted = {s.id: s for s in schedules}
        touched: list[str] = []
        with self._lock:
            have = {k: v for k, v in self._t.schedules.items() if v.source == "yaml"}
            for sid, spec in wanted.items():
                old = have.get(sid)
                if old is None:
                    if sid not in self._t.schedules:
                        self._t.schedules[sid] = spec.evolve(args=copied(spec.args))
                        touched.append(sid)
                elif any(getattr(old, k) != getattr(spec, k) for k in DEFINITION):
                    self._t.schedules[sid] = old.evolve(
                        **{k: getattr(spec, k) for k in DEFINITION}, updated_at=spec.updated_at,
                        version=old.version + 1)
                    touched.append(sid)
            removed = sorted(set(have) - set(wanted))
            for sid in removed:
                del self._t.schedules[sid]
        return touched, removed

    def advance_schedules(self, untils: Mapping[str, float]) -> None:
        with self._lock:
            for schedule_id, until in untils.items():
                now = self._t.schedules.get(schedule_id)
                if now is not None and now.evaluated_until < until:
                    self._t.schedules[schedule_id] = now.evolve(evaluated_until=until)

    def record_fire(self, fire: Fire) -> bool:
        with self._lock:
            key = (fire.schedule_id, fire.due_at)
            if key in self._t.fires:
                return False
            self._t.fires[key] = fire.evolve(detail=copied(fire.detail))
            return True

    def schedule_fires(self, schedule_id: str, limit: int = 10) -> list[Fire]:
        with self._lock:
            mine = [f for (sid, _), f in self._t.fires.items() if sid == schedule_id]
        return sorted(mine, key=lambda f: f.due_at, reverse=True)[:limit]

    def latest_fires(self, schedule_ids: Iterable[str]) -> dict[str, float]:
        wanted = set(schedule_ids)
        latest: dict[str, float] = {}
        with self._lock:
            for sid, due in self._t.fires:
                if sid in wanted and due > latest.get(sid, -math.inf):
                    latest[sid] = due
        return latest

    def active_runs(self, started_by: str, statuses: Iterable[RunStatus] = ACTIVE) -> list[Run]:
        wanted = set(statuses)
        with self._lock:
            runs = [r for r in self._t.runs.values() if r.started_by == started_by and r.status in wanted]
        return sorted(runs, key=lambda r: r.created_at)
