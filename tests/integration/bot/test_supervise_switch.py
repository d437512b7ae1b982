"""`baton run` as a real process whose chat platform is unreachable, so every start fails with
exit 1: by default (and with --no-supervise) the process ends with that status, for systemd or
Kubernetes to see and restart; with --supervise or BATON_SUPERVISE=true the supervising parent
restarts the child itself."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import pytest

from tests.e2e.process import BatonProcess, clean_env


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "workflows").mkdir()
    return clean_env(
        BATON_SLACK_BOT_TOKEN="xoxb-not-a-real-token", BATON_SLACK_SIGNING_SECRET="secret",
        BATON_SLACK_API_URL=f"http://127.0.0.1:{_closed_port()}/api/",  # nobody listens: exit 1
        BATON_DATABASE_URL=f"sqlite:///{tmp_path / 'baton.db'}",
        BATON_WORKFLOW_DIRS=str(tmp_path / "workflows"),
        BATON_DATA_DIR=str(tmp_path / "data"), BATON_WEB_PORT=str(_closed_port()), BATON_PAGES="off",
        BATON_TOOL_MODULES="[]",
        BATON_LOG_LEVEL="INFO",
    )


@pytest.mark.parametrize(("args", "setting"), [((), None), (("--no-supervise",), "true")])
async def test_unsupervised_a_crash_ends_the_process_with_its_status(
    env: dict[str, str], tmp_path: Path, args: tuple[str, ...], setting: str | None
) -> None:
    if setting is not None:
        env["BATON_SUPERVISE"] = setting  # the flag wins over the setting
    baton = await BatonProcess.start(env, "run", *args, cwd=tmp_path)

    assert await baton.exited() == 1, baton.output
    assert "Baton could not reach Slack" in baton.output
    assert baton.output.count("action=engine_started") == 1
    assert "supervis" not in baton.output


@pytest.mark.parametrize(("args", "setting"), [(("--supervise",), None), ((), "true")])
async def test_supervised_a_crashed_child_is_restarted_until_stopped(
    env: dict[str, str], tmp_path: Path, args: tuple[str, ...], setting: str | None
) -> None:
    if setting is not None:
        env["BATON_SUPERVISE"] = setting
    baton = await BatonProcess.start(env, "run", *args, cwd=tmp_path)
    try:
        await baton.wait_log("action=supervisor_started")
        first = await baton.wait_log(r"action=child_restart .*child_pid=(\d+).*exited 1")
        await baton.wait_log(rf"action=child_started child_pid=(?!{first.group(1)})\d+ restarts=1")
        await baton.wait_log(r"action=child_started child_pid=\d+ restarts=2")  # and again
        assert baton.proc.returncode is None  # the supervisor lives on
    finally:
        code = await baton.stop()
    # the last child's status: stopped gracefully, crashed meanwhile, or stopped while starting
    assert code in (0, 1, 128 + signal.SIGTERM), baton.output
    assert baton.output.count("action=engine_started") >= 2
