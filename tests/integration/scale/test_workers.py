"""`baton worker` processes: graceful shutdown on SIGTERM.

- a step in flight finishes within the grace period and is recorded `completed`; the worker
  takes no new step after the signal; another worker continues the run;
- a step still running when the grace period ends is stopped and left `started` (nothing
  marked done that was not); the replica sees its job end, settles the entry `failed`
  (interrupted) and, the step being pure, has it run again on another worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.store.records import NodeStatus, RunStatus
from core.store.repository import SqlStore
from tests.integration.scale.processes import Node, replica_options, worker_options
from tests.integration.step_signals import StepSignals

pytestmark = pytest.mark.slow

TWO_STEPS = """
name: two
nodes:
  - id: first
    bash: |
      echo "start $PPID" >> {out}/first.log
      timeout 5 sh -c "echo first $PPID > {fifo}"
      [ -f {out}/release ] || sleep {seconds}
      echo "done $PPID" >> {out}/first.log
      echo first
    replay: pure
  - id: second
    depends_on: [first]
    bash: echo "second $PPID" >> {out}/second.log; echo second
    replay: pure
"""


@pytest.fixture
async def signals(tmp_path: Path) -> AsyncIterator[StepSignals]:
    s = StepSignals(tmp_path / "steps.fifo")
    yield s
    s.close()


def _setup(root: Path, fifo: Path, seconds: float) -> None:
    (root / "workflows").mkdir()
    (root / "out").mkdir()
    text = TWO_STEPS.format(out=root / "out", fifo=fifo, seconds=seconds)
    (root / "workflows" / "two.yaml").write_text(text)


async def _cluster(url: str, root: Path, grace: float) -> tuple[Node, Node]:
    options = replica_options(url, root, "r1", executor="procrastinate", lease=5.0, heartbeat=0.5)
    replica = await Node.spawn(options)
    worker = await Node.spawn(worker_options(url, root, "w1", grace=grace, heartbeat=0.5))
    await asyncio.gather(replica.wait_ready(), worker.wait_ready())
    return replica, worker


async def test_sigterm_lets_the_step_in_flight_finish(
    tmp_path: Path, postgres_url: str, store: SqlStore, signals: StepSignals
) -> None:
    _setup(tmp_path, signals.path, seconds=1.5)
    replica, first_worker = await _cluster(postgres_url, tmp_path, grace=20.0)
    second_worker: Node | None = None
    try:
        run_id = (await replica.request("start", workflow="two"))["run"]
        pid = await signals.wait_for("first", timeout=60)
        first_worker.terminate()
        assert await first_worker.exited(30) == 0

        assert (tmp_path / "out" / "first.log").read_text().split() == ["start", pid, "done", pid]
        [first] = [e for e in store.steps.journal([run_id]) if e.node_id == "first"]
        assert first.status is NodeStatus.COMPLETED
        assert not (tmp_path / "out" / "second.log").exists()  # the stopping worker took nothing new

        second_worker = await Node.start(worker_options(postgres_url, tmp_path, "w2"))
        result = await replica.request("wait", run=run_id, timeout=60)
        assert result["status"] == RunStatus.COMPLETED.value
        [line] = (tmp_path / "out" / "second.log").read_text().splitlines()
        assert line == f"second {second_worker.proc.pid}"
    finally:
        for node in (replica, first_worker, second_worker):
            if node is not None:
                await node.close()


async def test_a_step_past_the_grace_period_is_left_started_and_runs_again_elsewhere(
    tmp_path: Path, postgres_url: str, store: SqlStore, signals: StepSignals
) -> None:
    _setup(tmp_path, signals.path, seconds=60)
    replica, first_worker = await _cluster(postgres_url, tmp_path, grace=0.5)
    second_worker: Node | None = None
    try:
        run_id = (await replica.request("start", workflow="two"))["run"]
        await signals.wait_for("first", timeout=60)
        first_worker.terminate()
        assert await first_worker.exited(30) == 0  # 0.5 s grace, not the 60 s step

        interrupted = next(e for e in store.steps.journal([run_id]) if e.node_id == "first")
        # left `started`, or already settled `failed` by the replica that saw its job end
        assert interrupted.status in (NodeStatus.STARTED, NodeStatus.FAILED)  # never `completed`
        assert "done" not in (tmp_path / "out" / "first.log").read_text()

        (tmp_path / "out" / "release").touch()
        second_worker = await Node.start(worker_options(postgres_url, tmp_path, "w2"))
        result = await replica.request("wait", run=run_id, timeout=60)

        assert result["status"] == RunStatus.COMPLETED.value
        firsts = [e for e in store.steps.journal([run_id]) if e.node_id == "first"]
        assert [e.status for e in firsts] == [NodeStatus.FAILED, NodeStatus.COMPLETED]
        assert "interrupted" in (firsts[0].error or "")
    finally:
        for node in (replica, first_worker, second_worker):
            if node is not None:
                await node.close()
