"""The `Subscriptions` role in memory (`MemoryStore` holds one): the same rules as
`subscriptions_sql.py`, under the store's lock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from core.store.records import Subscription

Key = tuple[str, str, str, str]  # platform, conversation, workflow, event


class MemorySubscriptions:
    def __init__(self, lock: threading.RLock, now: Callable[[], float]) -> None:
        self._lock = lock
        self._now = now
        self._rows: dict[Key, Subscription] = {}

    def subscribe(
        self, platform: str, conversation: str, workflow: str, events: Iterable[str], *, by: str
    ) -> list[Subscription]:
        with self._lock:
            now = self._now()
            for event in sorted(set(events)):
                key = (platform, conversation, workflow, event)
                old = self._rows.get(key)
                self._rows[key] = (old.evolve(created_by=by) if old is not None else Subscription(
                    platform, conversation, workflow, event, created_by=by, created_at=now))  # fmt: skip
            return self.subscriptions(platform=platform, conversation=conversation, workflow=workflow)

    def unsubscribe(
        self, platform: str, conversation: str, workflow: str | None = None,
        events: Iterable[str] | None = None,
    ) -> int:
        wanted = None if events is None else set(events)
        with self._lock:
            gone = [k for k in self._rows if k[:2] == (platform, conversation)
                    and workflow in (None, k[2]) and (wanted is None or k[3] in wanted)]  # fmt: skip
            for key in gone:
                del self._rows[key]
            return len(gone)

    def subscriptions(
        self, *, platform: str | None = None, conversation: str | None = None, workflow: str | None = None
    ) -> list[Subscription]:
        with self._lock:
            return [row for key, row in sorted(self._rows.items())
                    if platform in (None, key[0]) and conversation in (None, key[1])
                    and (workflow is None or key[2] in (workflow, "*"))]  # fmt: skip
