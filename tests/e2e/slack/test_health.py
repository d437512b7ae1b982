"""The real `baton run` process serving Slack (mock Web API) in HTTP mode: /healthz and /readyz
over HTTP on BATON_WEB_PORT (the port of /slack/events), and `baton health` as an exec probe
would run it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import httpx

from tests.e2e.process import REPO, BatonProcess
from tests.e2e.slack.mock_slack import MockSlack
from tests.e2e.slack.test_process import slack_env


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
    env = slack_env(mock_slack, tmp_path, sqlite_url)
    port = int(env["BATON_WEB_PORT"])
    baton = await BatonProcess.start(env, cwd=tmp_path)
    try:
        await baton.wait_log(rf"action=http_started port={port}")
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


async def test_baton_health_without_a_web_port_is_a_configuration_error(
    mock_slack: MockSlack, tmp_path: Path, sqlite_url: str
) -> None:
    code, said = await _probe({**slack_env(mock_slack, tmp_path, sqlite_url), "BATON_WEB_PORT": "off"})
    assert code == 2
    assert said.splitlines()[0] == (
        "error: BATON_WEB_PORT is off: no process serves a health endpoint to ask")


async def test_the_retired_ports_are_refused_at_start_naming_their_replacement(
    mock_slack: MockSlack, tmp_path: Path, sqlite_url: str
) -> None:
    for old in ("BATON_SLACK_PORT", "BATON_HEALTH_PORT"):
        env = {**slack_env(mock_slack, tmp_path, sqlite_url), old: "3000"}
        baton = await BatonProcess.start(env, cwd=tmp_path)
        assert await baton.exited() == 2, baton.output
        (error,) = [line for line in baton.lines if line.startswith("error: ")]
        assert error.startswith(f"error: {old}: no longer read: ") and "BATON_WEB_PORT" in error, error
    assert not mock_slack.calls  # refused before anything was started


async def test_slack_http_mode_with_the_web_port_off_is_refused_at_start(
    mock_slack: MockSlack, tmp_path: Path, sqlite_url: str
) -> None:
    env = {**slack_env(mock_slack, tmp_path, sqlite_url), "BATON_WEB_PORT": "off"}
    baton = await BatonProcess.start(env, cwd=tmp_path)
    assert await baton.exited() == 2, baton.output
    errors = [line for line in baton.lines if line.startswith("error: ")]
    assert errors == ["error: Slack's HTTP mode is served on BATON_WEB_PORT, which is off"], baton.output
