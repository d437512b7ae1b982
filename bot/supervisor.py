"""A small parent process that keeps a serving child alive (opt-in: `--supervise`).

    code = supervise(serve_child, name="run")   # in the parent, after importing the stack

`baton run --supervise` (when it serves chat platforms) and `baton worker --supervise`
import everything once in this parent, then fork the child that serves. Forking after import
skips the interpreter start and the imports that a cold relaunch pays (docs/operations.md
has the figures); the child's `Engine.start()` then takes over the dead child's runs as it
does after any restart. Nothing that must not be shared is created before the fork: no event
loop, thread, database connection or socket
(`fork_hazards` checks; with one present the parent runs unsupervised instead).

- The child dies abnormally (a signal, or a non-zero exit other than 2): a new child is
  forked at once. More than `burst` restarts within `window` seconds is a crash loop: the
  next ones wait `backoff_base * 2**k` seconds, at most `max_backoff`.
- The child exits 0, or 2 (a configuration error: restarting would fail the same way):
  the supervisor exits with that status.
- SIGTERM/SIGINT to the supervisor are forwarded to the child (which shuts down
  gracefully); the supervisor then exits with the child's status. The child has a process
  group of its own, so Ctrl-C in a terminal reaches it once (through the supervisor), and
  on Linux it gets SIGTERM if the supervisor itself dies.

The child learns its place from its argument: 0 for the first child, n for the n-th
restart (also in `BATON_SUPERVISOR_RESTARTS`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import signal
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("baton.supervisor")

#: the exit status of a configuration error (bot.main.EXIT_USAGE): never restarted
EXIT_CONFIG = 2
RESTARTS_ENV = "BATON_SUPERVISOR_RESTARTS"
_FORWARDED = (signal.SIGTERM, signal.SIGINT)
_PR_SET_PDEATHSIG = 1

Child = Callable[[int], int]


@dataclass(frozen=True)
class Backoff:
    """Crash-loop policy: `burst` restarts within `window` s are immediate, later ones wait."""

    burst: int = 5
    window: float = 60.0
    base: float = 1.0
    max_delay: float = 30.0

    def delay(self, recent: int) -> float:
        """Seconds to wait before a restart, given `recent` restarts within the window (this
        one included)."""
        if recent <= self.burst:
            return 0.0
        return float(min(self.max_delay, self.base * 2 ** (recent - self.burst - 1)))


def fork_hazards() -> list[str]:
    """What would be unsafe to share with a forked child: threads, a running event loop,
    open sockets (a database connection is one). Empty when forking is safe."""
    found: list[str] = []
    others = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if others:
        found.append(f"threads running: {', '.join(others)}")
    try:
        asyncio.get_running_loop()
        found.append("an event loop is running")
    except RuntimeError:
        pass
    fds = Path("/proc/self/fd")
    if fds.is_dir():
        sockets = 0
        for fd in fds.iterdir():
            try:
                sockets += os.readlink(fd).startswith("socket:")
            except OSError:  # the fd of the directory listing itself, closed by now
                continue
        if sockets:
            found.append(f"{sockets} open socket(s)")
    return found


def describe(status: int) -> str:
    """`exited 1` / `killed by SIGKILL` for a `waitpid` status."""
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        try:
            return f"killed by {signal.Signals(signum).name}"
        except ValueError:
            return f"killed by signal {signum}"
    return f"exited {os.waitstatus_to_exitcode(status)}"


def exit_code(status: int) -> int:
    """The shell's view of a `waitpid` status: the exit code, or 128 + the signal."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


