"""kill -9 the engine's process while a pure, an idempotent and an unsafe step are in flight.

After a restart: the pure step re-ran, the idempotent one re-ran with the same key, the
unsafe one did not run again and the run needs attention; nothing else is lost.
"""

from __future__ import annotations

import json
import os
import signal
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.store.records import NodeStatus, RunStatus
from tests.integration.crash.child import read_line, start_runner
from tests.integration.engine.harness import make_harness
from tests.integration.step_signals import StepSignals

pytestmark = pytest.mark.slow

WORKFLOW = """
name: crashy
nodes:
  - id: before
    bash: echo before >> {{ inputs.dir }}/before.runs; echo done-before
    replay: pure
  - id: p
    depends_on: [before]
    bash: |
      echo run >> {{ inputs.dir }}/p.runs
      echo p $$ >> {{ inputs.sig }}
      [ -f {{ inputs.dir }}/release ] || exec sleep 60
      echo p-out
    replay: pure
  - id: i
    depends_on: [before]
    bash: |
      echo $BATON_IDEMPOTENCY_KEY >> {{ inputs.dir }}/sink
      echo i $$ >> {{ inputs.sig }}
      [ -f {{ inputs.dir }}/release ] || exec sleep 60
      echo i-out
    replay: idempotent
  - id: u
    depends_on: [before]
    bash: |
      echo run >> {{ inputs.dir }}/u.runs
      echo u $$ >> {{ inputs.sig }}
      [ -f {{ inputs.dir }}/release ] || exec sleep 60
      echo u-out
    replay: unsafe
  - id: after
    depends_on: [p, i]
    bash: echo "after {{ nodes.p.output }} {{ nodes.i.output }}"
    replay: pure
"""


@pytest.fixture
def signals(tmp_path: Path) -> Iterator[StepSignals]:
    sig = StepSignals(tmp_path / "signals.fifo")
    yield sig
    sig.close()


def _lines(path: Path) -> list[str]:
    return path.read_text().split()


async def test_kill_9_mid_flight_then_restart(tmp_path: Path, sqlite_url: str, signals: StepSignals) -> None:
    root = tmp_path / "bot"
    (root / "workflows").mkdir(parents=True)
    (root / "workflows" / "crashy.yaml").write_text(textwrap.dedent(WORKFLOW))
    out = tmp_path / "out"
    out.mkdir()
    args = json.dumps({"dir": str(out), "sig": str(signals.path)})

    first = await start_runner("start", sqlite_url, str(root), "crashy", args)
    run_id = await read_line(first)
    pids = await signals.wait_all({"p", "i", "u"})  # all three in flight
    first.kill()  # kill -9
    await first.wait()
    for pid in pids.values():  # the orphaned steps die with the "machine"
        os.kill(int(pid), signal.SIGKILL)
    (out / "release").touch()

    second = await start_runner("recover", sqlite_url, str(root), run_id)
    report = json.loads(await read_line(second, timeout=20))
    await second.wait()

    assert report["status"] == RunStatus.NEEDS_ATTENTION.value
    print(f"\nrecovery of the dead local owner's run took {report['recovered_in'] * 1000:.0f} ms")
    assert report["recovered_in"] < 0.5
    assert len(_lines(out / "p.runs")) == 2  # pure: re-ran
    keys = _lines(out / "sink")
    assert len(keys) == 2 and len(set(keys)) == 1  # idempotent: re-ran with the same key
    assert len(_lines(out / "u.runs")) == 1  # unsafe: never again
    assert len(_lines(out / "before.runs")) == 1  # nothing else lost or repeated

    h = make_harness(tmp_path / "inspect", sqlite_url)
    try:
        run = h.store.runs.get_run(run_id)
        assert run.status is RunStatus.NEEDS_ATTENTION
        assert "`u` may have run" in (run.reason or "")
        [u] = h.entries(run_id, "u")
        assert u.status is NodeStatus.STARTED
        after = h.output(run_id, "after")
        assert "p-out" in after and "i-out" in after
        assert [e.status for e in h.entries(run_id, "p")] == [NodeStatus.FAILED, NodeStatus.COMPLETED]

        # a person settles it forward; the run completes without running `u` again
        (root / "workflows" / "crashy.yaml").replace(h.workflows / "crashy.yaml")
        await h.engine.resolve(run_id, "u", "done", actor="console:ana", output="sent by hand")
        done = await h.engine.wait(run_id, timeout=15)
        assert done.status is RunStatus.COMPLETED
        assert len(_lines(out / "u.runs")) == 1
        assert h.output(run_id, "u") == "sent by hand"
        assert [a.action for a in h.store.events.audit_log(run_id)][-1] == "resolve"
    finally:
        await h.engine.stop()
        h.store.close()
