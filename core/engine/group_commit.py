"""Group commit: the results of pure steps are journaled in batches, one commit per batch.

A pure inline step has no side effect, so its `completed` entry need not be durable the
moment it is written: a crash before the batch is committed only means recovery runs the
step again, which DESIGN.md's replay table already allows. On SQLite with
`synchronous=FULL` every commit is an fsync; committing a chain of pure
steps every `window` seconds instead of every step removes most of them.

A batch is committed, oldest entry first, whichever comes first:
    * `window` seconds after its first entry (a timer, so an idle executor commits too);
    * when it holds `limit` entries;
    * together with a result that must be durable at once (`commit_with`: idempotent steps);
    * before the executor writes anything else (`flush`: a `started` entry, a gate, a cache
      hit) and when the execution ends, however it ends.
So everything journaled after a step is committed after it, and a `started` entry of an
unsafe step is never durable before the results it consumed. `window = 0` commits every
result on its own (the behaviour before group commit).
"""

from __future__ import annotations

import asyncio
import logging
import time

from core.errors import StoreError
from core.store.port import Journal, StepResult

log = logging.getLogger("baton.engine")


class PendingResults:
    """The executor's not-yet-committed `completed` entries."""

    def __init__(self, store: Journal, window: float, *, limit: int = 512) -> None:
        self._store = store
        self._window = window
        self._limit = limit
        self._items: list[StepResult] = []
        self._since = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._items)

    def add(self, result: StepResult) -> None:
        """A result that may wait up to `window` seconds for its commit (a pure step)."""
        if not self._items:
            self._since = time.monotonic()
        self._items.append(result)
        if len(self._items) >= self._limit or time.monotonic() - self._since >= self._window:
            self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._window, self._on_timer)

    def commit_with(self, result: StepResult) -> None:
        """A result that must be durable now: committed with everything pending, in one go."""
        self._items.append(result)
        self.flush()

    def flush(self) -> None:
        """Commit everything pending (one transaction). On failure nothing is lost: the
        results stay pending and the error propagates."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._items:
            return
        items, self._items = self._items, []
        try:
            self._store.journal_complete_many(items)
        except BaseException:
            self._items[:0] = items
            raise

    def _on_timer(self) -> None:
        self._timer = None
        try:
            self.flush()
        except StoreError as exc:  # the executor's next write or its end flushes again
            log.warning("group commit of %d results failed, will retry: %s", len(self._items), exc.message)
