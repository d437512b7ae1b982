"""The hand-off from journal to queue survives a replica killed around it.

- killed *between* the journal write and the job's defer (inside the hand-off transaction):
  neither the `queued` entry nor the job exists; the replica that recovers the run
  dispatches the step once;
- killed *after* the hand-off committed, before any worker took the job: the recovering
  replica adopts the `queued` entry (it does not dispatch a second one); the step runs once.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import psycopg
import pytest

from core.store.database import pg_conninfo as conninfo
from core.store.records import NodeStatus, RunStatus
from core.store.repository import SqlStore
from tests.integration.scale.processes import Node, replica_options, worker_options

pytestmark = pytest.mark.slow

ONCE = """
name: once
nodes:
  - id: send
    bash: echo sent >> {out}/send.runs; echo sent
    replay: unsafe
  - id: after
    depends_on: [send]
    bash: echo "after {{{{ nodes.send.output }}}}"
    replay: pure
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "workflows").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "workflows" / "once.yaml").write_text(ONCE.format(out=tmp_path / "out"))
    return tmp_path


def _jobs(url: str) -> list[tuple[int, str, dict]]:
    with psycopg.connect(conninfo(url)) as conn:
        # node jobs only: the replicas' schedule ticker has jobs of its own (`<queue>-schedules`)
        rows = conn.execute(
            "SELECT id, status, args FROM procrastinate_jobs"
            " WHERE queue_name NOT LIKE '%-schedules' ORDER BY id"
        ).fetchall()
    return [(int(r[0]), str(r[1]), r[2]) for r in rows]


async def _recover_and_finish(root: Path, url: str, run_id: str) -> dict:
    worker = await Node.spawn(worker_options(url, root, "w1"))
    rescuer = await Node.spawn(replica_options(url, root, "rescuer", executor="procrastinate", lease=1.0))
    try:
        await asyncio.gather(worker.wait_ready(), rescuer.wait_ready())
        return await rescuer.request("wait", run=run_id, timeout=60)
    finally:
        await rescuer.close()
        await worker.close()


async def test_killed_between_the_journal_write_and_the_defer(
    root: Path, postgres_url: str, store: SqlStore
) -> None:
    replica = await Node.start(
        replica_options(postgres_url, root, "doomed", executor="procrastinate", lease=1.0, pause_handoff=True)
    )
    try:
        run_id = (await replica.request("start", workflow="once"))["run"]
        held = await replica.event()
        assert "handoff" in held, held
        replica.kill()  # inside the hand-off transaction
        await replica.exited()
    finally:
        await replica.close()

    assert all(e.id != held["handoff"] for e in store.steps.journal([run_id]))  # rolled back
    assert store.steps.journal([run_id]) == []
    assert _jobs(postgres_url) == []

    result = await _recover_and_finish(root, postgres_url, run_id)

    assert result["status"] == RunStatus.COMPLETED.value, result
    assert (root / "out" / "send.runs").read_text().split() == ["sent"]  # the unsafe step ran once
    [send] = [e for e in store.steps.journal([run_id]) if e.node_id == "send"]
    assert send.status is NodeStatus.COMPLETED
    assert _jobs(postgres_url) == []  # both jobs succeeded (workers delete succeeded jobs)


async def test_killed_after_the_hand_off_committed(root: Path, postgres_url: str, store: SqlStore) -> None:
    listener = await psycopg.AsyncConnection.connect(conninfo(postgres_url), autocommit=True)
    # the node jobs' queue only: the replicas' schedule ticker defers jobs of its own
    await listener.execute('LISTEN "procrastinate_queue_v1#baton"')
    options = replica_options(postgres_url, root, "doomed", executor="procrastinate", lease=1.0)
    replica = await Node.start(options)
    try:
        run_id = (await replica.request("start", workflow="once"))["run"]
        async with asyncio.timeout(30):
            notice = await anext(listener.notifies())  # the job was deferred and committed
        job_id = json.loads(notice.payload)["job_id"]
        replica.kill()
        await replica.exited()
    finally:
        await replica.close()
        await listener.close()

    [queued] = store.steps.journal([run_id])
    assert queued.status is NodeStatus.QUEUED
    [(job, status, args)] = _jobs(postgres_url)
    assert (job, status, args["job"]["entry_id"]) == (job_id, "todo", queued.id)

    result = await _recover_and_finish(root, postgres_url, run_id)

    assert result["status"] == RunStatus.COMPLETED.value, result
    assert (root / "out" / "send.runs").read_text().split() == ["sent"]
    sends = [e for e in store.steps.journal([run_id]) if e.node_id == "send"]
    assert [(e.id, e.status) for e in sends] == [(queued.id, NodeStatus.COMPLETED)]  # adopted, not re-sent
