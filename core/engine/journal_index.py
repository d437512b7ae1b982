"""An in-memory index of a run's journal and its lineage: the cache scope of one execution.

Built once per execution from a single `store.steps.journal(lineage)` query; every cache lookup
after that is a dictionary access. Rules:

- a result is served only from a `completed` entry whose key matches, in the run itself or
  in its lineage (`resumed_from` chain); the run's own entries win;
- an `invalidated` entry for a node at journal id N (from `store.invalidate`, or the marker
  that `Engine.invalidate` writes) hides every entry for that node with an id below N, in
  the whole lineage, so a lineage copy of an invalidated result is not served either;
- marker entries (empty cache key) carry decisions, never results;
- with cache retention (`expire`, `BATON_CACHE_RETENTION_DAYS`, `core/engine/cache_expiry.py`),
  a result of a node that may expire is not served when its key was last used (computed, or
  copied into a run that re-used it) before the cutoff: it misses with "cache entry expired".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from core.engine.cache_key import (
    CACHE_EXPIRED,
    EARLIER_ATTEMPT_FAILED,
    EARLIER_ATTEMPT_INTERRUPTED,
    MEMOIZE_FALSE,
    NO_EARLIER_RESULT,
    explain,
    legacy_match,
)
from core.store.records import MARKER_KEY, JournalEntry, NodeStatus

INVALIDATED_MARKER = "invalidated"  # components["marker"] of the entry `Engine.invalidate` writes
REJECTED_MARKER = "rejected"  # components["marker"] of the entry a rejected gate leaves
_OPEN = (NodeStatus.STARTED, NodeStatus.QUEUED)  # dispatched, not settled


def earlier_attempt(entry: JournalEntry) -> str:
    """Why an unfinished earlier attempt gives no result: it failed, or its process stopped
    (a crash, a kill: the entry was left open, or marked interrupted by the recovery)."""
    if entry.status in _OPEN or (entry.error or "").startswith("interrupted:"):
        return EARLIER_ATTEMPT_INTERRUPTED
    return EARLIER_ATTEMPT_FAILED


def is_cut(entry: JournalEntry) -> bool:
    """An entry that hides earlier results of its node: invalidated, or an invalidation marker."""
    if entry.status is NodeStatus.INVALIDATED:
        return True
    return entry.cache_key == MARKER_KEY and entry.components.get("marker") == INVALIDATED_MARKER


@dataclass(frozen=True, slots=True)
class Cut:
    entry_id: int
    by: str
    #: when (the store's clock): a gate decided before it decided for a result since dropped
    at: float = 0.0


def marker_actor(entry: JournalEntry) -> str:
    return entry.invalidated_by or str(entry.components.get("by") or "someone")


def _never(node_id: str) -> bool:
    return False


class JournalIndex:
    def __init__(self, run_id: str, entries: Iterable[JournalEntry]) -> None:
        self.run_id = run_id
        self._cuts: dict[str, Cut] = {}
        self._by_key: dict[str, JournalEntry] = {}  # served results, newest wins, own run first
        self._latest: dict[str, JournalEntry] = {}  # newest real entry per node (lineage)
        self._own: dict[str, JournalEntry] = {}  # newest real entry per node in this run
        self._attempts: dict[str, int] = {}
        self._used: dict[str, float] = {}  # cache key -> when a completed entry with it was last written
        self._expire_before: float | None = None
        self._expires: Callable[[str], bool] = _never
        ordered = sorted(entries, key=lambda e: e.id)
        for entry in ordered:
            if is_cut(entry):
                self._cuts[entry.node_id] = Cut(entry.id, marker_actor(entry), entry.started_at)
        for entry in ordered:
            self._add(entry)

    def _hidden(self, entry: JournalEntry) -> bool:
        cut = self._cuts.get(entry.node_id)
        return cut is not None and entry.id <= cut.entry_id

    def _add(self, entry: JournalEntry) -> None:
        if entry.cache_key == MARKER_KEY:
            return
        own = entry.run_id == self.run_id
        if own:
            self._attempts[entry.node_id] = max(self._attempts.get(entry.node_id, 0), entry.attempt)
        if self._hidden(entry) or entry.status is NodeStatus.INVALIDATED:
            return
        self._latest[entry.node_id] = entry
        if own:
            self._own[entry.node_id] = entry
        if entry.status is NodeStatus.COMPLETED:
            used = entry.finished_at or entry.started_at
            self._used[entry.cache_key] = max(self._used.get(entry.cache_key, used), used)
            current = self._by_key.get(entry.cache_key)
            if current is None or own or current.run_id != self.run_id:
                self._by_key[entry.cache_key] = entry

    def record(self, entry: JournalEntry) -> None:
        """Add an entry this execution wrote."""
        self._add(entry)

    def expire(self, before: float, expires: Callable[[str], bool]) -> None:
        """Stop serving results last used before `before` for the node ids `expires` accepts
        (which nodes may expire is `cache_expiry.expiring`'s decision, not the index's)."""
        self._expire_before = before
        self._expires = expires

    def expired(self, entry: JournalEntry) -> bool:
        """`entry`'s result may expire and was last used before the cutoff."""
        if self._expire_before is None or not self._expires(entry.node_id):
            return False
        used = self._used.get(entry.cache_key, entry.finished_at or entry.started_at)
        return used < self._expire_before

    # -- questions ---------------------------------------------------------------
    def own(self, node_id: str) -> JournalEntry | None:
        """The newest visible entry of `node_id` in this run itself."""
        return self._own.get(node_id)

    def dangling(self, node_id: str) -> JournalEntry | None:
        """This run's `started` (or, with distributed workers, `queued`) entry without a
        result: the process that dispatched it stopped before it was settled."""
        entry = self._own.get(node_id)
        return entry if entry is not None and entry.status in _OPEN else None

    def next_attempt(self, node_id: str) -> int:
        return self._attempts.get(node_id, 0) + 1

    def lookup(self, key: str) -> JournalEntry | None:
        """A completed, visible entry with this key (own run first) that has not expired, or None."""
        entry = self._by_key.get(key)
        return None if entry is None or self.expired(entry) else entry

    def own_legacy(self, node_id: str, components: Mapping[str, Any]) -> JournalEntry | None:
        """This run's completed entry of `node_id` recorded before identity components existed
        that is, but for them, the step with these `components` (`cache_key.legacy_match`):
        served to the run that recorded it, so a resume never runs a completed step again."""
        entry = self._own.get(node_id)
        if entry is None or entry.status is not NodeStatus.COMPLETED or entry.output_digest is None:
            return None
        if self.expired(entry):
            return None
        return entry if legacy_match(entry.components, components, entry.notes.keyed_identity) else None

    def latest(self, node_id: str) -> JournalEntry | None:
        """The newest visible entry of `node_id` in the run or its lineage."""
        return self._latest.get(node_id)

    def cut(self, node_id: str) -> Cut | None:
        return self._cuts.get(node_id)

    def miss_reason(self, node_id: str, key: str, components: Mapping[str, Any], *, memoize: bool) -> str:
        """Why `node_id` with this key is not served from the cache, in words."""
        if not memoize:
            return MEMOIZE_FALSE
        latest = self._latest.get(node_id)
        cut = self._cuts.get(node_id)
        if cut is not None and (latest is None or latest.id < cut.entry_id):
            return f"invalidated by {cut.by}"
        if latest is None:
            return NO_EARLIER_RESULT
        if latest.cache_key == key and latest.status is not NodeStatus.COMPLETED:
            return earlier_attempt(latest)
        served = self._by_key.get(key)
        if served is not None and self.expired(served):
            return CACHE_EXPIRED
        reason = explain(latest.components, components)
        if not reason:
            return earlier_attempt(latest) if latest.status is not NodeStatus.COMPLETED else NO_EARLIER_RESULT
        return reason
