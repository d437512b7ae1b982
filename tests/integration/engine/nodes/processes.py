"""Watching real processes from tests without polling: pidfds and FIFOs with deadlines."""

from __future__ import annotations

import asyncio
import os
import select
from pathlib import Path


def wait_gone(pid: int, timeout: float = 5.0) -> bool:
    """True once process `pid` has exited (a zombie counts), False if it outlives `timeout`."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], timeout)
        return bool(readable)
    finally:
        os.close(fd)


def alive(pid: int) -> bool:
    return not wait_gone(pid, timeout=0)


async def read_fifo(path: Path, timeout: float = 10.0) -> str:
    """One line a step writes into the FIFO at `path`, waiting at most `timeout` seconds."""

    def read() -> str:
        with path.open("r") as fifo:
            return fifo.readline().strip()

    return await asyncio.wait_for(asyncio.to_thread(read), timeout)


def make_fifo(directory: Path, name: str = "pids") -> Path:
    path = directory / name
    os.mkfifo(path)
    return path
