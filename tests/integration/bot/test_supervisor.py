"""bot/supervisor.py with real processes: a supervisor forking real Baton children.

Every wait is on a line the processes print (stdout: the child's READY/STOPPED, stderr: the
supervisor's log lines), with a deadline; nothing sleeps.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest

from bot.supervisor import Backoff, describe, exit_code

ROOT = Path(__file__).resolve().parents[3]
DEADLINE = 60.0
APP = "tests.integration.bot.supervised_app"


class Lines:
    """A stream's lines, each waited for with a deadline."""

    def __init__(self, stream: IO[str]) -> None:
        self.seen: list[str] = []
        self._q: queue.Queue[str | None] = queue.Queue()
        self._stream = stream
        self._pump_thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._pump_thread.start()

    def close(self) -> None:
        """After the process has exited: the pump reaches the end, then the pipe is closed."""
        self._pump_thread.join(timeout=DEADLINE)
        self._stream.close()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._q.put(line.rstrip("\n"))
        self._q.put(None)

    def wait_for(self, needle: str, timeout: float = DEADLINE) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._q.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line with {needle!r}; seen: {self.seen[-20:]}") from None
            if line is None:
                raise AssertionError(f"stream ended before {needle!r}; seen: {self.seen[-20:]}")
            self.seen.append(line)
            if needle in line:
                return line


class Supervised:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        assert proc.stdout is not None and proc.stderr is not None
        self.out = Lines(proc.stdout)
        self.log = Lines(proc.stderr)

    def ready(self) -> tuple[int, int]:
        _, pid, restarts = self.out.wait_for("READY").split()
        return int(pid), int(restarts)


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATON_")}
    env.update(
        BATON_DATABASE_URL=f"sqlite:///{tmp_path / 'baton.db'}",
        BATON_WORKFLOW_DIRS=json.dumps([str(tmp_path / "workflows")]),
        BATON_DATA_DIR=str(tmp_path / "data"),
        BATON_LOG_LEVEL="INFO",
        PYTHONPATH=str(ROOT),
    )
    return env


