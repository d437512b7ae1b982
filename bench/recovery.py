"""Recovery after kill -9: the parent that kills a run at step 500 and restarts the process.

Cold relaunch (sides `baton`, `dbos`): run the first phase until its step `kill_at`
announces itself, SIGKILL it, then spawn the relaunch and time, from that spawn,
    running again: the interrupted step executes again in the new process,
    completed:     the run/workflow has finished.
Also reported: the same two spans from the moment the engine starts in the new process
(`Engine.start()` / `DBOS.launch()`), which leaves out the interpreter and imports.

Outer restart (side `baton-outer`): `baton run` without `--supervise`, as systemd restarts it:
the same kill, then this parent (playing systemd) reaps the dead process, waits systemd's
default `RestartSec` (`OUTER_RESTART_SEC`) and spawns the relaunch; timed from the kill.

Supervised restart (side `baton-supervised`): one process runs the real `bot.supervisor`,
whose first child runs the chain; the SIGKILL goes to that child (its pid is in the
`at_kill` line) and the spans are timed from the kill: the supervisor reaps it and forks a
new child with the stack already imported, and that child's `Engine.start()` takes over.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from bench.protocol import ROOT, ChildFailed, child_env, error_tail, parse

SIDES = {
    "baton": ("bench.baton_recovery", "--dir", "SQLite WAL, sync NORMAL; takes over a dead pid's lease"),
    "baton-outer": (
        "bench.baton_recovery",
        "--dir",
        "SQLite WAL, sync NORMAL; unsupervised, the service manager reaps and spawns a new process",
    ),
    "baton-supervised": (
        "bench.baton_recovery",
        "--dir",
        "SQLite WAL, sync NORMAL; bot/supervisor.py forks a new child, which takes over the lease",
    ),
    "dbos": ("bench.peers.dbos_recovery", "--db", "SQLite (DBOS default); launch() recovers pending"),
}
#: where the `to_*` spans start, per side
ORIGIN = {"baton": "spawn", "baton-outer": "kill", "baton-supervised": "kill", "dbos": "spawn"}
#: seconds systemd waits between a service's death and its restart by default (`RestartSec=100ms`)
OUTER_RESTART_SEC = 0.1


@dataclass(frozen=True)
class RecoverySample:
    side: str
    durability: str
    to_running_s: float  # restart (spawn, or the SIGKILL: `ORIGIN`) -> interrupted step runs again
    to_complete_s: float  # restart -> finished
    engine_to_running_s: float  # engine start in the new process -> step runs again
    engine_to_complete_s: float
    executions: int  # steps executed in the relaunched process (Baton: journal entries of the run)
    status: str


class _Lines:
    """A child's stdout, line by line, readable with a deadline."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no `{prefix}` within {timeout:.0f} s")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty as exc:
                raise TimeoutError(f"no `{prefix}` within {timeout:.0f} s") from exc
            if line is None:
                raise EOFError(f"the child exited before `{prefix}`")
            self.seen.append(line)
            if line.startswith(prefix):
                return line


#: Baton's sides start as the `baton` executable does (bot/startup.py `prepare`): the cyclic GC
#: paused before anything is imported, until the process has started, and the code Python
#: generates while modules load read from its cache (bot/compile_cache.py).
_AS_BATON = (
    "from bot.startup import prepare; prepare(); "
    "import runpy; runpy.run_module({!r}, run_name='__main__')"
)


