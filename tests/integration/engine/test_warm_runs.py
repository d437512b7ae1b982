"""Through a real engine with the real sandbox: the sandboxes warmed for a run's steps
(`core/engine/warm.py`) are there while it executes and gone when its execution ends,
whether it completes, pauses at an approval or is cancelled mid-step."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.runtime import step_sandbox
from core.config import Settings
from tests.integration.engine.harness import Harness, make_harness
from tests.integration.engine.nodes.test_warm import gone, holding, stubs

pytestmark = pytest.mark.bwrap


@pytest.fixture
async def boxed(tmp_path: Path, migrated_sqlite_url: str) -> AsyncIterator[Harness]:
    tmp_path.chmod(0o755)
    sandbox = step_sandbox(Settings(_env_file=None, data_dir=tmp_path / "data", step_sandbox="bwrap"))  # type: ignore[call-arg]
    assert sandbox.can_warm
    h = make_harness(tmp_path, migrated_sqlite_url, sandbox=sandbox)
    yield h
    await h.engine.stop(grace=5)
    h.store.close()


async def test_warmed_sandboxes_end_with_a_completed_or_paused_run(boxed: Harness) -> None:
    h = boxed
    h.write("chain.yaml", """\
        name: chain
        nodes:
          - id: a
            bash: "true"
          - id: b
            depends_on: [a]
            bash: "sleep 0.5"
          - id: c
            depends_on: [b]
            bash: echo done
        """)
    h.write("gated.yaml", """\
        name: gated
        nodes:
          - id: a
            bash: "true"
          - id: b
            depends_on: [a]
            bash: "true"
          - id: review
            depends_on: [b]
            approval: "Go on?"
          - id: c
            depends_on: [review]
            bash: "true"
        """)
    marker = str(h.root / "data")  # every run directory (in the warmed bwrap's argv) is in it
    run = await h.start("chain")
    assert await gone(lambda: not stubs(marker)), "no sandbox was warmed while the run executed"
    done = await h.engine.wait(run.id, timeout=30)
    assert done.status.value == "completed" and h.output(run.id, "c").strip() == "done"
    assert await gone(stubs, marker), "a warmed sandbox outlived its run"
    paused = await h.run("gated")
    assert paused.status.value == "paused"
    assert await gone(stubs, marker), "a warmed sandbox outlived its run's pause"


async def test_warmed_sandboxes_and_the_step_end_with_a_cancel(boxed: Harness) -> None:
    h = boxed
    token = f"0.{uuid.uuid4().int % 10**8:08d}"
    h.write("long.yaml", f"""\
        name: long
        nodes:
          - id: a
            bash: "true"
          - id: b
            depends_on: [a]
            bash: "setsid -f sleep 300 {token}; sleep 300 {token}"
        """)
    marker = str(h.root / "data")
    run = await h.start("long")
    assert await gone(lambda: not holding(token), deadline=15), "the step did not start"
    assert stubs(marker), "no sandbox was warmed while the run executed"
    cancelled = await h.engine.cancel(run.id, actor="console:ana")
    assert cancelled.status.value == "cancelled"
    assert await gone(stubs, marker), "a warmed sandbox outlived the cancelled run"
    assert await gone(holding, token), "a process of the cancelled step outlived it"
