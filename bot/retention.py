"""Retention: old finished runs pruned in small batches, then the blobs only they referenced,
and the audit trail on its own clock (DESIGN.md "Retention", docs/operations.md).

    pruner = Pruner(store.retention, run_retention=30 * DAY)
    report = pruner.prune(dry_run=True)        # counts only; deletes nothing
    report = pruner.prune()                    # batches of `batch` runs, one transaction each

Given `data_dir`, every prune also deletes the run directories there (`<data_dir>/runs/<id>`:
long outputs, artifacts, whatever steps left) whose run was pruned, by this process or by any
other sharing the database (`Retention.pruned_among`: the tombstones); a worker, whose
directories no prune of its own finds, calls `sweep_directories` on its own clock.
Each batch is one short transaction (`Retention.prune_runs` decides again inside it which of
its runs may go), and the pruner rests after each batch for as long as the batch took (at least
`pause`), so a prune holds SQLite's write lock at most half the time and `status` or `run` wait
at most one batch. `baton prune` and
housekeeping (`bot/housekeeping.py`) both use it; several replicas may prune at once (a run
deleted by a peer simply does not count).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.engine.workdirs import remove_run_dir
from core.store.port import Retention
from core.store.records import PruneCounts

log = logging.getLogger("baton.retention")

DAY = 86_400.0
#: A blob a pruned run referenced is deleted this long after the prune, if nothing references
#: it by then: a run created meanwhile with the same args (or re-using the same output) keeps it.
SWEEP_GRACE = 3600.0
DIRECTORY_BATCH = 500  # run directories looked up at once


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What a prune did (or, dry, would do)."""

    cutoff: float | None  # runs last changed before this; None: run retention is off
    dry_run: bool
    counts: PruneCounts
    blobs: int = 0  # blobs swept (a dry run sweeps none)
    audit: int = 0  # audit rows forgotten (a dry run: how many would be)
    batches: int = 0
    directories: int = 0  # run directories deleted (a dry run deletes none)


class Pruner:
    def __init__(
        self,
        retention: Retention,
        *,
        run_retention: float | None,
        audit_retention: float | None = None,
        data_dir: Path | None = None,
        batch: int = 100,
        pause: float = 0.005,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.retention = retention
        self.run_retention = run_retention  # seconds; None: keep every run
        self.audit_retention = audit_retention  # seconds; None: keep the audit trail
        self.data_dir = data_dir  # whose `runs/<id>` directories go with their runs; None: kept
        self.batch = batch
        self.pause = pause
        self._clock = clock
        self._sleep = sleep

    @property
    def enabled(self) -> bool:
        return self.run_retention is not None or self.audit_retention is not None

    def prune(self, *, dry_run: bool = False, max_batches: int | None = None) -> PruneReport:
        """Prune (or count) every run past retention, batch by batch; then sweep blobs whose
        grace is over and forget old audit rows. `max_batches` bounds one housekeeping pass."""
        now = self._clock()
        cutoff = None if self.run_retention is None else now - self.run_retention
        counts, batches, seen = PruneCounts(), 0, set[str]()
        while cutoff is not None and (max_batches is None or batches < max_batches):
            prunable = self.retention.prunable_runs(cutoff, limit=self.batch + len(seen))
            ids = [i for i in prunable if i not in seen]
            ids = ids[: self.batch]
            if not ids:
                break
            started = time.perf_counter()
            if dry_run:
                counts += self.retention.prune_counts(ids)
                seen.update(ids)  # nothing is deleted: page past what was counted
            else:
                counts += self.retention.prune_runs(ids)
            batches += 1
            # let waiting writers in between two batches, for at least as long as the batch held
            # the lock: a prune takes at most half of the database's write time
            rest = max(self.pause, time.perf_counter() - started)
            if rest > 0:
                self._sleep(rest)
        blobs = 0 if dry_run else self._sweep(now)
        directories = 0 if dry_run else self.sweep_directories()
        audit = self._audit(now, dry_run)
        report = PruneReport(cutoff, dry_run, counts, blobs, audit, batches, directories)
        if not dry_run and (counts.runs or blobs or audit or directories):
            log.info(
                "pruned %d runs (%d run directories), %d blobs and %d audit rows",
                counts.runs,
                directories,
                blobs,
                audit,
                extra={"action": "prune", **counts.as_dict(), "blobs": blobs, "audit": audit,
                       "directories": directories},
            )
        return report

    def sweep_directories(self) -> int:
        """Delete the run directories under `data_dir` whose run was pruned (here or by a peer);
        one that cannot go is logged and left. How many went."""
        if self.data_dir is None:
            return 0
        try:
            with os.scandir(self.data_dir / "runs") as entries:
                names = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
        except FileNotFoundError:
            return 0
        removed = 0
        for at in range(0, len(names), DIRECTORY_BATCH):
            for run_id in sorted(self.retention.pruned_among(names[at : at + DIRECTORY_BATCH])):
                try:
                    removed += remove_run_dir(self.data_dir, run_id)
                except (OSError, ValueError) as exc:
                    log.warning("the directory of pruned run %s stays: %s", run_id, exc,
                                extra={"action": "prune_directory_failed", "run_id": run_id})
        return removed

    def _sweep(self, now: float) -> int:
        swept = 0
        while True:
            deleted = self.retention.sweep_blobs(now - SWEEP_GRACE, limit=1000)
            swept += deleted
            if not deleted:  # a batch of only re-referenced candidates deletes none: next pass
                return swept

    def _audit(self, now: float, dry_run: bool) -> int:
        if self.audit_retention is None:
            return 0
        before = now - self.audit_retention
        if dry_run:
            return self.retention.count_audit(before)
        return self.retention.forget_audit(before)
