"""The pruner's batching on the in-memory store: a dry run counts every batch without deleting,
a prune goes batch by batch with a pause between (a waiting writer gets in), `max_batches`
bounds one housekeeping pass, and the audit trail is on its own clock."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from bot.retention import DAY, Pruner
from bot.worker import directory_sweeper
from core.config import Settings
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
    (tmp_path / "runs" / "not-a-run").mkdir()  # no run of that name was pruned: it stays
    pruner = Pruner(store.retention, run_retention=30 * DAY, data_dir=tmp_path, batch=2,
                    clock=lambda: NOW, sleep=lambda _: None)

    assert pruner.prune(dry_run=True).directories == 0
    report = pruner.prune()

    assert (report.counts.runs, report.directories) == (3, 3)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == sorted([kept.id, "not-a-run"])


def test_a_run_pruned_elsewhere_has_its_directory_here_swept(tmp_path: Path) -> None:
    """Another replica (or `baton prune` on another machine) pruned it; this process's disk,
    a worker's, still held its directory."""
    store = _store(2, at=NOW - 40 * DAY)
    ids = [r.id for r in store.runs.recent_runs(limit=100)]
    for run_id in ids:
        run_dirs(tmp_path, run_id)
    elsewhere = Pruner(store.retention, run_retention=30 * DAY, clock=lambda: NOW, sleep=lambda _: None)
    assert elsewhere.prune().counts.runs == 2 and elsewhere.prune().directories == 0  # no data_dir

    here = Pruner(store.retention, run_retention=30 * DAY, data_dir=tmp_path)
    assert here.sweep_directories() == 2
    assert list((tmp_path / "runs").iterdir()) == []
    assert Pruner(store.retention, run_retention=None, data_dir=tmp_path / "none").sweep_directories() == 0


async def test_a_worker_sweeps_its_directories_of_pruned_runs_on_its_own_clock(tmp_path: Path) -> None:
    store = _store(1, at=NOW - 40 * DAY)
    (run,) = store.runs.recent_runs(limit=10)
    run_dirs(tmp_path, run.id)
    store.retention.prune_runs([run.id])
    runtime = SimpleNamespace(store=store)
    assert directory_sweeper(runtime, Settings(data_dir=tmp_path)) is None  # no run retention
    sweeper = directory_sweeper(runtime, Settings(data_dir=tmp_path, run_retention_days=30))
    assert sweeper is not None
    await sweeper.start()
    try:
        await sweeper.wait_until(lambda: sweeper.ticks > 0, timeout=10)
    finally:
        await sweeper.stop()
    assert list((tmp_path / "runs").iterdir()) == []
