"""The test side of `tests.integration.crash.runner`: start one in a child process and read
the lines it prints, each with a deadline."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


async def start_runner(*args: str, env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
    """`python -m tests.integration.crash.runner <args>` with pipes for stdin and stdout."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.integration.crash.runner",
        *args,
        cwd=REPO,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, **env} if env else None,
    )


async def read_line(proc: asyncio.subprocess.Process, timeout: float = 20.0) -> str:
    """The child's next stdout line, stripped; TimeoutError at the deadline."""
    assert proc.stdout is not None
    async with asyncio.timeout(timeout):
        return (await proc.stdout.readline()).decode().strip()
