"""Several replicas (real processes) on one PostgreSQL database.

- every chat event is delivered to all replicas (a retrying platform, a load balancer
  that duplicates): each is processed exactly once, by one replica;
- a replica is killed with kill -9 while it executes runs: the others recover them after
  the lease lapses, and every run completes with every step done once;
- SIGTERM: in-flight steps finish within the grace period; a step still running after it
  is left `started` (nothing marked done) and its run's lease is released at once, so a
  peer recovers it without waiting for the lease to lapse.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.store.records import NodeStatus, RunStatus
from core.store.repository import SqlStore
from tests.integration.scale.processes import Node, replica_options

pytestmark = pytest.mark.slow

PIPELINE = """
name: pipeline
nodes:
  - id: fetch
    bash: sleep 1; echo fetched >> {out}/{{{{ run.id }}}}.fetch; echo fetched
    replay: pure
  - id: build
    depends_on: [fetch]
    bash: sleep 0.3; echo built >> {out}/{{{{ run.id }}}}.build; echo "built {{{{ nodes.fetch.output }}}}"
    replay: idempotent
"""

GRACEFUL = """
name: graceful
nodes:
  - id: step
    bash: |
      echo start >> {out}/{{{{ inputs.message }}}}.log
      sleep {{{{ inputs.message }}}}
      echo done >> {out}/{{{{ inputs.message }}}}.log
    replay: pure
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "workflows").mkdir()
    (tmp_path / "out").mkdir()
    return tmp_path


@pytest.fixture
async def store(postgres_url: str) -> AsyncIterator[SqlStore]:
    s = SqlStore(postgres_url)
    s.migrate()
    yield s
    s.close()


async def _start_all(*options: dict) -> list[Node]:
    nodes = [await Node.spawn(o) for o in options]
    await asyncio.gather(*(n.wait_ready() for n in nodes))
    return nodes


async def test_events_are_processed_once_and_a_killed_replica_loses_no_run(
    root: Path, postgres_url: str, store: SqlStore
) -> None:
    (root / "workflows" / "pipeline.yaml").write_text(PIPELINE.format(out=root / "out"))
    nodes = await _start_all(
        *(replica_options(postgres_url, root, f"r{i}", lease=1.0) for i in range(3))
    )
    try:
        started: list[str] = []
        for n in range(6):  # the same event reaches all three replicas at once
            answers = await asyncio.gather(
                *(
                    node.request("say", text="run pipeline", event=f"Ev{n}", conversation=f"c{n}")
                    for node in nodes
                )
            )
            runs = [run for a in answers for _, run in a["replies"] if run]
            assert len({*runs}) == 1, answers
            assert sum(1 for a in answers if a["replies"]) == 1  # the others saw a duplicate
            started.append(runs[0])

        last_owner = store.runs.get_run(started[-1]).lease_owner  # surely still running
        [victim] = [node for node in nodes if node.ready == last_owner]
        owned = [r.id for r in store.runs.recent_runs(limit=20) if r.lease_owner == victim.ready]
        assert started[-1] in owned
        victim.kill()  # kill -9 while its runs are mid-flight
        await victim.exited()

        survivor = next(node for node in nodes if node is not victim)
        results = await asyncio.gather(*(survivor.request("wait", run=run, timeout=60) for run in started))
        assert [r["status"] for r in results] == ["completed"] * 6, results
        assert len(store.runs.recent_runs(limit=50)) == 6  # nothing lost, nothing doubled
        for run_id in started:
            run = store.runs.get_run(run_id)
            assert run.lease_owner is None and run.status is RunStatus.COMPLETED
            done = [e for e in store.steps.journal([run_id]) if e.status is NodeStatus.COMPLETED]
            assert sorted(e.node_id for e in done) == ["build", "fetch"]
            assert (root / "out" / f"{run_id}.build").read_text().count("built") >= 1
        interrupted = {e.run_id for e in store.steps.journal(started) if e.status is NodeStatus.FAILED}
        assert interrupted <= set(owned)  # only the victim's runs had a step to re-run
        assert {store.runs.get_run(r).status_by for r in owned} == {"baton"}
    finally:
        for node in nodes:
            await node.close()


async def test_sigterm_finishes_short_steps_and_releases_the_lease_of_long_ones(
    root: Path, postgres_url: str, store: SqlStore
) -> None:
    (root / "workflows" / "graceful.yaml").write_text(GRACEFUL.format(out=root / "out"))
    first = await Node.start(replica_options(postgres_url, root, "first", lease=30.0, grace=2.0))
    try:
        short = (await first.request("start", workflow="graceful", args={"message": "0.8"}))["run"]
        long = (await first.request("start", workflow="graceful", args={"message": "30"}))["run"]
        first.terminate()
        began = time.monotonic()
        assert await first.exited(20) == 0
        stopped_in = time.monotonic() - began

        assert store.runs.get_run(short).status is RunStatus.COMPLETED  # finished within the grace
        assert (root / "out" / "0.8.log").read_text().split() == ["start", "done"]
        interrupted = store.runs.get_run(long)
        assert interrupted.status is RunStatus.RUNNING  # not marked anything it was not
        assert interrupted.lease_expires_at is not None and interrupted.lease_expires_at <= time.time()
        [entry] = store.steps.journal([long])
        assert entry.status is NodeStatus.STARTED
        assert stopped_in < 10  # grace 2 s, not the 30 s step

        (root / "workflows" / "graceful.yaml").write_text(
            GRACEFUL.format(out=root / "out").replace("sleep {{ inputs.message }}", "true")
        )
        second = await Node.start(replica_options(postgres_url, root, "second", lease=2.0))
        try:
            result = await second.request("wait", run=long, timeout=30)
            assert result["status"] == "completed"  # a peer recovered it (pure: re-ran)
            assert [
                e.status for e in store.steps.journal([long])
            ] == [NodeStatus.FAILED, NodeStatus.COMPLETED]
        finally:
            await second.close()
    finally:
        await first.close()
