"""Concurrency limits: what admission costs a run, and how fast a key's queue drains.

    python -m bench.baton_queue --dir D [--n 1000] [--drain 1000] [--db sqlite|postgres|both]

overhead  `n` runs created and brought to rest the way the engine does it (a unit creating the
          run `running` with its `start` audit row; a unit completing it with its outbox row),
          interleaved run by run on one database: unlimited, and with a concurrency key whose
          limit is never reached (admission decides, releases and finds nobody queued). Medians
          per run (create + rest); the difference is admission's overhead.
drain     `drain` runs of a one-step workflow (`limit: 4`, an inline pure tool) started through
          the real Engine at once (all but four queued), then drained: runs per second from the
          first start to the last completion, the most that were ever running at once, and
          whether the runs were admitted in the order they were queued (the audit's
          `admitted` rows against `queued_at`).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import textwrap
import time
from pathlib import Path
from typing import Any

from bench.baton_outbox import _database, _pct
from bench.protocol import emit
from bot import testing
from core.engine.events import EngineEvent, EventKind, tell_rest
from core.engine.tools import ToolRegistry
from core.store.port import NewRun, Transition
from core.store.records import Concurrency, RunStatus
from core.store.repository import SqlStore

LIMIT = 4
QUICK = """
name: quick
concurrency:
  limit: 4
  max_queued: 100000
nodes:
  - id: step
    tool: noop
"""


def overhead(url: str, n: int) -> dict[str, Any]:
    store = SqlStore(url)
    store.migrate()
    digest = store.blobs.put_blob(b"{}")
    keyed = Concurrency(key="bench-key", limit=1_000_000)

    def lifecycle(policy: Concurrency | None) -> float:
        began = time.perf_counter()
        with store.transaction() as tx:  # Engine.start_run's unit
            run = tx.create_run(NewRun(workflow="hello", platform="slack", conversation="C1", thread=None,
                                       requester="slack:U1", args_digest=digest, status=RunStatus.RUNNING,
                                       lease_owner="bench", lease_seconds=600,
                                       concurrency=policy))  # fmt: skip
            tx.audit(actor="slack:U1", action="start", run_id=run.id, details={"workflow": "hello"})
            made = tx.created(run.id)
        run = made.value  # as the engine has it: admitted (or queued), no read
        with store.transaction() as tx:  # Executions._drive's unit at rest
            tx.transition(Transition(run.id, RunStatus.COMPLETED, actor="baton", expected_version=run.version,
                                     allowed_from=[RunStatus.RUNNING]))  # fmt: skip
            tell_rest(tx, run.id, RunStatus.COMPLETED, reason=None)
        return (time.perf_counter() - began) * 1e6

    for _ in range(50):  # warm: statements compiled, pages cached
        lifecycle(None)
        lifecycle(keyed)
    times: dict[str, list[float]] = {"unlimited": [], "keyed": []}
    for _ in range(n):
        times["unlimited"].append(lifecycle(None))
        times["keyed"].append(lifecycle(keyed))
    store.close()
    out: dict[str, Any] = {k: {"median_us": statistics.median(v), "p99_us": _pct(v, 0.99)}
                           for k, v in times.items()}  # fmt: skip
    out["overhead_us"] = out["keyed"]["median_us"] - out["unlimited"]["median_us"]
    out["runs"] = n
    return out


async def drain(url: str, n: int, directory: Path) -> dict[str, Any]:
    store = SqlStore(url)
    store.migrate()
    workflows = directory / "workflows"
    workflows.mkdir()
    (workflows / "quick.yaml").write_text(textwrap.dedent(QUICK))
    tools = ToolRegistry()
    tools.tool("noop", replay="pure", inline=True)(lambda: "ok")
    engine = testing.build(directory, store=store, environ={}, tools=tools, replica_id="bench").engine
    running = 0
    most = 0
    done = asyncio.Event()
    finished = 0

    async def watch(event: EngineEvent) -> None:
        nonlocal running, most, finished
        if event.kind is EventKind.RUN_STARTED:
            running += 1
            most = max(most, running)
        elif event.kind is EventKind.RUN_FINISHED:
            running -= 1
            finished += 1
            if finished == n:
                done.set()

    engine.subscribe(watch)
    await engine.start()
    began = time.perf_counter()
    ids = []
    for _ in range(n):
        run = await engine.start_run(workflow="quick", args={}, platform="console", conversation="c",
                                     thread=None, requester="console:bench")  # fmt: skip
        ids.append(run.id)
    queued_at = time.perf_counter() - began
    await asyncio.wait_for(done.wait(), timeout=600)
    seconds = time.perf_counter() - began
    await engine.stop()
    runs = {r.id: r for r in store.runs.recent_runs(limit=n + 10)}
    statuses = {runs[i].status.value for i in ids}
    trail = store.events.audit_since(0)  # in commit order
    waited = [e.run_id for e in trail if e.action == "queued"]
    admitted = [e.run_id for e in trail if e.action == "admitted"]
    store.close()
    return {
        "runs": n, "limit": LIMIT, "seconds": seconds, "runs_per_s": n / seconds,
        "start_calls_s": queued_at, "most_running_at_once": most, "statuses": sorted(statuses),
        "queued": len(waited), "order_held": bool(waited) and admitted == waited,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--drain", type=int, default=1000)
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    opts = parser.parse_args()
    root: Path = opts.dir
    result: dict[str, Any] = {"overhead": {}, "drain": {}}
    for db in (["sqlite", "postgres"] if opts.db == "both" else [opts.db]):
        place = root / db
        place.mkdir(parents=True)
        with _database(db, place) as url:
            result["overhead"][db] = overhead(url, opts.n)
        place = root / f"drain-{db}"
        place.mkdir(parents=True)
        with _database(db, place) as url:
            result["drain"][db] = asyncio.run(drain(url, opts.drain, place))
    emit(result)


if __name__ == "__main__":
    main()
