"""Steps report `<name> <value>` lines over a FIFO; any number of tasks wait for names.

Unlike `tests.integration.engine.signals.Signals` (one waiter at a time), one reader
callback drains the FIFO for everyone, so concurrent trials can each wait for their own
names, on the event loop and with a deadline (no polling).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path


class StepSignals:
    def __init__(self, path: Path) -> None:
        self.path = path
        os.mkfifo(path)
        self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self._keep = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # no EOF between writers
        self._buffer = b""
        self.received: dict[str, str] = {}
        self._waiters: dict[str, list[asyncio.Future[str]]] = {}
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._fd, self._drain)

    def close(self) -> None:
        self._loop.remove_reader(self._fd)
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
            self.received.setdefault(name, value)
            for future in self._waiters.pop(name, []):
                if not future.done():
                    future.set_result(value)

    async def wait_for(self, name: str, timeout: float = 30.0) -> str:
        """The first value `name` sent; TimeoutError at the deadline."""
        if name in self.received:
            return self.received[name]
        future: asyncio.Future[str] = self._loop.create_future()
        self._waiters.setdefault(name, []).append(future)
        async with asyncio.timeout(timeout):
            return await future
