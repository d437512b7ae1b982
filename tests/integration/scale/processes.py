"""Replica and worker processes for tests: start, talk to, SIGTERM and kill -9.

    node = await Node.start({"role": "replica", "url": url, "root": str(root), ...})
    run_id = (await node.request("start", workflow="w"))["run"]
    node.kill()                                   # kill -9 (its steps, in their own process
                                                  # groups, finish or fail on their own)

Every wait has a deadline; nothing polls with sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
START_TIMEOUT = 60.0  # a cold interpreter import on a busy 2-core machine


class Node:
    def __init__(self, proc: asyncio.subprocess.Process, options: dict[str, Any]) -> None:
        self.proc = proc
        self.options = options
        self.ready: str = ""
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()  # lines without an id
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None

    @classmethod
    async def spawn(cls, options: dict[str, Any]) -> Node:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.integration.scale.node",
            json.dumps(options),
            cwd=REPO,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group, apart from pytest's
        )
        node = cls(proc, options)
        node._reader = asyncio.create_task(node._read())
        return node

    @classmethod
    async def start(cls, options: dict[str, Any], timeout: float = START_TIMEOUT) -> Node:
        node = await cls.spawn(options)
        await node.wait_ready(timeout)
        return node

    async def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        event = await self.event(timeout)
        if "ready" not in event:
            raise AssertionError(f"expected ready, got {event}")
        self.ready = str(event["ready"])

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            message = json.loads(line)
            future = self._waiting.pop(message.get("id", -1), None)
            if future is not None and not future.done():
                future.set_result(message)
            else:
                self.events.put_nowait(message)
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(ConnectionError(f"process {self.proc.pid} exited"))
        self._waiting.clear()
        self.events.put_nowait({"exited": True})

    async def event(self, timeout: float = 30.0) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            return await self.events.get()

    async def request(self, op: str, *, deadline: float = 90.0, **fields: Any) -> dict[str, Any]:
        if not self.alive:
            raise ConnectionError(f"process {self.proc.pid} exited")
        ident = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[ident] = future
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps({"id": ident, "op": op, **fields}) + "\n").encode())
        await self.proc.stdin.drain()
        async with asyncio.timeout(deadline):
            return await future

    @property
    def alive(self) -> bool:
        reading = self._reader is not None and not self._reader.done()
        return self.proc.returncode is None and reading

    def kill(self) -> None:
        """kill -9 the process (and its group)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def terminate(self) -> None:
        """SIGTERM to the process only (its steps are its business)."""
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)

    async def exited(self, timeout: float = 30.0) -> int:
        async with asyncio.timeout(timeout):
            code = await self.proc.wait()
            if self._reader is not None:
                await self._reader
            return code

    async def close(self) -> None:
        """Stop it if it still runs, gracefully (a replica: stdin closed; a worker, which reads
        no stdin: SIGTERM, as `baton worker` is stopped), then kill after a deadline."""
        if self.alive and self.proc.stdin is not None:
            with contextlib.suppress(ConnectionError, RuntimeError):
                self.proc.stdin.close()
            if self.options.get("role") == "worker":
                self.terminate()
            try:
                await self.exited(15)
            except TimeoutError:
                self.kill()
        self.kill()  # leftover steps of the group
        await self.exited(15)


def replica_options(url: str, root: Path, name: str, **extra: Any) -> dict[str, Any]:
    return {"role": "replica", "url": url, "root": str(root), "name": name, "replica": name, **extra}


def worker_options(url: str, root: Path, name: str, **extra: Any) -> dict[str, Any]:
    base = {"role": "worker", "url": url, "root": str(root), "name": name, "executor": "procrastinate"}
    return {**base, **extra}