class Supervisor:
    def __init__(self, child: Child, *, name: str, backoff: Backoff | None = None) -> None:
        self.child = child
        self.name = name
        self.backoff = backoff or Backoff()
        self.pid: int | None = None
        self.stop_signal: int | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._restarts: deque[float] = deque()

    # -- the parent --------------------------------------------------------------------

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.stop_signal = signum
        with contextlib.suppress(OSError):  # a full pipe: a wake-up is pending anyway
            os.write(self._wake_w, b"\0")  # ends a backoff wait
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):  # exited just now: waitpid reaps it
                os.kill(self.pid, signum)

    def run(self) -> int:
        previous = {sig: signal.signal(sig, self._on_signal) for sig in _FORWARDED}
        try:
            return self._loop()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            os.close(self._wake_r)
            os.close(self._wake_w)

    def _loop(self) -> int:
        restarts = 0
        code = 0
        while True:
            # Stop signals are held while forking: the handler runs only once the child's pid
            # is known (so the signal is forwarded), and the child resets them before it
            # receives any.
            signal.pthread_sigmask(signal.SIG_BLOCK, _FORWARDED)
            try:
                if self.stop_signal is not None:  # arrived after the last child exited
                    return code
                self.pid = self._fork(restarts)
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORWARDED)
            log.info(
                "child %d started%s",
                self.pid,
                f" (restart {restarts})" if restarts else "",
                extra={"action": "child_started", "child_pid": self.pid, "restarts": restarts},
            )
            _, status = os.waitpid(self.pid, 0)  # signals are forwarded while we wait
            pid, self.pid = self.pid, None
            how = describe(status)
            code = exit_code(status)
            if self.stop_signal is not None:
                log.info(
                    "child %d %s after %s; supervisor exits",
                    pid,
                    how,
                    signal.Signals(self.stop_signal).name,
                    extra={"action": "child_stopped", "child_pid": pid, "exit_code": code},
                )
                return code
            if code == 0:
                log.info("child %d exited 0; supervisor exits", pid, extra={"action": "child_stopped"})
                return 0
            if os.WIFEXITED(status) and code == EXIT_CONFIG:
                log.error(
                    "child %d exited %d (configuration error): not restarted",
                    pid,
                    code,
                    extra={"action": "child_config_error", "child_pid": pid, "exit_code": code},
                )
                return code
            restarts += 1
            delay = self._note_restart()
            if delay:
                log.warning(
                    "child %d %s; %d restarts within %.0fs: crash loop, restarting in %.1fs",
                    pid,
                    how,
                    len(self._restarts),
                    self.backoff.window,
                    delay,
                    extra={"action": "child_crash_loop", "child_pid": pid, "exit_code": code, "delay": delay},
                )
                if self._wait(delay):
                    log.info("stopped during backoff; supervisor exits", extra={"action": "child_stopped"})
                    return code
            else:
                log.warning(
                    "child %d %s; restarting now",
                    pid,
                    how,
                    extra={"action": "child_restart", "child_pid": pid, "exit_code": code},
                )

    def _note_restart(self) -> float:
        now = time.monotonic()
        self._restarts.append(now)
        while self._restarts and now - self._restarts[0] > self.backoff.window:
            self._restarts.popleft()
        return self.backoff.delay(len(self._restarts))

    def _wait(self, seconds: float) -> bool:
        """Sleep `seconds`, or less when a stop signal arrives (True then)."""
        deadline = time.monotonic() + seconds
        while self.stop_signal is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            readable, _, _ = select.select([self._wake_r], [], [], left)
            if readable:
                os.read(self._wake_r, 64)
        return True

    def _fork(self, restarts: int) -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid:
            return pid
        self._become_child(restarts, parent)  # never returns
        raise AssertionError("unreachable")

    # -- the child ---------------------------------------------------------------------

    def _become_child(self, restarts: int, parent: int) -> None:
        code = 1
        try:
            for sig in _FORWARDED:
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORWARDED)
            os.close(self._wake_r)
            os.close(self._wake_w)
            os.setpgid(0, 0)
            _die_with_parent(parent)
            os.environ[RESTARTS_ENV] = str(restarts)
            code = self.child(restarts)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            try:
                logging.shutdown()
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)


def _die_with_parent(parent: int) -> None:
    """Linux: SIGTERM this process when the supervisor dies (prctl PR_SET_PDEATHSIG)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # no libc prctl: the child just outlives a killed supervisor
        return
    if os.getppid() != parent:  # the supervisor died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


def supervise(child: Child, *, name: str, backoff: Backoff | None = None) -> int:
    """Run `child(restarts)` in forked children until one ends cleanly or we are stopped; the
    exit status to leave with. With fork hazards present (see `fork_hazards`), `child(0)` runs
    in this process instead, unsupervised, and that is logged."""
    hazards = fork_hazards()
    if hazards:
        log.warning(
            "not supervising %s: %s before the fork",
            name,
            "; ".join(hazards),
            extra={"action": "supervise_skipped"},
        )
        return child(0)
    log.info(
        "supervising %s (pid %d): a child that dies is restarted at once",
        name,
        os.getpid(),
        extra={"action": "supervisor_started"},
    )
    return Supervisor(child, name=name, backoff=backoff).run()
