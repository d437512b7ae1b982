"""The suite's own guard (tests/conftest.py): a test whose pytest-timeout alarm went off fails,
even when the alarm landed in a background task of its event loop and the test went on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).resolve().parents[2] / "conftest.py"
HUNG = '''
import asyncio, time

import pytest


@pytest.mark.timeout(1)
async def test_alarm_in_a_background_task():
    async def spin():
        started = time.monotonic()
        while time.monotonic() - started < 2.5:
            pass  # the alarm lands here, in the task, which dies of it

    try:
        await asyncio.create_task(spin())
    except BaseException:
        pass  # what a shutdown that gathers its tasks does
'''


def test_a_timeout_that_landed_in_a_background_task_fails_the_test(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST.read_text())
    (tmp_path / "test_hung.py").write_text(HUNG)
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", "test_hung.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout
    assert "pytest-timeout went off during test_hung.py::test_alarm_in_a_background_task" in done.stdout
