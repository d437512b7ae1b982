"""Two processes recover the same lapsed run at the same moment: exactly one wins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.errors import RunNotResumable
from core.store.records import RunStatus
from core.store.repository import SqlStore
from tests.factories import create_run
from tests.integration.crash.child import read_line, start_runner

pytestmark = pytest.mark.slow


async def test_two_processes_recover_one_lapsed_run_and_one_wins(tmp_path: Path, database_url: str) -> None:
    root = tmp_path / "bot"
    (root / "workflows").mkdir(parents=True)
    (root / "workflows" / "tiny.yaml").write_text(
        "name: tiny\nnodes:\n  - id: only\n    bash: echo $BATON_RUN_ID\n    replay: pure\n"
    )
    store = SqlStore(database_url)
    store.migrate()
    args = store.blobs.put_blob(b'{"message":""}')
    orphan = create_run(
        store,
        workflow="tiny",
        platform="console",
        conversation="race",
        thread=None,
        requester="console:ana",
        args_digest=args,
        status=RunStatus.RUNNING,
        lease_owner="gone-host:4242:dead",
        lease_seconds=0.001,
    )

    racers = [await start_runner("race", database_url, str(root), f"replica-{n}") for n in (1, 2)]
    for proc in racers:
        assert await read_line(proc) == "ready"
    for proc in racers:
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        await proc.stdin.drain()
    results = [json.loads(await read_line(proc)) for proc in racers]
    for proc in racers:
        await proc.wait()

    winners = [r["won"] for r in results if r["won"]]
    assert winners == [[orphan.id]]
    final = store.runs.get_run(orphan.id)
    assert final.status is RunStatus.COMPLETED
    assert final.version == orphan.version + 2  # one take-over, one completion
    assert len([e for e in store.steps.journal([orphan.id]) if e.node_id == "only"]) == 1
    with pytest.raises(RunNotResumable):  # the stale view of the orphan can no longer be taken
        store.leases.take_over(orphan, "late:1:x", 15)
    store.close()
