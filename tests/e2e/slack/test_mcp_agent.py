"""An agent starts a run through MCP (`/mcp` of the web app, the SDK's client); the run reports
in the Slack channel the operator named (BATON_MCP_POST_TO), a person approves its gate there by
clicking the button (the real Bolt app, the mock Web API), and the agent's `wait_run` returns
completed. One Baton process, assembled by `build_baton`, as `baton run` is."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.mcp.identity import token_hash
from bot.http import bind
from bot.serve import serve_web
from core.config import Access, Settings
from tests.e2e.mcp.client import http_session
from tests.e2e.slack.conftest import BOT_TOKEN, SIGNING_SECRET, WORKFLOWS, SlackE2E
from tests.e2e.slack.harness import ANA, CHANNEL
from tests.e2e.slack.steps import COMPLETED, STARTED, WAITING, run_id_of, wait_in_thread

TOKEN = "agent-token-5e1d0c"


@pytest.fixture
def web_sock() -> Iterator[socket.socket]:
    sock = bind("127.0.0.1", 0)
    yield sock
    sock.close()


@pytest.fixture
def settings(tmp_path: Path, sqlite_url: str, web_sock: socket.socket) -> Settings:
    people_and_agent = ["mcp:ci-agent", f"slack:{ANA}"]
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=sqlite_url,
        workflow_dirs=[WORKFLOWS],
        data_dir=tmp_path / "data",
        tool_modules=[],
        access=Access(run={"*": people_and_agent}, approve={"*": people_and_agent}),
        slack_bot_token=BOT_TOKEN,  # type: ignore[arg-type]
        slack_signing_secret=SIGNING_SECRET,  # type: ignore[arg-type]
        web_port=web_sock.getsockname()[1],
        mcp_tokens={token_hash(TOKEN): "ci-agent"},
        mcp_post_to=f"slack:{CHANNEL}",
    )


async def test_a_person_approves_in_slack_the_gate_of_a_run_an_agent_started(
    e2e: SlackE2E, settings: Settings, web_sock: socket.socket
) -> None:
    web = asyncio.create_task(serve_web(e2e.baton, settings, sock=web_sock))
    url = f"{settings.page_base_url}/mcp"
    try:
        async with http_session(url, TOKEN) as agent:
            started = await agent.call("run_workflow", workflow="gated", message="from the agent")
            assert not started.error, started.text
            run = started.data["run"]
            assert started.data["reports_to"]["platform"] == "slack"

            # people see it: its first message opens its thread in the channel, the gate waits there
            first = await e2e.mock.wait_call("chat.postMessage", STARTED)
            assert first.body["channel"] == CHANNEL and "thread_ts" not in first.body
            assert run_id_of(first) == run and first.ts is not None
            gate = await wait_in_thread(e2e, first.ts, WAITING)

            waited = await agent.call("wait_run", run=run, timeout_s=60)
            assert waited.data["attention"] == "gate", waited.text
            assert waited.data["reports_to"]["thread"] == first.ts

            mark = len(e2e.mock.calls)
            clicked = await e2e.slack.click(gate, "approve", user=ANA)
            assert clicked.status == 200

            done = await agent.call("wait_run", run=run, timeout_s=60)
            assert done.data["status"] == "completed", done.text
            await wait_in_thread(e2e, first.ts, COMPLETED, after=mark)

        trail = e2e.baton.store.events.audit_log(run)
        assert ("mcp:ci-agent", "start") in {(e.actor, e.action) for e in trail}
        assert any(e.actor == f"slack:{ANA}" and e.action == "vote" for e in trail)
    finally:
        web.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await web
