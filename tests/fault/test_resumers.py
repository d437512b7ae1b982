"""32 processes resume the same failed run at the same moment: exactly one wins.

Each process has its own store and engine on the shared PostgreSQL database and calls
`Engine.resume` (the path a chat `resume` takes) right after a barrier. The losers get
`RunNotResumable` naming the winner; the winner's execution completes the run, and the
step that failed ran exactly once more.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest

from bot import testing
from core.engine.engine import Engine
from core.errors import BatonError
from core.store.records import RunStatus
from core.store.repository import SqlStore
from tests.integration.engine.harness import make_harness

pytestmark = pytest.mark.slow

RESUMERS = 32
TIMEOUT = 120.0

FLAKY = """
name: flaky
nodes:
  - id: once
    bash: echo try >> {out}/tries; [ -f {out}/fixed ] && echo fixed
    replay: pure
"""


def _engine(url: str, root: Path, n: int) -> Engine:
    store = SqlStore(url)  # migrated by the harness; each process opens its own
    return testing.build(root, store=store, replica_id=f"resumer-{n}",
                         data_dir=root / "data" / str(n)).engine  # fmt: skip


def _resumer(n: int, url: str, root: Path, run_id: str, barrier: Any, results: Any) -> None:
    async def go() -> dict[str, Any]:
        engine = _engine(url, root, n)
        engine.store.runs.get_run(run_id)  # connected and warm, so the race is tight
        barrier.wait(TIMEOUT)
        try:
            run = await engine.resume(run_id, actor=f"console:r{n}")
        except BatonError as exc:
            return {"n": n, "lost": type(exc).__name__, "by": getattr(exc, "by", None)}
        final = await engine.wait(run.id, timeout=60)
        await engine.stop()
        return {"n": n, "won": run.status.value, "final": final.status.value, "pid": os.getpid()}

    try:
        results.put(asyncio.run(go()))
    except Exception as exc:  # reported, never swallowed: the parent asserts on it
        results.put({"n": n, "error": f"{type(exc).__name__}: {exc}"})


def test_thirty_two_processes_resume_one_run_and_one_wins(tmp_path: Path, postgres_url: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    harness = make_harness(tmp_path, postgres_url)
    harness.write("flaky.yaml", FLAKY.format(out=out))
    failed = asyncio.run(harness.run("flaky"))
    asyncio.run(harness.engine.stop())
    harness.store.close()
    assert failed.status is RunStatus.FAILED
    (out / "fixed").touch()

    context = multiprocessing.get_context("fork")  # no re-import: 32 starts stay cheap
    barrier = context.Barrier(RESUMERS)
    results = context.Queue()
    procs = [
        context.Process(target=_resumer, args=(n, postgres_url, tmp_path, failed.id, barrier, results))
        for n in range(RESUMERS)
    ]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=TIMEOUT) for _ in procs]
    for proc in procs:
        proc.join(TIMEOUT)

    assert not [o for o in outcomes if "error" in o], outcomes
    winners = [o for o in outcomes if "won" in o]
    assert len(winners) == 1, winners
    [winner] = winners
    assert (winner["won"], winner["final"]) == ("running", "completed")
    losers = [o for o in outcomes if "lost" in o]
    assert len(losers) == RESUMERS - 1
    assert {o["lost"] for o in losers} == {"RunNotResumable"}
    assert all(o["by"] for o in losers)  # each loser is told who changed the run
    assert (out / "tries").read_text().split() == ["try", "try"]  # one failure, one resumed attempt

    store = SqlStore(postgres_url)
    try:
        run = store.runs.get_run(failed.id)
        assert run.status is RunStatus.COMPLETED
        assert [a.action for a in store.events.audit_log(failed.id)].count("resume") == 1
    finally:
        store.close()
