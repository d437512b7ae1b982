"""Whatever bytes or text arrive, Baton answers with one line and never a traceback.

NUL bytes, lone surrogates and invalid UTF-8, in the message, in `--args`/`--set` (also as
JSON escapes), in `baton say`'s arguments and in `--user`, are refused at the edge with one
line and nothing is stored. Driven through `baton say` as a subprocess and through the
handler of the application `build_baton(settings)` assembles.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.app import Baton, build_baton
from core.commands.input_text import text_problem
from core.commands.messages import ChatMessage
from core.config import Settings
from core.render import render
from tests.e2e.console.cli import CALL_TIMEOUT, REPO, BatonCli, baton_env

REFUSED = "which Baton does not accept; remove it and send it again."
UNEXPECTED = "Something unexpected went wrong"

#: what a person (or a broken client) might put before the awkward part
_PREFIXES = [
    "", "run hello ", "run notes --force ", "run hello --args ", "run hello --set name=", "status ",
    "approve ", "lgtm ",
]  # fmt: skip
_ESCAPES = ['\'{"a": "\\u0000"}\'', '\'{"a": "\\ud800"}\'', '\'{"\\udcff": 1}\'', "'\"\\u0000\"'"]

texts = st.one_of(
    st.text(),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())),
    st.binary().map(lambda b: b.decode("utf-8", "surrogateescape")),
    st.sampled_from(_ESCAPES),
)
messages = st.tuples(st.sampled_from(_PREFIXES), texts).map("".join)


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


# -- `baton say` as a subprocess -------------------------------------------------------------


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> BatonCli:
    home = tmp_path_factory.mktemp("edge")
    return BatonCli.create(home, f"sqlite:///{home / 'baton.db'}")


def _say(cli: BatonCli, text: bytes, user: bytes = b"ana") -> subprocess.CompletedProcess[bytes]:
    """`baton say --json` with raw bytes as its arguments (what a shell passes)."""
    argv = [os.fsencode(sys.executable), b"-m", b"bot.main", b"say", b"--json", b"--user", user, b"--", text]
    return subprocess.run(argv, cwd=cli.home, env=cli.env(), capture_output=True, timeout=CALL_TIMEOUT,
                          check=False)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    text=st.binary().filter(lambda b: b"\x00" not in b),  # argv cannot hold NUL (below)
    user=st.sampled_from([b"ana", b"an\xffa", b"\xed\xa0\x80"]),  # ok, invalid UTF-8, a surrogate
)
def test_baton_say_answers_any_bytes_with_one_line_and_never_a_traceback(
    cli: BatonCli, text: bytes, user: bytes
) -> None:
    done = _say(cli, text, user)
    out, err = done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in out + err and UNEXPECTED not in out + err
    decoded = os.fsdecode(text)
    if text_problem(os.fsdecode(user)) or text_problem(decoded):
        assert done.returncode == 2, err
        (line,) = _lines(err)  # one line: what is wrong and what to do
        assert line.startswith("error: ") and line.endswith(REFUSED)
        assert out == ""
    else:
        assert done.returncode == 0, err


def test_json_escapes_of_nul_and_surrogates_in_args_are_refused_with_one_line(cli: BatonCli) -> None:
    for escape in _ESCAPES:
        for prefix in ("run hello --args ", "run hello --set name="):
            done = _say(cli, (prefix + escape).encode())
            assert done.returncode == 0, done.stderr
            out = done.stdout.decode()
            assert "Traceback" not in out and UNEXPECTED not in out
            assert REFUSED in out, out
    assert cli.runs() == []  # nothing started


def test_a_nul_byte_in_the_text_cannot_reach_baton_through_argv_but_is_refused_by_the_console() -> None:
    line = "run hello \x00"
    with pytest.raises(ValueError, match="null byte"):  # the OS cannot pass it as an argument
        subprocess.run([sys.executable, "-c", "pass", line], check=False)
    assert text_problem(line) == "a NUL byte"


def test_a_nul_byte_piped_into_the_console_is_refused_with_one_line(cli: BatonCli) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bot.main", "console", "--user", "ana"],
        cwd=cli.home, env=baton_env(cli.database_url, cli.home, PYTHONPATH=str(REPO), COLUMNS="500",
                      PYTHONIOENCODING="utf-8:strict"),  # as in a locale whose stdin is strict
        input=b"run hello \x00 there\nrun hello --args '{\"a\": \"\\ud800\"}'\nrun hello \xff\xfe\n",
        capture_output=True, timeout=CALL_TIMEOUT, check=False,
    )  # fmt: skip
    out = done.stdout.decode("utf-8", "replace")
    assert done.returncode == 0, done.stderr
    assert out.count(REFUSED) == 3, out
    assert "Traceback" not in out + done.stderr.decode("utf-8", "replace")
    assert cli.runs() == []


# -- the handler of the assembled application ------------------------------------------------


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Baton, asyncio.AbstractEventLoop]]:
    """One Baton, its engine running on a loop this module drives example by example."""
    home = tmp_path_factory.mktemp("edge-handler")
    cli = BatonCli.create(home, f"sqlite:///{home / 'baton.db'}")
    settings_ = Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=cli.database_url,
        workflow_dirs=[cli.workflows],
        data_dir=home / ".baton",
        tool_modules=[],
    )
    loop = asyncio.new_event_loop()
    baton = build_baton(settings_)
    stack = contextlib.AsyncExitStack()
    try:
        loop.run_until_complete(stack.enter_async_context(baton.running(handle_signals=False, grace=2.0)))
        yield baton, loop
    finally:
        loop.run_until_complete(stack.aclose())
        baton.close()
        loop.close()


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=messages, user=st.one_of(st.just("ana"), texts), command=st.booleans())
def test_the_handler_answers_any_text_with_one_line_and_stores_nothing_it_refuses(
    running: tuple[Baton, asyncio.AbstractEventLoop], text: str, user: str, command: bool
) -> None:
    baton, loop = running
    event = f"edge-{uuid.uuid4()}"
    message = ChatMessage(platform="console", conversation="edge", user=user, text=text, event_id=event,
                          is_command=command, direct=True)
    runs_before = len(baton.store.runs.recent_runs(limit=1000))

    replies = loop.run_until_complete(baton.handler.handle(message))

    shown = ["\n".join(render(r, "console", baton.redactor)) for r in replies]
    assert all(UNEXPECTED not in s and "Traceback" not in s for s in shown), shown
    if text_problem(text) or text_problem(user):
        assert len(replies) == 1 and replies[0].is_error
        (line,) = _lines(shown[0])
        assert line.endswith(REFUSED)
        assert baton.store.events.claim_event("console", event)  # its event id was never claimed
        assert len(baton.store.runs.recent_runs(limit=1000)) == runs_before
    loop.run_until_complete(baton.handler.drain())
    for run in baton.store.leases.runs_leased_by(baton.engine.owner):
        loop.run_until_complete(baton.engine.wait(run.id, timeout=30))
