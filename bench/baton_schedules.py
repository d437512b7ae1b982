"""Lateness of schedule fires: `n` schedules due at the same instant, two replicas ticking.

    python -m bench.baton_schedules --dir D [--n 1000] [--db sqlite|postgres]

The parent writes `n` chat schedules (cron, each due at the same minute boundary) and a
one-step workflow (a prompt on the fake provider: no subprocess), then starts two replica
processes (`build_baton`, as `baton run` assembles them, each with its schedule loop) on the
one database. Each replica exits once every fire of that instant is recorded. The parent
reads the runs: lateness = the run's `created_at` - its `scheduled_for` (due -> run created,
p50 / p99 / max), fires per (schedule, due time) (must be 1) and the runs each replica started.
A tick creates its fires' runs in batches, one commit each, so a run's `created_at` (when its
unit was written) may precede its commit by up to a batch. `visible_*` is due -> the moment
the parent, polling the runs table every 20 ms, first saw the run committed (what a reader of
the database can see); `step_started_*` is due -> the run's first step started (its journal
entry, written after the commit, on an event loop that is busy starting the other runs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from bench.baton_outbox import _database, _pct
from bench.protocol import child_env, emit

HELLO = """
name: hello
nodes:
  - id: say
    prompt: "hi"
    replay: pure
"""


def _settings(url: str, directory: Path, replica: str) -> Any:
    from core.config import Settings

    return Settings(
        database_url=url,
        workflow_dirs=[directory / "workflows"],
        data_dir=directory / replica,
        tool_modules=[],
        replica_id=replica,
        prompt_provider="fake",
        schedule_poll_seconds=1.0,
        outbox_poll_seconds=5.0,
    )


def seed(url: str, directory: Path, n: int, lead: float) -> float:
    """`n` schedules due at the first minute boundary at least `lead` seconds away."""
    from core.store.records import Schedule
    from core.store.repository import SqlStore

    (directory / "workflows").mkdir(exist_ok=True)
    (directory / "workflows" / "hello.yaml").write_text(HELLO)
    now = time.time()
    due = math.ceil((now + lead) / 60) * 60
    minute, hour = time.gmtime(due).tm_min, time.gmtime(due).tm_hour
    with SqlStore(url) as store:
        store.migrate()
        for i in range(n):
            store.schedules.add_schedule(
                Schedule(
                    id=f"hello-{i:05d}",
                    workflow="hello",
                    source="chat",
                    cron=f"{minute} {hour} * * *",
                    every=None,
                    timezone="UTC",
                    args={"message": f"m{i}"},
                    overlap="allow",
                    catchup="none",
                    catchup_window=3600.0,
                    platform="console",
                    conversation="bench",
                    principal="console:bench",
                    owner="console:bench",
                    created_at=now,
                    updated_at=now,
                    evaluated_until=now,
                )
            )
    return float(due)


async def replica(url: str, directory: Path, name: str, due: float, n: int) -> None:
    from bot.app import build_baton
    from core.store.repository import SqlStore

    baton = build_baton(_settings(url, directory, name))
    watcher = SqlStore(url)
    try:
        async with baton.running(handle_signals=False, grace=30):
            print(json.dumps({"ready": name}), flush=True)
            deadline = due + 120
            while time.time() < deadline:
                await asyncio.sleep(0.5)  # the bench process watching the database, not a test
                sampled = range(0, n, max(1, n // 50))
                if time.time() > due and sum(
                    len(watcher.schedules.schedule_fires(f"hello-{i:05d}", 1)) for i in sampled
                ) >= len(sampled):
                    break
            recent = watcher.runs.recent_runs(limit=n * 2)
            for run in [r for r in recent if r.lease_owner == baton.engine.owner]:
                await baton.engine.wait(run.id, timeout=60)
    finally:
        watcher.close()
        baton.close()


def _watch(url: str, due: float, n: int, seen: dict[str, float], stop: threading.Event) -> None:
    """Record when each run of this fire first becomes visible to another connection."""
    import sqlalchemy as sa

    from core.store.database import normalize_url, open_engine

    engine = open_engine(normalize_url(url))
    query = sa.text("SELECT id FROM runs WHERE scheduled_for = :due")
    try:
        while not stop.is_set() and len(seen) < n:
            with engine.connect() as conn:
                ids = conn.execute(query, {"due": due}).scalars().all()
            now = time.time()
            for run_id in ids:
                seen.setdefault(run_id, now)
            time.sleep(0.02)
    finally:
        engine.dispose()


def measure(url: str, directory: Path, n: int) -> dict[str, Any]:
    from core.store.repository import SqlStore

    due = seed(url, directory, n, lead=15.0)
    seen: dict[str, float] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(url, due, n, seen, stop), daemon=True)
    watcher.start()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.baton_schedules",
                "--replica",
                name,
                "--url",
                url,
                "--dir",
                str(directory),
                "--due",
                str(due),
                "--n",
                str(n),
            ],
            env=child_env(),
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("r1", "r2")
    ]
    for proc in procs:
        proc.wait(timeout=600)
    stop.set()
    watcher.join(10)
    with SqlStore(url) as store:
        runs = [r for r in store.runs.recent_runs(limit=n * 3) if r.started_by and r.scheduled_for == due]
        fires = Counter(r.started_by for r in runs)
        late = [r.created_at - (r.scheduled_for or 0) for r in runs]
        firsts: dict[str, float] = {}
        ids = [r.id for r in runs]
        for i in range(0, len(ids), 200):
            for entry in store.steps.journal(ids[i : i + 200]):
                firsts[entry.run_id] = min(firsts.get(entry.run_id, math.inf), entry.started_at)
        stepped = [firsts[r.id] - (r.scheduled_for or 0) for r in runs if r.id in firsts]
        visible = [seen[r.id] - (r.scheduled_for or 0) for r in runs if r.id in seen]
        by_replica = Counter(
            f.by.split(":")[0]
            for i in range(n)
            for f in store.schedules.schedule_fires(f"hello-{i:05d}", 1)
            if f.due_at == due
        )
    return {
        "schedules": n,
        "runs": len(runs),
        "fired_once": len(runs) == n and max(fires.values(), default=0) == 1,
        "lateness_p50_s": round(statistics.median(late), 3) if late else None,
        "lateness_p99_s": round(_pct(late, 0.99), 3) if late else None,
        "lateness_max_s": round(max(late), 3) if late else None,
        "visible_p50_s": round(statistics.median(visible), 3) if visible else None,
        "visible_p99_s": round(_pct(visible, 0.99), 3) if visible else None,
        "runs_seen": len(visible),
        "step_started_p50_s": round(statistics.median(stepped), 3) if stepped else None,
        "step_started_p99_s": round(_pct(stepped, 0.99), 3) if stepped else None,
        "runs_with_a_step": len(stepped),
        "replicas": len(procs),
        "exit_codes": [p.returncode for p in procs],
        "fires_per_replica": dict(by_replica),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--replica")
    parser.add_argument("--url")
    parser.add_argument("--due", type=float)
    opts = parser.parse_args()
    if opts.replica:
        asyncio.run(replica(opts.url, opts.dir, opts.replica, opts.due, opts.n))
        return
    directory = opts.dir / uuid.uuid4().hex[:8]
    directory.mkdir(parents=True)
    with _database(opts.db, directory) as url:
        emit({"db": opts.db, **measure(url, directory, opts.n)})


if __name__ == "__main__":
    main()
