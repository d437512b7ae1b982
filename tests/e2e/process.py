"""`baton run` as a real process for end-to-end tests: its log read as it is written.

    baton = await BatonProcess.start(env)                # python -m bot.main run, own session
    line = await baton.wait_log("action=slack_started")  # waits on the log, with a deadline
    await baton.stop()                                   # SIGTERM, then its exit status

Nothing polls with sleep: every wait is on the process's output or its exit, with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
import signal
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.e2e import zygote

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 60.0  # a cold interpreter start on a busy 2-core machine


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any BATON_* of the caller's shell, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATON_")}
    env.update(PYTHONPATH=str(REPO), **extra)
    return env


def free_port() -> int:
    """A port nothing listens on right now (for BATON_WEB_PORT: each process its own)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Forked:
    """A `baton` process forked by the zygote, as much of `asyncio.subprocess.Process` as
    `BatonProcess` uses: its pid (a session of its own), its output, its exit status."""

    def __init__(self, pid: int, status: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 stdout: asyncio.StreamReader, stderr: asyncio.StreamReader) -> None:  # fmt: skip
        self.pid = pid
        self.stdout, self.stderr = stdout, stderr
        self.returncode: int | None = None
        self._ended = asyncio.create_task(self._end(status, writer))

    @classmethod
    async def start(cls, env: Mapping[str, str], args: tuple[str, ...], cwd: Path) -> _Forked:
        loop = asyncio.get_running_loop()
        streams, ours, theirs = [], [], []
        for _ in range(2):  # stdout, stderr
            read, write = os.pipe()
            ours.append(read)
            theirs.append(write)
        forks = await asyncio.to_thread(zygote.zygote)  # the first imports for a few seconds
        with open(os.devnull, "rb") as stdin:
            try:
                conn = forks.fork(args, cwd=cwd, env=env, stdio=[stdin.fileno(), *theirs], session=True)
            finally:
                for fd in theirs:  # the call holds them now: its exit ends our reads
                    os.close(fd)
        for fd in ours:
            reader = asyncio.StreamReader(limit=2**20)
            await loop.connect_read_pipe(functools.partial(asyncio.StreamReaderProtocol, reader),
                                         os.fdopen(fd, "rb", 0))  # fmt: skip
            streams.append(reader)
        conn.setblocking(False)
        status, writer = await asyncio.open_unix_connection(sock=conn)
        pid = int(await asyncio.wait_for(status.readline(), DEADLINE))
        return cls(pid, status, writer, *streams)

    async def _end(self, status: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await status.readline()
            if not line:
                raise RuntimeError(f"the zygote ended without the exit status of pid {self.pid}")
            self.returncode = int(line)
        finally:
            writer.close()

    async def wait(self) -> int:
        await asyncio.shield(self._ended)
        assert self.returncode is not None
        return self.returncode


class BatonProcess:
    def __init__(self, proc: asyncio.subprocess.Process | _Forked) -> None:
        self.proc = proc
        self.lines: list[str] = []  # stderr and stdout, as written
        self._changed = asyncio.Condition()
        self._readers = [asyncio.create_task(self._read(s)) for s in (proc.stderr, proc.stdout) if s]
        if isinstance(proc, _Forked):  # its exit status comes apart from its output's end
            self._readers.append(asyncio.create_task(self._exit_seen()))

    async def _exit_seen(self) -> None:
        """A wait for a line ends when the process exited."""
        await self.proc.wait()
        async with self._changed:
            self._changed.notify_all()

    @classmethod
    async def start(cls, env: Mapping[str, str], *args: str, cwd: Path = REPO,
                    stdin: int = asyncio.subprocess.DEVNULL, forked: bool = False) -> BatonProcess:
        """`stdin=PIPE` keeps `baton run`'s console (no chat platform) open until `stop`.
        `forked`: forked from the test process's zygote (tests/e2e/zygote.py), which imported
        Baton's modules once, rather than a cold interpreter (a few seconds of imports each:
        for tests that start and kill many processes; BATON_TEST_COLD_START=1 starts them cold)."""
        if forked and stdin == asyncio.subprocess.DEVNULL and not zygote.cold_start():
            return cls(await _Forked.start(env, args or ("run",), cwd))
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.main", *(args or ("run",)), cwd=cwd, env=dict(env),
            stdin=stdin, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        return cls(proc)

    async def _read(self, stream: asyncio.StreamReader) -> None:
        async for raw in stream:
            async with self._changed:
                self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
                self._changed.notify_all()
        async with self._changed:
            self._changed.notify_all()

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    async def wait_log(self, pattern: str, timeout: float = DEADLINE) -> re.Match[str]:
        """The first output line matching `pattern` (a regex), waiting for it."""
        found: list[re.Match[str]] = []

        def seen() -> bool:
            found[:] = [m for line in self.lines if (m := re.search(pattern, line))][:1]
            return bool(found) or self.proc.returncode is not None

        async with self._changed:
            try:
                await asyncio.wait_for(self._changed.wait_for(seen), timeout)
            except TimeoutError:
                raise AssertionError(f"no line matching {pattern!r} in {timeout}s:\n{self.output}") from None
        if not found:
            raise AssertionError(f"exited {self.proc.returncode} before {pattern!r}:\n{self.output}")
        return found[0]

    async def exited(self, timeout: float = DEADLINE) -> int:
        """Its exit status (it must end by itself within `timeout`)."""
        try:
            code = await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            self.kill()
            raise AssertionError(f"still running after {timeout}s:\n{self.output}") from None
        await asyncio.gather(*self._readers)
        return code

    async def stop(self, timeout: float = DEADLINE) -> int:
        """SIGTERM (Baton's graceful stop), then its exit status."""
        if self.proc.returncode is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        return await self.exited(timeout)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
