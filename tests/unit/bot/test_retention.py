"""The pruner's batching on the in-memory store: a dry run counts every batch without deleting,
a prune goes batch by batch with a pause between (a waiting writer gets in), `max_batches`
bounds one housekeeping pass, and the audit trail is on its own clock."""

from __future__ import annotations

from pathlib import Path

from bot.retention import DAY, Pruner
from core.engine.workdirs import run_dirs
from core.store.memory import MemoryStore
from core.store.port import Transition
from core.store.records import RunStatus
from tests.factories import create_run

NOW = 2_000_000_000.0


def _store(finished: int, *, at: float) -> MemoryStore:
    store = MemoryStore(clock=lambda: at)
    for i in range(finished):
        run = create_run(
            store,
            workflow="w",
            platform="console",
            conversation="c",
            thread=None,
            requester="console:a",
            args_digest=store.blobs.put_blob(f"args{i}".encode()),
        )
        store.runs.transition(Transition(run.id, RunStatus.CANCELLED, actor="t"))
        store.events.audit(actor="t", action="cancel", run_id=run.id)
    return store


def test_a_dry_run_counts_every_batch_and_deletes_nothing() -> None:
    store = _store(7, at=NOW - 40 * DAY)
    sleeps: list[float] = []
    pruner = Pruner(store.retention, run_retention=30 * DAY, batch=3, clock=lambda: NOW, sleep=sleeps.append)
    report = pruner.prune(dry_run=True)
    assert (report.counts.runs, report.batches, report.dry_run) == (7, 3, True)
    assert len(store.runs.recent_runs(limit=100)) == 7


def test_a_prune_goes_batch_by_batch_with_a_pause_and_stops_at_max_batches() -> None:
    store = _store(7, at=NOW - 40 * DAY)
    sleeps: list[float] = []
    pruner = Pruner(
        store.retention, run_retention=30 * DAY, batch=3, pause=0.01, clock=lambda: NOW, sleep=sleeps.append
    )
    first = pruner.prune(max_batches=2)
    assert (first.counts.runs, first.batches) == (6, 2)
    assert len(sleeps) == 2 and all(s >= 0.01 for s in sleeps)
    assert len(store.runs.recent_runs(limit=100)) == 1
    assert pruner.prune().counts.runs == 1
    assert store.runs.recent_runs(limit=100) == []


def test_nothing_younger_than_the_retention_goes_and_the_audit_has_its_own_clock() -> None:
    store = _store(2, at=NOW - 10 * DAY)
    pruner = Pruner(
        store.retention, run_retention=30 * DAY, audit_retention=5 * DAY, clock=lambda: NOW,
        sleep=lambda _: None,
    )
    assert pruner.prune(dry_run=True).audit == 2
    report = pruner.prune()
    assert (report.counts.runs, report.audit) == (0, 2)
    assert len(store.runs.recent_runs(limit=100)) == 2
    assert store.events.audit_since(0) == []


def test_audit_retention_alone_keeps_every_run() -> None:
    store = _store(2, at=NOW - 400 * DAY)
    pruner = Pruner(
        store.retention, run_retention=None, audit_retention=30 * DAY, clock=lambda: NOW, sleep=lambda _: None
    )
    assert pruner.enabled
    report = pruner.prune()
    assert (report.counts.runs, report.cutoff, report.audit) == (0, None, 2)
    assert len(store.runs.recent_runs(limit=100)) == 2


def test_a_pruned_runs_directory_goes_with_it_and_a_kept_runs_stays(tmp_path: Path) -> None:
    store = _store(3, at=NOW - 40 * DAY)
    kept = create_run(store, workflow="w", platform="console", conversation="c", thread=None,
                      requester="console:a", args_digest=store.blobs.put_blob(b"kept"))  # still pending
    ids = [r.id for r in store.runs.recent_runs(limit=100)]
    for run_id in ids:
        (run_dirs(tmp_path, run_id).root / "out.log").write_text("x")
    pruner = Pruner(store.retention, run_retention=30 * DAY, data_dir=tmp_path, batch=2,
                    clock=lambda: NOW, sleep=lambda _: None)

    report = pruner.prune()

    assert (report.counts.runs, report.directories) == (3, 3)
    assert sorted(report.counts.ids) == sorted(i for i in ids if i != kept.id)
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [kept.id]
    assert pruner.prune(dry_run=True).directories == 0
