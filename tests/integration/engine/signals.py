"""Steps tell the test they are in flight by writing `<name> <value>` lines into a FIFO.

The test waits on the FIFO with the event loop (no polling) and a deadline.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Signals:
    def __init__(self, path: Path) -> None:
        self.path = path
        os.mkfifo(path)
        self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        # our own writer keeps the FIFO from reporting end-of-file between step writes
        self._keep = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        self._buffer = b""
        self.received: dict[str, list[str]] = {}

    def close(self) -> None:
        os.close(self._fd)
        os.close(self._keep)

    def _drain(self) -> None:
        try:
            self._buffer += os.read(self._fd, 65536)
        except BlockingIOError:
            return
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            name, _, value = line.decode().partition(" ")
            self.received.setdefault(name, []).append(value)

    async def wait_for(self, names: set[str], timeout: float = 15.0) -> dict[str, str]:
        """The first value each name sent; TimeoutError when one is missing at the deadline."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(timeout):
            while not names <= set(self.received):
                ready: asyncio.Future[None] = loop.create_future()
                loop.add_reader(self._fd, _wake, ready)
                try:
                    await ready
                finally:
                    loop.remove_reader(self._fd)
                self._drain()
        return {name: self.received[name][0] for name in names}
