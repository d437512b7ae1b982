"""Warmed sandboxes: a step's bubblewrap set up before the step needs it (issue 25).

Setting up a sandbox (`core/engine/sandbox.py`: bwrap's namespaces and some fifty mounts,
then `setpriv` when Baton runs as root) costs a `bash: "true"` step more wall time than the
step itself. While a run executes, `WarmSandboxes` keeps sandboxes ready for the layout its
steps use (run directory, workflow directory, network flag, files and readable directories;
the user is the process's), so that a step of that layout only hands its program over:

    bwrap <the step's mounts> -- [setpriv …] bash -c STUB baton-stub <go> <data> <env>

The stub, the process bwrap starts, blocks reading a pipe that only Baton holds the other
end of (`<go>`). To hand a step over, Baton writes into a memory file (`<data>`, a memfd
only Baton and the stub hold) `stdin-flag NUL count NUL NAME=VALUE… NUL argv… NUL`, then
wakes the stub; the stub reads it (a file, so in blocks, not a byte a `read`), closes both
descriptors, takes `/dev/null` as stdin unless the step is fed one, and `exec`s
`env -i -- NAME=VALUE… argv…`, which `exec`s the step's program with exactly its
environment. Before that it reads nothing else: its own environment is empty, `bash -c`
reads no startup file, and its arguments are Baton's. So the step's process *is* the
process bwrap started (same pid, the one whose end ends the PID namespace and every process
in it), in its own session, with the warmed process's stdin, stdout and stderr pipes;
cancel and timeout stop its group as they stop a cold one's.

A step whose layout has a warmed sandbox takes it (waiting for one still being started);
any other starts cold as before, and one is warmed for its layout (unless it shows files of
its own, as a long `script:` does: no other step would match). Each take starts the
next (up to `DEPTH` per layout, `LAYOUTS` layouts per run), so a chain of short steps finds
one ready. `close()` kills every warmed sandbox of the run when its execution ends (done,
paused, cancelled, stopped); each one also dies with Baton (`--die-with-parent`).

CPU: a warmed step costs what a cold one does (the same bwrap and setpriv, run earlier) plus
the stub (`bash` starting, ~1 ms) and the `env` hop; a run also sets up, then kills, up to
`DEPTH` sandboxes it never uses. What it saves is wall time on the step's path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.engine.nodes import reaper
from core.engine.sandbox import Sandbox

log = logging.getLogger(__name__)

DEPTH = 2  # sandboxes kept ready per layout: a step of a chain finds one set up a step ago
LAYOUTS = 2  # layouts warmed per run (the oldest one's sandboxes are killed for a new one)
PAYLOAD_LIMIT = 120 * 1024  # bytes of environment and argv handed over; more: cold (E2BIG said as today)
_KILL_WAIT = 2.0  # seconds to wait for a killed warmed sandbox to be reaped
_reaping: set[asyncio.Future[None]] = set()  # discarded sandboxes being reaped

STUB = (
    'f=$1; read -r -u "$f" go || exit 125; exec {f}<&-; '
    'f=$2; mapfile -t -d "" -u "$f" a || exit 125; exec {f}<&-; '
    '[ "${#a[@]}" -ge 3 ] || exit 125; [ "${a[0]}" = 1 ] || exec </dev/null; '
    'n=${a[1]}; exec "$3" -i -- "${a[@]:2:n}" "${a[@]:2+n}"'
)

#: (run directory, workflow directory, network, files shown, readable directories)
Layout = tuple[Path, Path | None, bool, tuple[tuple[Path, Path], ...], tuple[Path, ...]]


def layout(
    workdir: Path,
    workflow_dir: Path | None,
    network: bool,
    files: Mapping[Path, Path] | None,
    readable: Sequence[Path],
) -> Layout:
    return (workdir, workflow_dir, network, tuple(sorted((files or {}).items())), tuple(readable))


@dataclass(slots=True)
class _Warmed:
    proc: asyncio.subprocess.Process
    go: int  # the write end of the pipe the stub waits on
    data: int  # the memory file it then reads the step's environment and argv from


class WarmSandboxes:
    """The warmed sandboxes of one run's execution (`RunExecutor.execute` closes them)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self._ready: dict[Layout, deque[asyncio.Task[_Warmed]]] = {}
        self._lines: dict[Layout, list[str]] = {}  # each layout's bwrap line, built once a run
        self._closed = False
        self.taken = 0  # steps that ran in a warmed sandbox
        self.cold = 0  # steps that could not (no match, too large, closed)

    @classmethod
    def for_run(cls, sandbox: Sandbox) -> WarmSandboxes | None:
        return cls(sandbox) if sandbox.can_warm else None

    def warmed(self) -> list[int]:
        """The pids of the sandboxes ready or being started (for tests and logs)."""
        return [
            t.result().proc.pid for q in self._ready.values() for t in q
            if t.done() and not t.cancelled() and t.exception() is None
        ]

    async def take(
        self, where: Layout, argv: Sequence[str], env: Mapping[str, str], *, stdin: bool
    ) -> asyncio.subprocess.Process | None:
        """A warmed sandbox of `where` now running `argv` with exactly `env` (stdin: the
        process's stdin pipe is the step's, else `/dev/null`); None: start it cold. Warms the
        next one for `where` either way."""
        payload = _payload(argv, env, stdin)
        queue = self._ready.get(where)
        if self._closed or payload is None or where[3]:  # files: a step's own (a long script's)
            self.cold += 1
            return None
        if not queue:
            self._fill(where, 1)
            self.cold += 1
            return None
        task = queue.popleft()
        try:
            warmed = await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(_discard_done)
            raise
        except Exception as exc:  # it could not start: this step starts cold
            log.debug("a warmed sandbox did not start: %s", exc)
            self.cold += 1
            return None
        if warmed.proc.returncode is not None or not _hand_over(warmed, payload):
            _kill(warmed)
            self.cold += 1
            return None
        self.taken += 1
        asyncio.get_running_loop().call_soon(self._fill, where, DEPTH)  # once the step runs
        return warmed.proc

    def _fill(self, where: Layout, depth: int) -> None:
        if self._closed:
            return
        if where not in self._ready:
            while len(self._ready) >= LAYOUTS:  # the oldest layout gives way
                oldest = next(iter(self._ready))
                for task in self._ready.pop(oldest):
                    _discard(task)
            self._ready[where] = deque()
        queue = self._ready[where]
        while len(queue) < depth:
            queue.append(asyncio.ensure_future(self._start(where)))

    async def _start(self, where: Layout) -> _Warmed:
        workdir, workflow_dir, network, files, readable = where
        sandbox = self.sandbox
        assert sandbox.shell is not None and sandbox.env_program is not None
        line = self._lines.get(where)
        if line is None:
            line = self._lines[where] = sandbox.command(
                [sandbox.shell, "-c", STUB, "baton-stub"], workdir=workdir, workflow_dir=workflow_dir,
                network=network, files=dict(files), readable=readable, own_session=True,
            )
        read, go = os.pipe()
        data = os.memfd_create("baton-step", os.MFD_CLOEXEC)
        try:
            argv = [*line, str(read), str(data), sandbox.env_program]
            reaper.spawning()
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    cwd=workdir,
                    env={},
                    start_new_session=True,
                    pass_fds=(read, data),
                )
            except BaseException:
                reaper.spawn_failed()
                raise
        except BaseException:
            os.close(go)
            os.close(data)
            raise
        finally:
            os.close(read)
        reaper.started(proc.pid)
        return _Warmed(proc, go, data)

    async def close(self) -> None:
        """Kill every warmed sandbox (and those still starting) and wait until they are gone."""
        self._closed = True
        tasks = [t for q in self._ready.values() for t in q]
        self._ready.clear()
        if not tasks:
            return
        started = await asyncio.gather(*tasks, return_exceptions=True)
        procs = [w.proc for w in started if isinstance(w, _Warmed)]
        for warmed in started:
            if isinstance(warmed, _Warmed):
                _kill(warmed)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_KILL_WAIT):
                await asyncio.gather(*(p.wait() for p in procs))
        for proc in procs:
            reaper.finished(proc.pid)


