"""The `Deliveries` role in memory (`MemoryStore` holds one): the same rules as
`outbox_sql.py`, under the store's lock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from core.store.memory_unit import MemoryTables
from core.store.records import Delivery


class MemoryDeliveries:
    def __init__(self, lock: threading.RLock, tables: MemoryTables, now: Callable[[], float]) -> None:
        self._lock = lock
        self._t = tables
        self._now = now

    def claim_deliveries(
        self, owner: str, platforms: Iterable[str], *, lease_seconds: float, limit: int = 20,
        run_id: str | None = None,
    ) -> list[Delivery]:
        places = set(platforms)
        with self._lock:
            now = self._now()
            waiting: set[tuple[str, str, str]] = set()  # (run, place) with an older undelivered row
            due: list[Delivery] = []
            for row in sorted(self._t.outbox.values(), key=lambda r: r.id):
                if row.delivered_at is not None:
                    continue
                place = (row.run_id, row.platform, row.conversation)
                first = place not in waiting
                waiting.add(place)
                unleased = row.lease_expires_at is None or row.lease_expires_at <= now
                mine = run_id in (None, row.run_id)
                if first and mine and row.due_at <= now and row.platform in places and unleased:
                    due.append(row)
            claimed = []
            for row in sorted(due, key=lambda r: (r.due_at, r.id))[:limit]:
                taken = row.evolve(claimed_by=owner, lease_expires_at=now + lease_seconds,
                                   attempts=row.attempts + 1)  # fmt: skip
                self._t.outbox[row.id] = taken
                claimed.append(taken)
            return claimed

    def _settle(self, delivery_id: int, owner: str, **changes: object) -> bool:
        with self._lock:
            row = self._t.outbox.get(delivery_id)
            if row is None or row.claimed_by != owner or row.delivered_at is not None:
                return False
            self._t.outbox[delivery_id] = row.evolve(**changes)
            return True

    def settle_delivery(self, delivery_id: int, owner: str) -> bool:
        return self._settle(delivery_id, owner, delivered_at=self._now(), lease_expires_at=None)

    def defer_delivery(self, delivery_id: int, owner: str, *, due_at: float, error: str) -> bool:
        return self._settle(delivery_id, owner, due_at=due_at, last_error=error[:2000], claimed_by=None,
                            lease_expires_at=None)  # fmt: skip

    def release_deliveries(self, owner: str) -> int:
        with self._lock:
            mine = [r for r in self._t.outbox.values() if r.claimed_by == owner and r.delivered_at is None]
            for row in mine:
                self._t.outbox[row.id] = row.evolve(claimed_by=None, lease_expires_at=None)
            return len(mine)

    def renew_delivery(self, delivery_id: int, owner: str, lease_seconds: float) -> bool:
        return self._settle(delivery_id, owner, lease_expires_at=self._now() + lease_seconds)

    def delivery_claimants(self, prefix: str) -> list[str]:
        with self._lock:
            now = self._now()
            return sorted({r.claimed_by for r in self._t.outbox.values()
                           if r.delivered_at is None and r.claimed_by is not None
                           and r.claimed_by.startswith(prefix)
                           and r.lease_expires_at is not None and r.lease_expires_at > now})

    def deliveries(self, run_id: str) -> list[Delivery]:
        with self._lock:
            return sorted((r for r in self._t.outbox.values() if r.run_id == run_id), key=lambda r: r.id)

    def undelivered(self, limit: int = 100) -> list[Delivery]:
        with self._lock:
            rows = sorted((r for r in self._t.outbox.values() if r.delivered_at is None), key=lambda r: r.id)
            return rows[:limit]

    def forget_deliveries(self, before: float) -> int:
        with self._lock:
            stale = [i for i, r in self._t.outbox.items()
                     if r.delivered_at is not None and r.delivered_at < before]
            for i in stale:
                del self._t.outbox[i]
            return len(stale)
