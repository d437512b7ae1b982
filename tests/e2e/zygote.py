"""`python -m bot.main <args>` as a real process, forked from an interpreter that imported
Baton's modules once (a "zygote"), for tests that run `baton` hundreds of times.

A cold `baton say` spends most of its CPU importing (SQLAlchemy, pydantic, typer and Baton's
own few hundred modules: about 0.35 s of 0.5 s); the console end-to-end tests ran it some
five hundred times per suite. Here one process per test process imports them and then only
forks: each call is a new process with its own pid, working directory, environment, stdio
and exit status, running `bot.main` as `__main__` exactly as `python -m bot.main` does (its
`if __name__ == "__main__"` block, and its exit, `core.exiting.leave`: a working thread
waited for, atexit run, stdio flushed, no teardown). Nothing of Baton runs in the zygote:
importing reads no setting (no module reads the environment at import), so each call reads
its own. What a fork does not repeat is
the interpreter's start itself, measured by bench/ and tests of the start path, which run
`python -m bot.main` cold. BATON_TEST_COLD_START=1 runs every call cold instead.

    zygote().run(argv, cwd=home, env=env, timeout=60)  # a subprocess.CompletedProcess[str]

Protocol, one Unix-socket connection per call (calls may overlap): the client sends its
stdin, stdout and stderr descriptors (SCM_RIGHTS) and a JSON line {args, cwd, env, session}; the zygote
forks a waiter, which forks the call, writes the call's pid and then its exit status.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
#: what `baton say` imports besides `bot.main`'s own imports (`python -X importtime`)
#: and what `baton run` with Slack imports (tests/e2e/process.py's `forked` processes)
PRELOAD = ("bot.serve", "jinja2", "adapters.slack", "adapters.slack.app")
COLD = "BATON_TEST_COLD_START"


class Zygote:
    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="baton-zygote-")
        self.path = os.path.join(self._dir, "socket")
        env = {k: v for k, v in os.environ.items() if not k.startswith("BATON_")}
        env["PYTHONPATH"] = str(REPO)
        # its stdin is a pipe from this process: at its end (even a SIGKILL) the zygote exits
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.e2e.zygote", self.path],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()  # a line once the modules are imported and it listens
        if ready != b"ready\n":
            raise RuntimeError(f"the zygote did not start ({self.proc.wait()})")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        if self.proc.returncode is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:  # its "ready" line: read at the start
            self.proc.stdout.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
            os.rmdir(self._dir)

    def fork(
        self, args: Sequence[str], *, cwd: Path, env: Mapping[str, str], stdio: Sequence[int],
        session: bool = False,
    ) -> socket.socket:
        """Start a call with these stdin, stdout and stderr descriptors (`session`: in a session
        of its own, as `start_new_session=True`); the connection then yields two lines, the
        call's pid and, once it ended, its exit status (negative: the signal that ended it)."""
        conn = socket.socket(socket.AF_UNIX)
        try:
            conn.connect(self.path)
            socket.send_fds(conn, [b"x"], list(stdio))
            request = {"args": list(args), "cwd": str(cwd), "env": dict(env), "session": session}
            conn.sendall(json.dumps(request).encode() + b"\n")
            conn.shutdown(socket.SHUT_WR)
        except BaseException:
            conn.close()
            raise
        return conn

    def run(
        self, args: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """Like `subprocess.run([python, -m, bot.main, *args], capture_output=True, text=True)`."""
        argv = [sys.executable, "-m", "bot.main", *args]
        with (
            tempfile.TemporaryFile() as out,
            tempfile.TemporaryFile() as err,
            open(os.devnull, "rb") as stdin,
            socket.socket(socket.AF_UNIX) as conn,
        ):
            conn.settimeout(timeout)
            conn.connect(self.path)
            socket.send_fds(conn, [b"x"], [stdin.fileno(), out.fileno(), err.fileno()])
            conn.sendall(json.dumps({"args": list(args), "cwd": str(cwd), "env": dict(env)}).encode() + b"\n")
            conn.shutdown(socket.SHUT_WR)
            reader = conn.makefile("rb")
            pid, status = None, b""
            with contextlib.suppress(TimeoutError):
                pid = int(reader.readline())
                status = reader.readline()
            if not status:
                if pid is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired(argv, timeout, _read(out), _read(err))
            return subprocess.CompletedProcess(argv, int(status), _read(out), _read(err))


def _read(file: Any) -> str:
    file.seek(0)
    return str(file.read().decode("utf-8", "replace"))


_zygote: Zygote | None = None
_lock = threading.Lock()


def zygote() -> Zygote:
    """This test process's zygote (started at the first call)."""
    global _zygote
    with _lock:
        if _zygote is None or _zygote.proc.poll() is not None:
            _zygote = Zygote()
            atexit.register(_zygote.close)
        return _zygote


def cold_start() -> bool:
    """BATON_TEST_COLD_START=1: every call a new interpreter."""
    return os.environ.get(COLD) == "1"


def run_baton(
    args: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float, cold: bool = False
) -> subprocess.CompletedProcess[str]:
    """`python -m bot.main <args>`: forked from this test process's zygote (started at the first
    call), or a new interpreter (`cold`, or BATON_TEST_COLD_START=1): a test that looks at the
    process from outside (its `/proc/<pid>/environ` is the environment it was started with, its
    `cmdline` the zygote's) runs it cold."""
    if cold or cold_start():
        return subprocess.run(
            [sys.executable, "-m", "bot.main", *args],
            cwd=cwd,
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    return zygote().run(args, cwd=cwd, env=env, timeout=timeout)


# -- the zygote process ------------------------------------------------------------------


def _serve(path: str) -> tuple[dict[str, Any], list[int]]:
    """Accept calls until this process's stdin ends; returns only in a forked call."""
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(64)
    events = selectors.DefaultSelector()
    events.register(listener, selectors.EVENT_READ)
    events.register(sys.stdin, selectors.EVENT_READ)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        with contextlib.suppress(ChildProcessError):  # reap the waiters that are done: their
            while os.waitpid(-1, os.WNOHANG)[0]:  # CPU time counts in the test process's children
                pass
        for key, _ in events.select(timeout=1.0):
            if key.fileobj is sys.stdin:
                sys.exit(0)  # the test process ended
            conn, _ = listener.accept()
            if os.fork() == 0:  # the waiter
                events.close()
                listener.close()
                _, fds, _, _ = socket.recv_fds(conn, 1, 3)
                request = json.loads(conn.makefile("rb").read())
                pid = os.fork()
                if pid == 0:  # the call
                    conn.close()
                    return request, fds
                for fd in fds:
                    os.close(fd)
                conn.sendall(f"{pid}\n".encode())
                _, status = os.waitpid(pid, 0)
                with contextlib.suppress(OSError):  # the client gave up (timeout)
                    conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
                os._exit(0)
            conn.close()


def _call(request: dict[str, Any], fds: list[int]) -> None:
    """Become `python -m bot.main <args>` started in `cwd` with `env` and these stdio."""
    if request.get("session"):
        os.setsid()  # its pid is its process group's and session's id, as with start_new_session
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0] = os.getcwd()  # as `-m` puts the working directory first
    sys.argv = ["-m", *request["args"]]  # run_module sets argv[0] to bot/main.py, as `-m` does
    runpy.run_module("bot.main", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    import bot

    __import__("bot.main")  # everything it imports stays; itself runs anew in each call as __main__
    del sys.modules["bot.main"], bot.main
    for name in PRELOAD:
        __import__(name)
    gc.collect()
    gc.freeze()  # the calls share these pages; their collections never scan them
    _call(*_serve(sys.argv[1]))
