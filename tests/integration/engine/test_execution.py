"""Execution: artifacts, cancellation (here and from another engine), retries, timeouts."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.engine.events import EngineEvent, EventKind
from core.engine.tools import ToolRegistry
from core.store.records import NodeStatus, RunStatus
from tests.integration.engine.harness import Harness, make_harness
from tests.integration.step_signals import StepSignals

SLOW = """
name: slow
nodes:
  - id: hold
    bash: "echo hold $$ >> {{ inputs.sig }}; exec sleep 30"
    replay: pure
"""


@pytest.fixture
def signals(tmp_path: Path) -> Iterator[StepSignals]:
    sig = StepSignals(tmp_path / "signals.fifo")
    yield sig
    sig.close()


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_an_artifact_linking_out_of_the_run_directory_fails_the_step_not_leaving_it_started(
    harness: Harness,
) -> None:
    h = harness
    outside = h.root / "outside.txt"
    outside.write_text("not yours")
    h.write(
        "leak.yaml",
        f"""
        name: leak
        nodes:
          - id: wheel
            bash: mkdir -p dist && ln -sf {outside} dist/pkg.whl && echo built
            artifacts: [dist/*.whl]
        """,
    )
    run = await h.run("leak")

    assert run.status is RunStatus.FAILED
    (entry,) = h.entries(run.id, "wheel")
    assert entry.status is NodeStatus.FAILED and entry.artifacts == {}
    assert entry.error is not None and "leads out of the run directory" in entry.error
    assert "\n" not in entry.error


async def test_artifacts_are_restored_on_a_resume_from_hit(harness: Harness) -> None:
    h = harness
    h.write(
        "build.yaml",
        """
        name: build
        nodes:
          - id: wheel
            bash: mkdir -p dist && printf 'wheel-bytes' > dist/pkg.whl && echo built
            replay: pure
            artifacts: [dist/*.whl]
          - id: upload
            depends_on: [wheel]
            bash: cat dist/pkg.whl
            replay: pure
            memoize: false
        """,
    )
    first = await h.run("build")
    [wheel] = [e for e in h.entries(first.id, "wheel") if e.status is NodeStatus.COMPLETED]
    assert set(wheel.artifacts) == {"dist/pkg.whl"}

    second = await h.run("build", resume_from=first.id)

    assert second.status is RunStatus.COMPLETED
    assert h.executed(second.id, "wheel") == 0
    assert h.output(second.id, "upload") == "wheel-bytes"  # read in the new run's own directory
    restored = h.root / "data" / "runs" / second.id / "dist" / "pkg.whl"
    assert restored.read_bytes() == b"wheel-bytes"


async def test_cancel_kills_the_running_subprocess(harness: Harness, signals: StepSignals) -> None:
    h = harness
    h.write("slow.yaml", SLOW)
    run = await h.start("slow", {"sig": str(signals.path)})
    pid = int(await signals.wait_for("hold", timeout=15))

    cancelled = await h.engine.cancel(run.id, actor="console:ana")

    assert cancelled.status is RunStatus.CANCELLED and cancelled.status_by == "console:ana"
    assert _gone(pid)
    [entry] = h.entries(run.id, "hold")
    assert entry.status is NodeStatus.FAILED and entry.error == "cancelled by console:ana"
    finished = [e for e in h.events if e.kind is EventKind.RUN_FINISHED]
    assert [e.run_status for e in finished] == ["cancelled"]


async def test_a_cancel_from_another_process_stops_our_subprocess(
    harness: Harness, signals: StepSignals, tmp_path: Path, sqlite_url: str
) -> None:
    runner = make_harness(tmp_path / "runner", sqlite_url, lease_seconds=0.6)
    runner.write("slow.yaml", SLOW)
    stopped = asyncio.Event()

    async def on_event(event: EngineEvent) -> None:
        if event.kind is EventKind.RUN_FINISHED:
            stopped.set()

    runner.engine.subscribe(on_event)
    await runner.engine.start()
    try:
        run = await runner.start("slow", {"sig": str(signals.path)})
        pid = int(await signals.wait_for("hold", timeout=15))

        await harness.engine.cancel(run.id, actor="console:bo")  # an engine that does not run it

        async with asyncio.timeout(10):
            await stopped.wait()  # the runner's heartbeat noticed and stopped the run
        assert _gone(pid)
        [entry] = runner.entries(run.id, "hold")
        assert entry.error == "cancelled by console:bo"
    finally:
        await runner.engine.stop(grace=5)
        runner.store.close()


async def test_retries_with_backoff_on_a_pure_step(tmp_path: Path, sqlite_url: str) -> None:
    tools = ToolRegistry()
    calls: list[int] = []

    @tools.tool("flaky", replay="pure", inline=True)
    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError(f"blip {len(calls)}")
        return "steady"

    h = make_harness(tmp_path, sqlite_url, tools=tools)
    h.write(
        "flaky.yaml",
        "name: flaky\nnodes:\n  - id: f\n    tool: flaky\n    replay: pure\n"
        "    retry: {attempts: 3, backoff: 0.01}\n",
    )
    run = await h.run("flaky")
    await h.engine.stop()
    h.store.close()

    assert run.status is RunStatus.COMPLETED
    entries = h.entries(run.id, "f")
    assert [(e.attempt, e.status) for e in entries] == [
        (1, NodeStatus.FAILED),
        (2, NodeStatus.FAILED),
        (3, NodeStatus.COMPLETED),
    ]
    assert "blip 1" in (entries[0].error or "")


async def test_a_timeout_fails_the_step_and_kills_it(harness: Harness, signals: StepSignals) -> None:
    h = harness
    h.write(
        "late.yaml",
        'name: late\nnodes:\n  - id: hold\n    bash: "echo hold $$ >> {{ inputs.sig }}; exec sleep 30"\n'
        "    replay: pure\n    timeout: 0.5\n",
    )
    run = await h.start("late", {"sig": str(signals.path)})
    pid = int(await signals.wait_for("hold", timeout=15))
    done = await h.engine.wait(run.id, timeout=15)

    assert done.status is RunStatus.FAILED
    assert "timed out after 0.5 s" in (done.reason or "")
    assert _gone(pid)


FILES = """
name: files
nodes:
  - id: matrix
    bash: pwd; cat "$BATON_WORKFLOW_DIR/data/matrix.txt"
    files: [data/matrix.txt]
    replay: pure
  - id: count
    script: |
      import os, pathlib
      print(len(pathlib.Path(os.environ["BATON_WORKFLOW_DIR"], "data", "matrix.txt").read_text().split()))
    files: [data/matrix.txt]
    replay: pure
"""


async def test_steps_read_their_files_through_baton_workflow_dir(harness: Harness) -> None:
    """Steps run in the run's directory; the workflow's own directory is $BATON_WORKFLOW_DIR."""
    h = harness
    h.write("data/matrix.txt", "linux macos\n")
    h.write("files.yaml", FILES)

    first = await h.run("files")

    assert first.status is RunStatus.COMPLETED, first.reason
    run_dir = h.root / "data" / "runs" / first.id
    assert h.output(first.id, "matrix") == f"{run_dir}\nlinux macos\n"
    assert h.output(first.id, "count") == "2\n"

    h.write("data/matrix.txt", "linux macos windows\n")  # a declared file changed: both re-run
    second = await h.run("files", resume_from=first.id)

    assert second.status is RunStatus.COMPLETED, second.reason
    assert (h.executed(second.id, "matrix"), h.executed(second.id, "count")) == (1, 1)
    assert h.output(second.id, "count") == "3\n"


async def test_a_run_whose_execution_cannot_start_fails_with_why_and_does_not_hang(harness: Harness) -> None:
    """Its run directory cannot be made (`runs` is a file here): the run ends `failed`, saying
    why, rather than staying `running` under this process's lease with nothing executing it
    (a `say --wait` waited for it forever)."""
    harness.write("plain.yaml", "name: plain\nnodes:\n  - id: a\n    bash: echo a\n    replay: pure\n")
    data = harness.root / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "runs").write_text("not a directory")
    run = await harness.start("plain")
    rested = await harness.engine.wait(run.id, timeout=10)
    assert rested.status is RunStatus.FAILED
    assert rested.reason is not None and "could not start executing it: NotADirectoryError" in rested.reason
    assert harness.kinds(run.id, EventKind.RUN_FINISHED) == [None]


async def test_a_step_that_spoils_the_artifacts_directory_spoils_no_resume(harness: Harness) -> None:
    """A step turned `artifacts` into a dangling link and the run paused at a gate: resuming
    it (and any later start of Baton, which takes it over) makes `artifacts` a directory again
    instead of failing on it."""
    harness.write("spoil.yaml", """\
        name: spoil
        nodes:
          - id: spoil
            replay: pure
            bash: 'rm -rf artifacts && ln -s /nonexistent artifacts'
          - id: gate
            depends_on: [spoil]
            approval: "go on?"
          - id: after
            replay: pure
            depends_on: [gate]
            bash: 'test -d artifacts && echo artifacts-is-a-directory'
        """)
    paused = await harness.run("spoil")
    assert paused.status is RunStatus.PAUSED
    assert (harness.root / "data" / "runs" / paused.id / "artifacts").is_symlink()
    await harness.engine.approve(paused.id, actor="console:ana")
    done = await harness.engine.wait(paused.id, timeout=30)
    assert done.status is RunStatus.COMPLETED, done.reason
    assert harness.output(paused.id, "after").strip() == "artifacts-is-a-directory"
