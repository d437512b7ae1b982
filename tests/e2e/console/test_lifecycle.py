"""`baton run` without chat tokens: the console; SIGTERM lets in-flight work finish."""

from __future__ import annotations

import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
import time

from tests.e2e.console.cli import CALL_TIMEOUT, BatonCli

SLOW = """\
name: slow
description: One step that takes a while, then another
nodes:
  - id: nap
    bash: sleep 2 && echo rested
    replay: pure
  - id: after
    depends_on: [nap]
    bash: echo after
    replay: pure
"""


def start(baton: BatonCli, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "bot.main", *args],
        cwd=baton.home,
        env=baton.env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def type_until(process: subprocess.Popen[bytes], line: str, text: str) -> str:
    """Type `line` into the console, then read its output until `text` appears."""
    assert process.stdin is not None
    process.stdin.write(line.encode() + b"\n")
    process.stdin.flush()
    return read_until(process, text)


def read_until(process: subprocess.Popen[bytes], text: str, timeout: float = CALL_TIMEOUT) -> str:
    """Read the process's stdout until `text` appears (deadline, no polling sleeps)."""
    assert process.stdout is not None
    seen = b""
    deadline = time.monotonic() + timeout
    while text.encode() not in seen:
        remaining = deadline - time.monotonic()
        ready, _, _ = select.select([process.stdout], [], [], max(0.0, remaining))
        chunk = os.read(process.stdout.fileno(), 65536) if ready else b""
        if not chunk:
            raise AssertionError(f"{text!r} not printed; stdout so far:\n{seen.decode(errors='replace')}")
        seen += chunk
    return seen.decode()


def test_run_without_tokens_is_the_console_and_finishes_piped_work(baton: BatonCli) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bot.main", "run", "--user", "ana", "--conversation", "ops"],
        cwd=baton.home,
        env=baton.env(),
        input="run gated from-a-pipe\n",
        capture_output=True,
        text=True,
        timeout=CALL_TIMEOUT,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert "Baton console" in done.stdout
    (run,) = baton.runs()
    assert (run.workflow, run.status, run.requester) == ("gated", "paused", "console:ana")
    assert "[1] Approve" in done.stdout
    # the console is the screen: no info log lines between the chat (BATON_LOG_LEVEL unset)
    assert "level=INFO" not in done.stderr + done.stdout


def test_sigterm_stops_input_and_lets_the_running_step_finish(baton: BatonCli) -> None:
    (baton.workflows / "slow.yaml").write_text(SLOW)
    with start(baton, "run", "--user", "ana") as process:
        try:
            type_until(process, "run slow now", "nap running")

            process.send_signal(signal.SIGTERM)  # stdin stays open: only the signal ends the console

            assert process.wait(timeout=CALL_TIMEOUT) == 0
        finally:
            if process.poll() is None:
                process.kill()
    (run,) = baton.runs()
    assert run.status == "completed"  # the in-flight step got its grace period
    assert run.lease_owner is None


def test_a_taken_web_port_means_no_pages_and_no_open_run_link_to_it(baton: BatonCli) -> None:
    """Another program holds BATON_WEB_PORT: `baton run` says the pages are not served, goes on
    without them, and offers no "Open run" that would lead to that program."""
    import socket

    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        port = other.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "bot.main", "run", "--user", "ana", "--conversation", "ops"],
            cwd=baton.home, env={**baton.env(), "BATON_WEB_PORT": str(port)},
            input="run gated taken-port\nopen\n", capture_output=True, text=True, timeout=CALL_TIMEOUT,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert "action=web_failed" in done.stderr and f":{port} is not free" in done.stderr
    (run,) = baton.runs()
    assert run.status == "paused"  # it went on without pages
    assert "Open run" not in done.stdout and f":{port}/" not in done.stdout
    assert "Run pages are turned off" in done.stdout  # `open` says so


NAGGED = """\
name: nagged
nodes:
  - id: review
    approval:
      question: "Ship it?"
      approvers: [group:sre]
      timeout: {timeout}
      remind: [{remind}]
  - id: ship
    depends_on: [review]
    bash: echo shipped
    replay: pure
"""


def test_the_console_prints_a_reminders_direct_copy_to_its_person(baton: BatonCli) -> None:
    (baton.home / "workflows" / "nagged.yaml").write_text(NAGGED.format(timeout="1h", remind="2s"))
    baton.env_extra.update(BATON_DEADLINE_POLL_SECONDS="0.3", BATON_ACCESS=json.dumps(
        {"groups": {"sre": ["console:sam"]}, "run": {"*": ["console:sam"]}, "approve": {"*": ["group:sre"]}}))
    with start(baton, "run", "--user", "sam", "--conversation", "ops") as process:
        assert process.stdin is not None
        process.stdin.write(b"run nagged\n")
        process.stdin.flush()
        seen = read_until(process, "(to you directly)")
        process.stdin.close()
        process.wait(timeout=CALL_TIMEOUT)
    assert "⏰ Reminder: nagged run" in seen.split("(to you directly)", 1)[1]


def test_a_gate_that_timed_out_while_baton_was_down_has_its_message_closed_after_the_restart(
    baton: BatonCli,
) -> None:
    (baton.home / "workflows" / "nagged.yaml").write_text(NAGGED.format(timeout="2s", remind="1s"))
    baton.env_extra.update(BATON_DEADLINE_POLL_SECONDS="0.3", BATON_ACCESS=json.dumps(
        {"groups": {"sre": ["console:sam"]}, "run": {"*": ["console:sam"]}, "approve": {"*": ["group:sre"]}}))
    first = subprocess.run(
        [sys.executable, "-m", "bot.main", "run", "--user", "sam", "--conversation", "ops"],
        cwd=baton.home, env=baton.env(), input="run nagged\n", capture_output=True, text=True,
        timeout=CALL_TIMEOUT, check=False)
    assert first.returncode == 0 and "waits for approval" in first.stdout, first.stderr
    with sqlite3.connect(baton.database_url.removeprefix("sqlite:///")) as db:
        (due,) = db.execute("SELECT due_at FROM gate_deadlines WHERE name = 'timeout'").fetchone()
    time.sleep(max(0.0, due - time.time()) + 0.2)  # the gate's timeout passes while no Baton runs
    with start(baton, "run", "--user", "sam", "--conversation", "ops") as process:
        seen = read_until(process, "⌛ No decision in time")
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=CALL_TIMEOUT)
    assert "was rejected by its timeout rule and cancelled; its gate is closed" in seen


def test_a_killed_unsafe_step_needs_attention_and_the_steps_after_it_wait(baton: BatonCli) -> None:
    (baton.workflows / "risky.yaml").write_text(SLOW.replace("name: slow", "name: risky")
                                                .replace("sleep 2 && echo rested\n    replay: pure",
                                                         "sleep 30 && echo rested\n    replay: unsafe"))
    with start(baton, "run", "--user", "ana") as process:
        try:
            type_until(process, "run risky now", "nap running")
        finally:
            process.kill()  # the step may have had its effect: nothing recorded it
            process.wait(timeout=CALL_TIMEOUT)
    (run,) = baton.runs()
    status = baton.say(f"status {run.id}")[-1]  # this process recovers the run the dead one held
    assert status["run_status"] == "needs_attention", status["text"]
    assert "after queued" in status["text"] and "skipped" not in status["text"]
