"""No process a step started outlives the step, not even one that left its process group.

A step runs in its own session and process group, which `process.py` stops when the step's
main process exits. A descendant can leave that group (`setsid -f sleep 1000`, a daemon's
double fork); its parent then exits and it would be re-parented to init, out of reach. So:

* the process running steps is a *child subreaper* (Linux `PR_SET_CHILD_SUBREAPER`, set once
  by `adopt_orphans`): an orphan of a step is re-parented to it instead;
* after each step, `sweep(marker)` reads this process's children (`/proc/self/task/*/children`,
  a few small files, no scan of every process), skips those asyncio started and those in this
  process's own session (steps always start a new one), and for each of the rest reads its
  environment: one carrying this step's marker (its `BATON_RUN_ID`, `BATON_NODE_ID` and
  `BATON_ATTEMPT`), or the marker of a step no longer running here, is killed with its process
  group and reaped; so are its own children, which are re-parented here in turn;
* orphans that already exited (zombies) in another session are reaped, except while a step's
  process is being started (until asyncio's pid is registered it looks like one).

asyncio waits for the processes it started by pid (never `waitpid(-1)`), so adopting orphans
does not disturb it; those pids are registered (`spawning`, `started`/`finished`) and never
touched here. Code other than the steps that starts processes in a session of their own and
polls for them (`Popen.poll()` in a tool) could see such a child reaped here once it exited.
A process that cleared its environment (`env -i setsid …`) carries no marker and is left
alone here; in the step sandbox (`core/engine/sandbox.py`, the default) it never reaches this
process at all: it lives in the step's PID namespace, which the kernel ends with the step.
On systems without `/proc` or the prctl, sweeping does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
from collections import Counter
from pathlib import Path

log = logging.getLogger("baton.sandbox")

Marker = tuple[str, str, str]  # (run id, node id, attempt)
_PR_SET_CHILD_SUBREAPER = 36
_PROC = Path("/proc")
_MARKER_KEYS = (b"BATON_RUN_ID=", b"BATON_NODE_ID=", b"BATON_ATTEMPT=")
_PASSES = 8  # a killed orphan's children are swept in the next pass
_REAP_WAIT = 2.0  # seconds to wait for a SIGKILLed process to be reapable

_adopting: list[bool] = []  # [True] once this process is a subreaper, [False] if it cannot be
_asyncio_pids: set[int] = set()
_running: Counter[Marker] = Counter()
_spawning: list[int] = [0]  # processes being started whose pid is not registered yet


def adopt_orphans() -> bool:
    """Make this process the subreaper of what its steps leave behind (once); False when the
    system does not allow it."""
    if not _adopting:
        _adopting.append(_set_subreaper())
    return _adopting[0]


def _set_subreaper() -> bool:
    if not _PROC.is_dir():
        return False
    try:
        # this process's own symbols, libc's among them (as bot/hardening.py): no library
        # search, which runs `ldconfig -p` in a child process (≈ 10 ms of a step's first start)
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def running(marker: Marker) -> None:
    """A step is about to start a process: what carries its marker is not to be touched
    (until `sweep(marker)`)."""
    _running[marker] += 1


def stopped(marker: Marker) -> None:
    _running[marker] -= 1
    if _running[marker] <= 0:
        del _running[marker]


def spawning() -> None:
    """A step's process is about to be started; `started` (or `spawn_failed`) follows."""
    _spawning[0] += 1


def spawn_failed() -> None:
    _spawning[0] -= 1


def started(pid: int) -> None:
    """asyncio started `pid` (and will reap it): never touched here."""
    _asyncio_pids.add(pid)
    _spawning[0] -= 1


def finished(pid: int) -> None:
    _asyncio_pids.discard(pid)


async def sweep(marker: Marker) -> int:
    """Kill and reap what the step `marker` (or a step no longer running) left behind; the
    number of processes killed."""
    if not adopt_orphans():
        return 0
    killed = 0
    own_session = os.getsid(0)
    for _ in range(_PASSES):
        victims = [pid for pid in _children() if _left_behind(pid, marker, own_session)]
        if not victims:
            break
        for pid in victims:
            _kill(pid)
        await asyncio.gather(*(_reap(pid) for pid in victims))
        killed += len(victims)
    if killed:
        log.info(
            "stopped %d process(es) a step left running",
            killed,
            extra={"action": "step_leftovers_killed", "run_id": marker[0], "node_id": marker[1]},
        )
    return killed


def _children() -> list[int]:
    """Our children, from every thread's `children` file (read with `os.read`: this runs
    after every step; `open()` cost 13 µs a file, `os.open`/`os.read` 7 µs, `Path.read_text`
    a third more than `open()`)."""
    pids: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return pids
    for task in tasks:
        try:
            pids += [int(p) for p in _read_all(f"/proc/self/task/{task}/children").split()]
        except OSError:
            continue
    return pids


def _read_all(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _left_behind(pid: int, marker: Marker, own_session: int) -> bool:
    """True for a child of ours that a step left: kill it (or reap it, for a zombie)."""
    if pid in _asyncio_pids:
        return False
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
        state, _ppid, _pgrp, session = stat[stat.rindex(")") + 2 :].split()[:4]
    except (OSError, ValueError):
        return False
    if int(session) == own_session:
        return False  # never a step's: every step starts a session of its own
    if state == "Z":
        if not _spawning[0]:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        return False
    found = _marker_of(pid)
    return found is not None and (found == marker or found not in _running)


def _marker_of(pid: int) -> Marker | None:
    try:
        environ = (_PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    values: dict[bytes, str] = {}
    for item in environ.split(b"\0"):
        for key in _MARKER_KEYS:
            if item.startswith(key):
                values[key] = item[len(key) :].decode("utf-8", errors="replace")
    if len(values) != len(_MARKER_KEYS):
        return None
    run_id, node_id, attempt = (values[key] for key in _MARKER_KEYS)
    return (run_id, node_id, attempt)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


async def _reap(pid: int) -> None:
    """Wait (bounded) until the killed child `pid` can be reaped, and reap it."""
    loop = asyncio.get_running_loop()
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        fd = None
    if fd is not None:
        ready: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(fd, readable)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ready, _REAP_WAIT)
        finally:
            loop.remove_reader(fd)
            os.close(fd)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