Start = Callable[..., Supervised]


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Start]:
    (tmp_path / "workflows").mkdir()
    started: list[Supervised] = []

    def start(mode: str, burst: int = 5, base: float = 1.0, max_delay: float = 30.0) -> Supervised:
        proc = subprocess.Popen(
            [sys.executable, "-m", APP, mode, str(burst), str(base), str(max_delay)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(tmp_path),
            cwd=tmp_path,
        )
        started.append(Supervised(proc))
        return started[-1]

    yield start
    for sup in started:
        if sup.proc.poll() is None:
            sup.proc.kill()
        sup.proc.wait()
        sup.out.close()
        sup.log.close()


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_child_killed_with_sigkill_is_replaced_at_once_and_the_new_one_serves(start: Start) -> None:
    sup = start("serve")
    first, restarts = sup.ready()
    assert restarts == 0 and first != sup.proc.pid
    os.kill(first, signal.SIGKILL)
    second, restarts = sup.ready()  # a new child reached `baton.running()`: engine started
    assert second != first and restarts == 1
    line = sup.log.wait_for("action=child_restart")
    assert f"child_pid={first}" in line and "killed by SIGKILL" in line
    assert sup.proc.poll() is None  # the supervisor lives on
    os.kill(sup.proc.pid, signal.SIGTERM)
    assert sup.proc.wait(timeout=DEADLINE) == 0


def test_sigterm_to_the_supervisor_reaches_the_child_once_and_both_exit(start: Start) -> None:
    sup = start("serve")
    child, _ = sup.ready()
    os.kill(sup.proc.pid, signal.SIGTERM)
    assert sup.out.wait_for("STOPPED") == f"STOPPED {child} 1"  # graceful: one signal, not forced
    assert sup.proc.wait(timeout=DEADLINE) == 0
    assert "signal=SIGTERM" in sup.log.wait_for("action=shutdown")  # the child's own handler ran
    assert "exited 0 after SIGTERM" in sup.log.wait_for("action=child_stopped")
    assert _gone(child)


def test_sigint_is_forwarded_too(start: Start) -> None:
    sup = start("serve")
    child, _ = sup.ready()
    os.kill(sup.proc.pid, signal.SIGINT)
    assert sup.out.wait_for("STOPPED") == f"STOPPED {child} 1"
    assert sup.proc.wait(timeout=DEADLINE) == 0


def test_a_crash_loop_backs_off_exponentially_and_a_stop_ends_the_wait(start: Start) -> None:
    sup = start("crash", burst=2, base=0.2, max_delay=0.4)
    starts = []
    for expected in range(5):
        _, restarts = sup.ready()
        assert restarts == expected
        starts.append(time.monotonic())
    delays = [sup.log.wait_for("action=child_crash_loop") for _ in range(2)]
    assert "restarting in 0.2s" in delays[0] and "3 restarts within 60s" in delays[0]
    assert "restarting in 0.4s" in delays[1]
    assert starts[3] - starts[2] >= 0.2 and starts[4] - starts[3] >= 0.4
    # the next wait is capped at 0.4 s; a SIGTERM during it ends the supervisor with the last status
    sup.log.wait_for("action=child_crash_loop")
    os.kill(sup.proc.pid, signal.SIGTERM)
    assert sup.proc.wait(timeout=DEADLINE) in (1, 128 + signal.SIGTERM)  # its exit, or the forwarded signal


def test_exit_2_is_a_configuration_error_and_is_not_restarted(start: Start) -> None:
    sup = start("config")
    child, _ = sup.ready()
    assert sup.proc.wait(timeout=DEADLINE) == 2
    assert f"child {child} exited 2 (configuration error): not restarted" in sup.log.wait_for(
        "action=child_config_error"
    )
    assert [line for line in sup.out.seen if line.startswith("READY")] == [f"READY {child} 0"]


def test_baton_worker_is_supervised_when_asked_and_stops_on_its_configuration_error(tmp_path: Path) -> None:
    """`baton worker` with the in-process executor exits 2 in its child: one child, no restart.
    Supervision is opt-in: --supervise or BATON_SUPERVISE=true; --no-supervise wins over the setting."""
    env = _env(tmp_path)

    def worker(*flags: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "bot.main", "worker", *flags], capture_output=True,
                              text=True, env={**env, **extra}, timeout=120)

    for supervised in (worker("--supervise"), worker(BATON_SUPERVISE="true")):
        assert supervised.returncode == 2
        assert "action=supervisor_started" in supervised.stderr
        assert "action=child_config_error" in supervised.stderr
        assert supervised.stderr.count("action=child_started") == 1
    for unsupervised in (worker(), worker("--no-supervise", BATON_SUPERVISE="true")):
        assert unsupervised.returncode == 2 and "supervisor" not in unsupervised.stderr


def test_the_stack_imported_before_the_fork_leaves_nothing_to_share(tmp_path: Path) -> None:
    """What `baton run` (Slack and Discord) and `baton worker` import in the supervisor creates
    no thread, event loop or socket; `fork_hazards` does see them when they exist."""
    script = textwrap.dedent(
        """
        import importlib, json, socket, threading
        import bot.serve, bot.worker
        from bot.main import _preload
        from bot.settings import load_settings
        from bot.supervisor import fork_hazards
        for module in _preload(load_settings(overrides={"prompt_provider": "openai"}), ["slack", "discord"]):
            importlib.import_module(module)
        clean = fork_hazards()
        s = socket.socket()
        t = threading.Thread(target=threading.Event().wait, daemon=True, name="pinger")
        t.start()
        print(json.dumps({"clean": clean, "dirty": fork_hazards()}))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=_env(tmp_path), timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["clean"] == []
    assert result["dirty"] == ["threads running: pinger", "1 open socket(s)"]


def test_backoff_policy_and_status_helpers() -> None:
    policy = Backoff(burst=5, window=60, base=1.0, max_delay=30.0)
    assert [policy.delay(n) for n in (1, 5, 6, 7, 8, 10, 20)] == [0, 0, 1, 2, 4, 16, 30]
    assert describe(9) == "killed by SIGKILL" and exit_code(9) == 137
    assert describe(2 << 8) == "exited 2" and exit_code(2 << 8) == 2