def _spawn(module: str, args: list[str]) -> subprocess.Popen[str]:
    start = ["-c", _AS_BATON.format(module)] if module.startswith("bench.baton_") else ["-m", module]
    return subprocess.Popen(
        [sys.executable, *start, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
        cwd=ROOT,
    )


def _event_time(line: str) -> float:
    return float(line.split()[2])


def measure(side: str, *, n: int = 1000, kill_at: int = 500, timeout: float = 240.0) -> RecoverySample:
    if side == "baton-supervised":
        return measure_supervised(n=n, kill_at=kill_at, timeout=timeout)
    module, flag, durability = SIDES[side]
    with tempfile.TemporaryDirectory(prefix=f"bench-recovery-{side}-") as tmp:
        target = tmp if flag == "--dir" else str(Path(tmp) / "dbos.sqlite")
        common = [flag, target, "--n", str(n), "--kill-at", str(kill_at)]
        first = _spawn(module, ["--phase", "first", *common])
        try:
            assert first.stdout is not None
            _Lines(first.stdout).wait_for("EVENT at_kill", timeout)
        except (TimeoutError, EOFError) as exc:
            first.kill()
            _, err = first.communicate()
            raise ChildFailed(f"{side} recovery (first run)", f"{exc}: {error_tail(err)}") from exc
        killed = time.time()
        os.kill(first.pid, signal.SIGKILL)
        first.communicate()
        if ORIGIN[side] == "kill":  # the service manager saw the exit: it restarts after RestartSec
            time.sleep(OUTER_RESTART_SEC)

        spawned = time.time()
        second = _spawn(module, ["--phase", "relaunch", *common])
        assert second.stdout is not None
        lines = _Lines(second.stdout)
        try:
            events = _after_restart(lines, timeout)
        except (TimeoutError, EOFError) as exc:
            second.kill()
            _, err = second.communicate()
            raise ChildFailed(f"{side} recovery (relaunch)", f"{exc}: {error_tail(err)}") from exc
        second.communicate(timeout=timeout)
    return _sample(side, durability, killed if ORIGIN[side] == "kill" else spawned, *events)


def measure_supervised(*, n: int = 1000, kill_at: int = 500, timeout: float = 240.0) -> RecoverySample:
    """Kill the supervised child at `kill_at`; time from the kill to running again / completed."""
    side = "baton-supervised"
    module, flag, durability = SIDES[side]
    with tempfile.TemporaryDirectory(prefix="bench-recovery-supervised-") as tmp:
        common = [flag, tmp, "--n", str(n), "--kill-at", str(kill_at)]
        proc = _spawn(module, ["--phase", "supervised", *common])
        assert proc.stdout is not None
        lines = _Lines(proc.stdout)
        try:
            child = int(lines.wait_for("EVENT at_kill", timeout).split()[3])
            if child == proc.pid:
                raise EOFError("the chain ran in the supervisor itself, not in a forked child")
            killed = time.time()
            os.kill(child, signal.SIGKILL)
            events = _after_restart(lines, timeout)
            proc.wait(timeout=timeout)
        except (TimeoutError, EOFError, subprocess.TimeoutExpired) as exc:
            proc.kill()
            _, err = proc.communicate()
            raise ChildFailed(f"{side} recovery", f"{exc}: {error_tail(err)}") from exc
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise ChildFailed(f"{side} recovery", f"supervisor exit {proc.returncode}: {error_tail(err)}")
    return _sample(side, durability, killed, *events)


def _after_restart(lines: _Lines, timeout: float) -> tuple[float, float, float, str]:
    """The restarted process's engine start, running again and completed times, and its result line."""
    engine = _event_time(lines.wait_for("EVENT engine_starting", timeout))
    running = _event_time(lines.wait_for("EVENT running_again", timeout))
    done = _event_time(lines.wait_for("EVENT completed", timeout))
    return engine, running, done, lines.wait_for("BENCH_RESULT", timeout)


def _sample(
    side: str, durability: str, restart: float, engine: float, running: float, done: float, result_line: str
) -> RecoverySample:
    """Spans measured from `restart` (a spawn or a kill) and from the engine's start."""
    result = parse(result_line) or {}
    return RecoverySample(
        side=side,
        durability=durability,
        to_running_s=running - restart,
        to_complete_s=done - restart,
        engine_to_running_s=running - engine,
        engine_to_complete_s=done - engine,
        executions=int(result.get("executions", -1)),
        status=str(result.get("status", "?")),
    )
