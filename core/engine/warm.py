"""Warmed sandboxes: a step's bubblewrap set up before the step needs it (issue 25).

Setting up a sandbox (`core/engine/sandbox.py`: bwrap's namespaces and some fifty mounts,
then `setpriv` when Baton runs as root) costs a `bash: "true"` step more wall time than the
step itself. While a run executes, `WarmSandboxes` keeps sandboxes ready for the layout its
steps use (run directory, workflow directory, network flag, files and readable directories;
the user is the process's), so that a step of that layout only hands its program over:

    bwrap <the step's mounts> -- [capsh … --shell=dash --, or setpriv … dash] -c STUB baton-stub

The stub, the process bwrap starts, blocks reading one line from its stdin, a pipe that only
Baton holds the other end of. To hand a step over, Baton writes that line: a shell command
with every word single-quoted (a newline as `"$n"`), `[exec </dev/null;] export
'NAME=VALUE'…; exec 'argv'…`, which the stub `eval`s. dash reads a pipe a byte at a time, so
it reads nothing past that line: what follows is the step's stdin, fed as a cold step's is.
Before that it reads nothing else: its own environment is empty (`PWD` unset), `dash -c`
reads no startup file, its arguments are Baton's, and dash's `export` adds no variable of
its own (bash's `exec` would add `SHLVL`), so the program starts with exactly the step's
environment, in one `exec`, with no other descriptor open. So the step's process *is* the
process bwrap started (same pid, the one whose end ends the PID namespace and every process
in it), in its own session, with the warmed process's stdin, stdout and stderr pipes;
cancel and timeout stop its group as they stop a cold one's. A variable whose name the shell
cannot `export`, or a line over `PAYLOAD_LIMIT`, starts cold.

A step whose layout has a warmed sandbox takes it (waiting for one still being started);
any other starts cold as before, and one is warmed for its layout (unless it shows files of
its own, as a long `script:` does: no other step would match). Each take starts the
next (up to `DEPTH` per layout, `LAYOUTS` layouts per run), so a chain of short steps finds
one ready. `close()` kills every warmed sandbox of the run when its execution ends (done,
paused, cancelled, stopped); each one also dies with Baton (`--die-with-parent`).

CPU: a warmed step costs what a cold one does (the same bwrap, run earlier; the drop to the
step user by `capsh` when Baton runs as root and has it, ≈ 0.8 ms less than `setpriv`) plus
the stub (`dash` starting, ~0.1 ms); a run also sets up, then kills, up to `DEPTH`
sandboxes it never uses. What it saves is wall time on the step's path. (The stub was bash,
which then `exec`ed `env -i`: ~1 ms more CPU a step, and one `exec` more on its path.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.engine.nodes import children, reaper
from core.engine.sandbox import Sandbox

log = logging.getLogger("baton.sandbox")

DEPTH = 2  # sandboxes kept ready per layout: a step of a chain finds one set up a step ago
LAYOUTS = 2  # layouts warmed per run (the oldest one's sandboxes are killed for a new one)
PAYLOAD_LIMIT = 16 * 1024  # bytes of the line handed over (the stub reads it a byte a syscall); more: cold
_KILL_WAIT = 2.0  # seconds to wait for a killed warmed sandbox to be reaped
_reaping: set[asyncio.Future[None]] = set()  # discarded sandboxes being reaped

STUB = "unset PWD; n='\n'; IFS= read -r p || exit 125; eval \"$p\""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

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
    proc: asyncio.subprocess.Process  # its stdin: the pipe the stub reads the step's line from


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
        process's stdin pipe is the step's, written after the line handed over; else
        `/dev/null`); None: start it cold. Warms the next one for `where` either way."""
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
        assert sandbox.shell is not None
        line = self._lines.get(where)
        if line is None:
            line = self._lines[where] = sandbox.command(
                [sandbox.shell, "-c", STUB, "baton-stub"], workdir=workdir, workflow_dir=workflow_dir,
                network=network, files=dict(files), readable=readable, own_session=True,
            )
        children.use_pidfds()
        reaper.spawning()
        try:
            proc = await asyncio.create_subprocess_exec(
                *line,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=workdir,
                env={},
                start_new_session=True,
            )
        except BaseException:
            reaper.spawn_failed()
            raise
        reaper.started(proc.pid)
        return _Warmed(proc)

    async def close(self) -> None:
        """Kill every warmed sandbox (and those still starting) and wait until they are gone."""
        self._closed = True
        log.debug("warmed sandboxes: %d steps took one, %d started cold", self.taken, self.cold)
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
    """The line the stub `eval`s, or None when the step must start cold: a variable name the
    shell cannot `export` (empty, holding `=` or `-`, …), a NUL (which a cold start refuses
    with its own message), or more than `PAYLOAD_LIMIT` bytes."""
    if not argv or any(_NAME.fullmatch(k) is None for k in env):
        return None
    try:
        names = [f"{k}={v}".encode() for k, v in env.items()]
        words = [os.fsencode(a) for a in argv]
    except (UnicodeEncodeError, TypeError):
        return None
    if any(b"\0" in item for item in (*names, *words)):
        return None
    line = b"" if stdin else b"exec </dev/null; "
    if names:
        line += b"export " + b" ".join(map(_quoted, names)) + b"; "
    line += b"exec " + b" ".join(map(_quoted, words)) + b"\n"
    return line if len(line) <= PAYLOAD_LIMIT else None


def _quoted(word: bytes) -> bytes:
    """`word` as one shell word, single-quoted: a quote as `'\\''`, a newline as `'"$n"'` (the
    stub's `n`), so that the line holds no newline but its last."""
    return b"'" + word.replace(b"'", b"'\\''").replace(b"\n", b"'\"$n\"'") + b"'"


def _hand_over(warmed: _Warmed, payload: bytes) -> bool:
    """Write the line into the stub's stdin (a pipe holds 64 KiB: this does not wait). False:
    the stub is gone; the caller kills what is left of it."""
    stdin = warmed.proc.stdin
    if stdin is None or stdin.is_closing():
        return False
    try:
        stdin.write(payload)
    except (OSError, RuntimeError):
        return False
    return True


def _kill(warmed: _Warmed) -> None:
    """SIGKILL its group, then close Baton's end of its stdin."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(warmed.proc.pid, signal.SIGKILL)
    if warmed.proc.stdin is not None:
        warmed.proc.stdin.close()


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
