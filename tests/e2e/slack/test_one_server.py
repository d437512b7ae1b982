"""One port serves all four: the real `baton run` process with Slack in HTTP mode, the run pages,
`/mcp` and health, all on BATON_WEB_PORT (bot/http.py). Slack's requests are signed (a bad
signature is refused by Bolt), the agent speaks through the SDK's client with its bearer token,
the page is opened from the link the agent was given, and the probes ask the same port."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from adapters.mcp.identity import token_hash
from tests.e2e.mcp.client import http_session
from tests.e2e.process import BatonProcess
from tests.e2e.slack.conftest import SIGNING_SECRET
from tests.e2e.slack.harness import ANA, SlackHarness
from tests.e2e.slack.mock_slack import MockSlack
from tests.e2e.slack.test_process import slack_env

TOKEN = "one-port-agent-9c2e"


async def test_one_port_serves_slack_pages_mcp_and_health(
    mock_slack: MockSlack, tmp_path: Path, sqlite_url: str
) -> None:
    env = slack_env(mock_slack, tmp_path, sqlite_url)
    who = ["mcp:agent", f"slack:{ANA}"]
    env.update(BATON_PAGES="on", BATON_MCP_TOKENS=json.dumps({token_hash(TOKEN): "agent"}),
               BATON_ACCESS=json.dumps({"run": {"*": who}, "approve": {"*": who}}))
    base = f"http://127.0.0.1:{env['BATON_WEB_PORT']}"
    baton = await BatonProcess.start(env, cwd=tmp_path)
    slack = SlackHarness(f"{base}/slack/events", SIGNING_SECRET, mock_slack)
    forger = SlackHarness(f"{base}/slack/events", "not-the-signing-secret", mock_slack)
    try:
        await baton.wait_log("action=slack_started")
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            # health
            assert (await client.get("/healthz")).json() == {"status": "alive"}
            ready = await client.get("/readyz")
            assert ready.status_code == 200 and ready.json()["checks"]["slack"]["ok"] is True, ready.text

            # Slack: signed requests are handled, a forged one refused before any listener runs
            assert (await forger.command('run gated "forged"')).status == 401
            assert (await slack.command('run gated "signed"')).status == 200
            await mock_slack.wait_call("chat.postMessage", "Started", timeout=30)
            assert not [c for c in mock_slack.calls if "forged" in c.text]

            # /mcp: the bearer token names the agent; none is refused
            bare = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                     headers={"Accept": "application/json, text/event-stream"})
            assert bare.status_code == 401
            async with http_session(f"{base}/mcp", TOKEN) as agent:
                started = await agent.call("run_workflow", workflow="gated", message="from the agent")
            assert not started.error and started.data["requester"] == "mcp:agent", started.text

            # the pages: the agent's link opens the run's page, with the pages' security headers
            page = await client.get(started.data["page"].removeprefix(base))
            assert page.status_code == 200 and started.data["run"] in page.text
            assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
            missing = await client.get("/nothing-here")
            assert missing.status_code == 404 and "Nothing here" in missing.text
            assert missing.headers["x-frame-options"] == "DENY"
    finally:
        await slack.close()
        await forger.close()
        assert await baton.stop() == 0, baton.output
