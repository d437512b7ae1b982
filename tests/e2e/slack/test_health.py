"""The real `baton run` process serving Slack (mock Web API) with BATON_HEALTH_PORT: /healthz and
/readyz over HTTP, and `baton health` as an exec probe would run it."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

import httpx

from tests.e2e.process import REPO, BatonProcess
from tests.e2e.slack.mock_slack import MockSlack
from tests.e2e.slack.test_process import slack_env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _probe(env: dict[str, str], *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.main", "health", *args, env=env, cwd=REPO,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return int(proc.returncode or 0), (out + err).decode()


async def test_baton_run_reports_alive_and_ready_once_slack_is_connected(
    mock_slack: MockSlack, tmp_path: Path, sqlite_url: str
) -> None:
    port = _free_port()
    env = {**slack_env(mock_slack, tmp_path, sqlite_url), "BATON_HEALTH_PORT": str(port)}
    baton = await BatonProcess.start(env, cwd=tmp_path)
    try:
        await baton.wait_log(rf"action=health_started port={port}")
        await baton.wait_log("action=slack_started")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            assert (await client.get("/healthz")).json() == {"status": "alive"}
            ready = await client.get("/readyz")
        assert ready.status_code == 200, ready.text
        assert ready.json()["checks"] == {
            "serving": {"ok": True, "detail": "started"},
            "database": {"ok": True, "detail": "reachable"},
            "slack": {"ok": True, "detail": "connected"},
        }
        code, said = await _probe(env)
        assert code == 0 and '"status": "ready"' in said, said
        code, said = await _probe(env, "--live")
        assert code == 0 and '"status": "alive"' in said, said
    finally:
        assert await baton.stop() == 0, baton.output

    code, said = await _probe(env)  # nothing answers any more
    assert code == 1 and said.startswith(f"not ready: http://127.0.0.1:{port}/readyz did not answer"), said


async def test_baton_health_without_a_health_port_is_a_configuration_error(
    mock_slack: MockSlack, tmp_path: Path, sqlite_url: str
) -> None:
    code, said = await _probe(slack_env(mock_slack, tmp_path, sqlite_url))
    assert code == 2
    assert said.splitlines()[0] == (
        "error: BATON_HEALTH_PORT is not set: no process serves a health endpoint to ask")
