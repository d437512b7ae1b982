"""How asyncio learns that a step's process exited: a pidfd on the event loop, not a thread.

Python 3.11's default child watcher (`ThreadedChildWatcher`) starts a thread for every
process asyncio starts, and the event loop waits for that thread to be running before it goes
on; the thread then blocks in `waitpid` and hands the exit back across threads. On this
project's 2-core machines that was about 0.25 ms of the event loop's time and 0.24 ms of CPU
for each step process (`bench/baton_real_steps.py`), and a thread per step running at once.

Python 3.12 made the pidfd watcher the default where the kernel has `pidfd_open` (Linux 5.3+):
the process's pidfd is watched by the running loop, which reaps it by pid once it is readable.
`use_pidfds()` installs the same watcher on 3.11 (once; on 3.12 and later, and where pidfds
do not work, it leaves asyncio's default alone). Like asyncio's, it waits by pid (never
`waitpid(-1)`), so the orphans `reaper.py` adopts are not disturbed; and it takes the loop
that is running when a process is started, so loops in other threads work as before.

The same pidfd also tells a step when its main process exited (`exit_of`, used by
`process.py`, which must not wait for the pipes to close): one pidfd per step process
instead of a second one of its own, ≈ 20 µs less on each step's path (pidfd_open, two
epoll_ctl, a close and one more readiness callback; `bench/baton_real_steps.py`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVarTuple, Unpack

log = logging.getLogger("baton.sandbox")

_Ts = TypeVarTuple("_Ts")

_installed: list[bool] = []  # [True] once decided (installed or not)
_watcher: list[PidfdWatcher] = []  # the one `use_pidfds` installed, if it did


class PidfdWatcher(asyncio.AbstractChildWatcher):
    """Python 3.12's `PidfdChildWatcher`: bound to no loop, each process watched by the loop
    running when it was started."""

    def __init__(self) -> None:
        #: the processes watched, each with the futures `exit_of` handed out for it
        self._exits: dict[int, list[asyncio.Future[None]]] = {}

    def add_child_handler(self, pid: int, callback: Callable[[int, int, Unpack[_Ts]], object],
                          *args: *_Ts) -> None:
        loop = asyncio.get_running_loop()
        pidfd = os.pidfd_open(pid)
        loop.add_reader(pidfd, self._exited, loop, pid, pidfd, callback, args)
        self._exits[pid] = []

    def exit_of(self, pid: int) -> asyncio.Future[None] | None:
        """A future set when `pid` exits (before asyncio hears of it); None when this watcher
        does not watch it (any more: it may have exited already)."""
        waiting = self._exits.get(pid)
        if waiting is None:
            return None
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiting.append(future)
        return future

    def _exited(self, loop: asyncio.AbstractEventLoop, pid: int, pidfd: int,
                callback: Callable[..., object], args: tuple[Any, ...]) -> None:
        loop.remove_reader(pidfd)
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:  # reaped by someone else: asyncio's own answer for it
            returncode = 255
            log.warning("process %d was reaped elsewhere: its exit status is unknown", pid,
                        extra={"action": "child_status_unknown"})
        else:
            returncode = os.waitstatus_to_exitcode(status)
        finally:
            os.close(pidfd)
            for future in self._exits.pop(pid, ()):
                if not future.done():  # cancelled: nobody waits for it any more
                    future.set_result(None)
        callback(pid, returncode, *args)

    def remove_child_handler(self, pid: int) -> bool:
        return True  # the reader is removed once the process has exited

    def attach_loop(self, loop: asyncio.AbstractEventLoop | None) -> None:
        pass  # no loop of its own

    def is_active(self) -> bool:
        return True

    def close(self) -> None:
        pass

    def __enter__(self) -> PidfdWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def use_pidfds() -> bool:
    """Have asyncio watch the processes it starts with pidfds (once per process); True when
    this watcher is the one in use."""
    if not _installed:
        _installed.append(_install())
    return _installed[0]


def exit_of(pid: int) -> asyncio.Future[None] | None:
    """A future set when the process `pid`, started by asyncio while this module's watcher is
    in use, exits; None otherwise (not started so, already exited, or Python 3.12+): the
    caller watches it itself."""
    return _watcher[0].exit_of(pid) if _watcher else None


def _install() -> bool:
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return False  # 3.12 chose the pidfd watcher itself where it works
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:  # an older kernel, or a seccomp profile that refuses it
        return False
    watcher = PidfdWatcher()
    asyncio.set_child_watcher(watcher)
    _watcher.append(watcher)
    return True
