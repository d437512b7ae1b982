"""kill -9 with pure results waiting for their group commit (core/engine/group_commit.py).

The window is an hour, so nothing but the executor's own writes commits a batch:
  * before an unsafe step starts, the pure results it follows are committed: after the
    crash they are not run again, and the unsafe step needs attention;
  * pure results still pending at the crash are lost, and recovery simply runs those steps
    again (their replay class allows it) and completes the run.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.store.records import NodeStatus, RunStatus
from tests.integration.crash.child import read_line, start_runner
from tests.integration.engine.harness import make_harness
from tests.integration.step_signals import StepSignals

pytestmark = pytest.mark.slow

WINDOW = {"CRASH_GROUP_COMMIT": "3600"}
WORKFLOW = """
name: {name}
nodes:
  - id: a
    tool: mark
    with: {{dir: "{{{{ inputs.dir }}}}", node: a}}
  - id: b
    depends_on: [a]
    tool: mark
    with: {{dir: "{{{{ inputs.dir }}}}", node: b}}
  - id: h
    depends_on: [b]
    tool: {hold}
    with: {{dir: "{{{{ inputs.dir }}}}", sig: "{{{{ inputs.sig }}}}", node: h}}
"""


@pytest.fixture
def signals(tmp_path: Path) -> Iterator[StepSignals]:
    sig = StepSignals(tmp_path / "signals.fifo")
    yield sig
    sig.close()


async def _crash_and_recover(
    tmp_path: Path, url: str, signals: StepSignals, hold: str
) -> tuple[str, dict, Path]:
    root = tmp_path / "bot"
    (root / "workflows").mkdir(parents=True)
    (root / "workflows" / "held.yaml").write_text(textwrap.dedent(WORKFLOW.format(name="held", hold=hold)))
    out = tmp_path / "out"
    out.mkdir()
    args = json.dumps({"dir": str(out), "sig": str(signals.path)})

    first = await start_runner("start", url, str(root), "held", args, env=WINDOW)
    run_id = await read_line(first)
    await signals.wait_for("h")  # a and b done, h in flight
    first.kill()  # kill -9
    await first.wait()
    (out / "release").touch()

    second = await start_runner("recover", url, str(root), run_id, env=WINDOW)
    report = json.loads(await read_line(second, timeout=20))
    await second.wait()
    return run_id, report, out


async def test_results_before_an_unsafe_step_survive_the_crash(
    tmp_path: Path, sqlite_url: str, signals: StepSignals
) -> None:
    run_id, report, out = await _crash_and_recover(tmp_path, sqlite_url, signals, "hold_unsafe")

    assert report["status"] == RunStatus.NEEDS_ATTENTION.value
    assert (out / "marks").read_text().split() == ["a", "b"]  # committed before h started: not re-run
    h = make_harness(tmp_path / "inspect", sqlite_url)
    try:
        assert [e.status for e in h.entries(run_id, "a")] == [NodeStatus.COMPLETED]
        assert [e.status for e in h.entries(run_id, "b")] == [NodeStatus.COMPLETED]
        assert [e.status for e in h.entries(run_id, "h")] == [NodeStatus.STARTED]
    finally:
        await h.engine.stop()
        h.store.close()


async def test_pending_pure_results_lost_in_the_crash_are_run_again(
    tmp_path: Path, sqlite_url: str, signals: StepSignals
) -> None:
    run_id, report, out = await _crash_and_recover(tmp_path, sqlite_url, signals, "hold_pure")

    assert report["status"] == RunStatus.COMPLETED.value
    assert (out / "marks").read_text().split() == ["a", "b", "a", "b"]  # never committed: ran again
    h = make_harness(tmp_path / "inspect", sqlite_url)
    try:
        for node in ("a", "b", "h"):
            assert [e.status for e in h.entries(run_id, node)] == [NodeStatus.COMPLETED], node
        assert h.output(run_id, "h") == "h"
    finally:
        await h.engine.stop()
        h.store.close()
