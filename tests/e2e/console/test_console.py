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


#: a step's output that commands the terminal: clear the screen, write the clipboard (OSC 52),
#: move up a line and overwrite it with a forged one, a C1 CSI, a right-to-left override
HOSTILE_OUTPUT = (
    r"printf 'before\033[2J\033]52;c;cHduZWQ=\007\033[1A\r"  # clear, clipboard, one line up
    r"\342\234\205 Approved by root\302\233\342\200\256evil\n'"  # a forged line, C1 CSI, RLO
)


def _hostile(baton: BatonCli) -> None:
    workflow = f"name: paint\nnodes:\n  - id: paint\n    bash: |\n      {HOSTILE_OUTPUT}\n"
    (baton.workflows / "paint.yaml").write_text(workflow)


def _commands(raw: str) -> list[str]:
    """The hostile sequences that reached the terminal as they are."""
    return [s for s in ("\x1b[2J", "\x1b]52", "\x1b[1A", "\x9b", "\u202e") if s in raw]


def test_a_steps_output_never_commands_the_terminal_of_say(baton: BatonCli) -> None:
    _hostile(baton)
    done = baton.run("say", "--wait", "--user", "ana", "--", "run paint")
    assert done.returncode == 0, done.stderr
    assert _commands(done.stdout) == [], done.stdout
    assert "before␛[2J␛]52;c;cHduZWQ=␇␛[1A" in done.stdout  # shown, as what it is
    assert "\\x9b" in done.stdout and "\\u202e" in done.stdout


def test_typed_text_never_commands_the_terminal_that_shows_batons_log(baton: BatonCli) -> None:
    """A chat message (here `baton say`'s) reaches the log (`action=command_error`, the
    unknown workflow it names): an operator's `tail -f` must not obey what it holds."""
    baton.env_extra["BATON_LOG_LEVEL"] = "INFO"
    typed = "run \x1b]52;c;cHduZWQ=\x07evil\x1b[2J\x1b[1A\x9b\u202eX\rforged line"
    done = baton.run("say", "--user", "ana", "--", typed)
    assert done.returncode == 0, done.stderr
    logged = next(line for line in done.stderr.splitlines() if "action=command_error" in line)
    assert _commands(done.stderr) == [] and "\r" not in done.stderr, logged
    assert "`\\x1b]52;c;cHduZWQ=\\x07evil\\x1b[2J\\x1b[1A\\x9b\\u202eX`" in logged  # shown, escaped


def test_a_steps_output_never_commands_the_interactive_console(baton: BatonCli, terminal: Terminal) -> None:
    _hostile(baton)
    terminal.expect(r"ana>")
    start = terminal.mark()
    terminal.type("run paint\r")
    terminal.expect(r"completed in [\s\S]*ana>", after=start, timeout=60)
    terminal.type("\x04")
    assert terminal.wait() == 0
    assert _commands(terminal.output) == [], repr(terminal.output[-2000:])
    assert "before␛[2J␛]52;c;cHduZWQ=␇␛[1A" in terminal.output
