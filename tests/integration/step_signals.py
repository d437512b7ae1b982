"""Steps tell the test they are in flight by writing `<name> <value>` lines into a FIFO.

One reader callback drains the FIFO for every waiter, so any number of tasks (concurrent
trials, a test and its helpers) can wait for their own names, on the event loop and with a
deadline (no polling). The reader is registered by the first wait, so the object can be
built by a synchronous fixture.
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
        self.received: dict[str, str] = {}  # the first value each name sent
        self._waiters: dict[str, list[asyncio.Future[str]]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def close(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
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
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._loop.add_reader(self._fd, self._drain)
        if name in self.received:
            return self.received[name]
        future: asyncio.Future[str] = self._loop.create_future()
        self._waiters.setdefault(name, []).append(future)
        async with asyncio.timeout(timeout):
            return await future

    async def wait_all(self, names: set[str], timeout: float = 15.0) -> dict[str, str]:
        """The first value each name sent; TimeoutError when one is missing at the deadline."""
        async with asyncio.timeout(timeout):
            values = await asyncio.gather(*(self.wait_for(name, timeout) for name in sorted(names)))
        return dict(zip(sorted(names), values, strict=True))
