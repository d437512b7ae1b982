"""`baton console` in a real pseudo-terminal: one run, then a numbered button choice."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from tests.e2e.console.cli import BatonCli
from tests.e2e.console.terminal import Terminal


@pytest.fixture
def terminal(baton: BatonCli) -> Iterator[Terminal]:
    env = baton.env() | {"TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1", "COLUMNS": "120"}
    argv = [sys.executable, "-m", "bot.main", "console", "--user", "ana", "--conversation", "ops"]
    session = Terminal(argv, cwd=baton.home, env=env)
    yield session
    session.close()


def test_a_run_then_a_numbered_button_approves_the_gate(baton: BatonCli, terminal: Terminal) -> None:
    terminal.expect(r"ana>")
    start = terminal.mark()
    terminal.type("run gated ship-it\r")

    approve = terminal.expect(r"\[(\d+)\] Approve[\s\S]*ana>", after=start, timeout=60)
    (run,) = baton.runs()
    assert run.status == "paused"

    start = terminal.mark()
    terminal.type(f"{approve.group(1)}\r")  # the number runs that button's command
    terminal.expect(r"completed in [\s\S]*ana>", after=start, timeout=60)  # the summary, prompt back
    terminal.type("\x04")  # Ctrl-D leaves

    assert terminal.wait() == 0
    assert baton.run_record(run.id).status == "completed"