def _payload(argv: Sequence[str], env: Mapping[str, str], stdin: bool) -> bytes | None:
    """What the stub reads, or None when the step must start cold: values the stub's `env`
    would read otherwise (a program whose name holds `=`, a variable name that is empty or
    holds `=`), a NUL (which a cold start refuses with its own message), or too much."""
    if not argv or "=" in argv[0] or any(not k or "=" in k for k in env):
        return None
    try:
        items = [f"{k}={v}".encode() for k, v in env.items()] + [os.fsencode(a) for a in argv]
    except (UnicodeEncodeError, TypeError):
        return None
    if any(b"\0" in item for item in items):
        return None
    payload = b"\0".join([b"1" if stdin else b"0", str(len(env)).encode(), *items]) + b"\0"
    return payload if len(payload) <= PAYLOAD_LIMIT else None


def _hand_over(warmed: _Warmed, payload: bytes) -> bool:
    """Write the payload into the memory file (the stub's descriptor shares its offset, 0:
    `pwrite` leaves it there), then wake the stub and close Baton's ends. False: the stub
    is gone; the caller kills what is left of it."""
    try:
        if os.pwrite(warmed.data, payload, 0) != len(payload):
            return False
        os.set_blocking(warmed.go, False)
        os.write(warmed.go, b"go\n")
    except OSError:
        return False
    _close(warmed)
    return True


def _kill(warmed: _Warmed) -> None:
    """SIGKILL its group, then close Baton's ends (the stub, woken by the closed pipe, exits)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(warmed.proc.pid, signal.SIGKILL)
    _close(warmed)


def _close(warmed: _Warmed) -> None:
    for fd in (warmed.go, warmed.data):
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
    warmed.go = warmed.data = -1


def _discard(task: asyncio.Task[_Warmed]) -> None:
    if task.done():
        _discard_done(task)
    else:
        task.add_done_callback(_discard_done)


def _discard_done(task: asyncio.Task[_Warmed]) -> None:
    if task.cancelled() or task.exception() is not None:
        return
    warmed = task.result()
    _kill(warmed)
    reaping = asyncio.ensure_future(_reaped(warmed.proc))
    _reaping.add(reaping)
    reaping.add_done_callback(_reaping.discard)


async def _reaped(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_KILL_WAIT):
            await proc.wait()
    reaper.finished(proc.pid)
