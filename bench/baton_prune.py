"""Retention: pruning a large history while people keep typing commands.

    python -m bench.baton_prune --dir D [--runs 1000000] [--batch 200]

A SQLite database is seeded with `runs` historical runs a month old (`bench/seed.py`: 98 % of
them finished, 2 % paused, one journal entry, one audit row each). Then, on one thread, the real
`Pruner` (`bot/retention.py`, what `baton prune` and housekeeping run) prunes every finished
run; on another, the store answers what `status` and `run` read and write, one after the other,
for as long as the prune lasts: `status` = find a run by prefix + its journal + its gates;
`run` = a new run, its transition to running and its audit row in one unit of work. The same
commands are timed before the prune (baseline). Sizes: the file before, after the prune, and
after `VACUUM` (the documented `--vacuum`). The paused runs of the history are counted before
and after (none may go), and the load average is noted at each phase (the machine is shared).

At 1,000,000 runs the seeding takes a few minutes (driver `executemany`, `bench/seed.py`) and
the prune tens of minutes on a busy 2-core machine; `make bench` (quick) prunes 20,000.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench.protocol import emit
from bench.seed import history_run_id, seed_history
from bot.retention import Pruner
from core.errors import RunNotFound
from core.store.port import NewRun, Transition
from core.store.records import RunStatus
from core.store.repository import SqlStore
from core.store.tables import RUNS


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))  # the db, -wal, -shm


def _commands(store: SqlStore, n_history: int, rng: random.Random, stop: threading.Event | None,
              limit: int) -> dict[str, list[float]]:  # fmt: skip
    took: dict[str, list[float]] = {"status": [], "run": []}
    while (stop is None or not stop.is_set()) and len(took["status"]) < limit:
        t0 = time.perf_counter()
        try:
            run = store.runs.find_run(history_run_id(rng.randrange(n_history)))
            store.steps.journal([run.id])
            store.gates.run_gates(run.id)
        except RunNotFound:  # pruned meanwhile: the tombstone answered, which is a command too
            pass
        took["status"].append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        with store.transaction() as tx:
            pending = tx.create_run(NewRun(
                workflow="hello", platform="slack", conversation="C0001", thread=None,
                requester="slack:U0001", args_digest="0" * 64,
            ))  # fmt: skip
        store.runs.transition(Transition(pending.id, RunStatus.RUNNING, actor="bench", lease_owner="bench"))
        store.events.audit(actor="slack:U0001", action="run", run_id=pending.id)
        took["run"].append((time.perf_counter() - t0) * 1000)
    return took


def _paused(store: SqlStore) -> int:
    query = sa.select(sa.func.count()).select_from(RUNS).where(RUNS.c.status == RunStatus.PAUSED.value)
    with store._engine.connect() as conn:  # the bench reads the table straight
        return int(conn.execute(query).scalar_one())


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _summary(values: list[float]) -> dict[str, float]:
    return {"p50_ms": statistics.median(values), "p99_ms": _pct(values, 0.99), "max_ms": max(values),
            "samples": len(values)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=100)
    opts = parser.parse_args()
    path = Path(opts.dir) / "baton.db"
    store = SqlStore(f"sqlite:///{path}")
    store.migrate()
    load = {"start": _load()}
    seeded_s = seed_history(store, opts.runs, platform="slack")
    paused_before = _paused(store)
    load["seeded"] = _load()
    rng = random.Random(3)
    baseline = _commands(store, opts.runs, rng, None, 300)
    size_before = _size(path)
    pruner = Pruner(store.retention, run_retention=7 * 86_400, batch=opts.batch)
    stop = threading.Event()
    result: dict[str, Any] = {}

    def prune() -> None:
        t0 = time.perf_counter()
        report = pruner.prune()
        result.update(seconds=time.perf_counter() - t0, runs=report.counts.runs, batches=report.batches,
                      journal=report.counts.journal)  # fmt: skip
        stop.set()

    worker = threading.Thread(target=prune)
    worker.start()
    during = _commands(store, opts.runs, rng, stop, 10_000_000)
    worker.join()
    load["pruned"] = _load()
    paused_after = _paused(store)
    store.close()
    size_after = _size(path)
    store = SqlStore(f"sqlite:///{path}")
    left = len(store.retention.prunable_runs(time.time(), limit=10))
    t0 = time.perf_counter()
    store.vacuum()
    vacuum_s = time.perf_counter() - t0
    store.close()
    emit({
        "runs": opts.runs, "batch": opts.batch, "seeded_s": seeded_s,
        "pruned": result["runs"], "journal": result["journal"], "batches": result["batches"],
        "prune_s": result["seconds"], "runs_per_s": result["runs"] / result["seconds"],
        "kept": paused_after, "paused_before": paused_before, "left_prunable": left,
        "created_meanwhile": len(during["run"]) + len(baseline["run"]), "load_avg_1m": load,
        "baseline": {k: _summary(v) for k, v in baseline.items()},
        "during": {k: _summary(v) for k, v in during.items()},
        "size_before_mb": size_before / 1e6, "size_after_mb": size_after / 1e6,
        "size_vacuumed_mb": _size(path) / 1e6, "vacuum_s": vacuum_s, "cpus": os.cpu_count(),
    })  # fmt: skip


if __name__ == "__main__":
    main()
