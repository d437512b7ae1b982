"""The `Retention` role in memory (`MemoryStore` holds one): the same rules as
`retention_sql.py`, under the store's lock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from core.store.memory_ballots import MemoryBallots
from core.store.memory_unit import MemoryTables
from core.store.records import PRUNABLE, PruneCounts, Run


class MemoryRetention:
    def __init__(
        self, lock: threading.RLock, tables: MemoryTables, now: Callable[[], float], ballots: MemoryBallots
    ) -> None:
        self._lock = lock
        self._t = tables
        self._now = now
        self._ballots = ballots

    def _prunable(self, run: Run) -> bool:
        return (
            run.status in PRUNABLE
            and run.id not in self._t.pins
            and not any(other.resumed_from == run.id for other in self._t.runs.values())
            and (run.parent_run is None or run.parent_run not in self._t.runs)
        )

    def prunable_runs(self, before: float, limit: int = 500) -> list[str]:
        with self._lock:
            found = [r for r in self._t.runs.values() if r.updated_at < before and self._prunable(r)]
        return [r.id for r in sorted(found, key=lambda r: (r.created_at, r.id))[:limit]]

    def _still_prunable(self, run_ids: Sequence[str]) -> list[str]:
        return [i for i in dict.fromkeys(run_ids) if i in self._t.runs and self._prunable(self._t.runs[i])]

    def prune_counts(self, run_ids: Sequence[str]) -> PruneCounts:
        with self._lock:
            ids = set(self._still_prunable(run_ids))
            votes, deadlines = self._ballots.counts(ids)
            return PruneCounts(
                runs=len(ids),
                journal=sum(len(self._t.entries_of.get(i, ())) for i in ids),
                gates=sum(1 for (run_id, _) in self._t.gates if run_id in ids),
                votes=votes,
                deadlines=deadlines,
                outbox=sum(1 for row in self._t.outbox.values() if row.run_id in ids),
            )

    def prune_runs(self, run_ids: Sequence[str]) -> PruneCounts:
        with self._lock:
            counts = self.prune_counts(run_ids)
            ids = set(self._still_prunable(run_ids))
            now = self._now()
            for run_id in ids:
                run = self._t.runs.pop(run_id)
                self._t.pruned[run_id] = (run.workflow, run.status.value, now)
                self._t.sweep.setdefault(run.args_digest, now)
                for entry_id in self._t.entries_of.pop(run_id, []):
                    entry = self._t.journal.pop(entry_id)
                    for digest in [entry.output_digest, *entry.artifacts.values()]:
                        if digest:
                            self._t.sweep.setdefault(digest, now)
            for key in [k for k in self._t.gates if k[0] in ids]:
                del self._t.gates[key]
            for row_id in [k for k, row in self._t.outbox.items() if row.run_id in ids]:
                del self._t.outbox[row_id]
            for origin, runs in list(self._t.origin.items()):
                kept = [r for r in runs if r not in ids]
                if kept:
                    self._t.origin[origin] = kept
                else:
                    del self._t.origin[origin]
            self._ballots.drop_runs(ids)
        return counts

    def pruned_among(self, run_ids: Sequence[str]) -> set[str]:
        with self._lock:
            return {i for i in run_ids if i in self._t.pruned}

    def pin_run(self, run_id: str, by: str) -> bool:
        with self._lock:
            self._t.run(run_id)  # RunNotFound (or RunPruned)
            if run_id in self._t.pins:
                return False
            self._t.pins[run_id] = (by, self._now())
            return True

    def unpin_run(self, run_id: str) -> bool:
        with self._lock:
            return self._t.pins.pop(run_id, None) is not None

    def is_pinned(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._t.pins

    def sweep_blobs(self, marked_before: float, limit: int = 1000) -> int:
        with self._lock:
            batch = sorted((at, d) for d, at in self._t.sweep.items() if at < marked_before)[:limit]
            used = {r.args_digest for r in self._t.runs.values()}
            for entry in self._t.journal.values():
                used.add(entry.output_digest or "")
                used.update(entry.artifacts.values())
            deleted = 0
            for _, digest in batch:
                del self._t.sweep[digest]
                if digest not in used and self._t.blobs.pop(digest, None) is not None:
                    deleted += 1
        return deleted

    def forget_audit(self, before: float) -> int:
        with self._lock:
            old = [k for k, row in self._t.audit.items() if row.at < before]
            for k in old:
                del self._t.audit[k]
        return len(old)

    def count_audit(self, before: float) -> int:
        with self._lock:
            return sum(1 for row in self._t.audit.values() if row.at < before)
