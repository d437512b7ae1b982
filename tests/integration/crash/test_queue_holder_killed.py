"""kill -9 the process executing the run that holds a concurrency key's only slot: the run
keeps its slot (nothing queued starts while it is orphaned), lease recovery continues it, and
when it comes to rest the queue drains in order, one run at a time. Through the real `baton`
executable on SQLite and PostgreSQL."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.store.records import RunStatus
from core.store.repository import SqlStore
from tests.e2e.console.cli import BatonCli, run_ids

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

HOLDER = """\
name: holder
concurrency:
  limit: 1
nodes:
  - id: hold
    bash: |
      echo $$ >> {out}/pids
      echo run >> {out}/$BATON_RUN_ID.runs
      [ -f {out}/release ] || exec sleep 60
      echo held
    replay: pure
"""


def wait_for(predicate, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def test_kill_9_of_the_slot_holder_keeps_its_slot_then_the_queue_drains(
    tmp_path: Path, database_url: str
) -> None:
    baton = BatonCli.create(tmp_path, database_url)
    # the steps leave pids and markers in the test's /tmp directory, which the step sandbox
    # hides, and the test kills the holder's step by its host pid: run them unsandboxed
    baton.env_extra["BATON_STEP_SANDBOX"] = "none"
    out = tmp_path / "out"
    out.mkdir()
    (baton.workflows / "holder.yaml").write_text(HOLDER.format(out=out))

    args = ["say", "--json", "--conversation", "ops", "--user", "ana", "--wait", "--", 'run holder "first"']
    holder = subprocess.Popen([sys.executable, "-m", "bot.main", *args], cwd=baton.home, env=baton.env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    wait_for(lambda: (out / "pids").exists() and (out / "pids").read_text().strip() != "")
    queued = [run_ids(baton.say(f'run holder "n{i}" --force', user="bob", wait=False)).pop() for i in (1, 2)]
    assert [baton.run_record(r).status for r in queued] == ["queued", "queued"]

    holder.kill()  # kill -9 of the slot holder's process
    holder.wait()
    os.kill(int((out / "pids").read_text().split()[0]), signal.SIGKILL)  # its step dies with the machine
    first = next(r for r in baton.runs() if r.id not in queued)
    assert baton.run_record(first.id).status == "running"  # orphaned: still holds its slot
    assert [baton.run_record(r).status for r in queued] == ["queued", "queued"]  # nothing leaked

    (out / "release").touch()
    # any Baton process of the replica recovers the dead owner's run at start; its rest admits
    # the oldest queued run, and so on until the queue is empty
    done = baton.run("say", "--json", "--conversation", "ops", "--user", "cy", "--wait", "--", "queue")
    assert done.returncode == 0, done.stderr
    wait_for(lambda: all(baton.run_record(r).status == "completed" for r in [first.id, *queued]), 60)

    store = SqlStore(database_url)
    try:
        spans = []
        for run_id in [first.id, *queued]:
            entries = [e for e in store.steps.journal([run_id]) if e.finished_at is not None]
            spans.append((min(e.started_at for e in entries), max(e.finished_at or 0 for e in entries)))
        actions = [e.action for e in store.events.audit_log(queued[0])]
    finally:
        store.close()
    assert len((out / f"{first.id}.runs").read_text().split()) == 2  # pure: re-ran once recovered
    assert all(len((out / f"{r}.runs").read_text().split()) == 1 for r in queued)
    assert spans == sorted(spans) and all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    assert "queued" in actions and "admitted" in actions
    assert baton.run_record(first.id).status is RunStatus.COMPLETED
