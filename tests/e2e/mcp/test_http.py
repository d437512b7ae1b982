"""`/mcp` of `baton run` (streamable HTTP beside the run pages), driven by the SDK's client:
a bearer token names the agent; none, or one nobody listed, is refused with 401."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest

from adapters.mcp.identity import token_hash
from tests.e2e.mcp.client import http_session, mcp_env
from tests.e2e.process import BatonProcess
from tests.e2e.web.test_browser import free_port

TOKENS = {"agent-a": "tok-a-3f9b8c", "agent-b": "tok-b-77d1e0", "stranger": "tok-s-0c4a19"}


@pytest.fixture
async def served(tmp_path: Path, sqlite_url: str) -> AsyncIterator[str]:
    """`baton run` (the console keeps it open) with pages and `/mcp` on a free port: its URL."""
    port = free_port()
    env = mcp_env(sqlite_url, tmp_path, BATON_WEB_PORT=str(port), BATON_LOG_LEVEL="INFO",
                  BATON_MCP_TOKENS=json.dumps({token_hash(t): n for n, t in TOKENS.items()}))
    baton = await BatonProcess.start(env, "run", "--conversation", "ops", "--user", "ana", cwd=tmp_path,
                                     stdin=asyncio.subprocess.PIPE)
    try:
        await baton.wait_log("action=http_started")
        yield f"http://127.0.0.1:{port}"
    finally:
        await baton.stop()


async def test_no_token_or_an_unknown_one_is_refused_with_401(served: str) -> None:
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient() as client:
        bare = await client.post(f"{served}/mcp", json=hello, headers=headers)
        wrong = await client.post(f"{served}/mcp", json=hello,
                                  headers={**headers, "Authorization": "Bearer not-a-listed-token"})
        page = await client.get(f"{served}/r/nonsense")
    assert bare.status_code == 401 and wrong.status_code == 401
    assert "tok-" not in bare.text + wrong.text
    assert page.status_code == 403  # the pages beside it are untouched
    with pytest.raises(BaseException):  # noqa: B017 — the SDK's client cannot even initialize
        async with http_session(f"{served}/mcp", "not-a-listed-token"):
            pass


async def test_run_wait_approve_by_another_agent_and_read_over_http(served: str) -> None:
    url = f"{served}/mcp"
    async with http_session(url, TOKENS["agent-a"]) as agent, http_session(url, TOKENS["agent-b"]) as other:
        started = await agent.call("run_workflow", workflow="gated", message="over http")
        assert not started.error, started.text
        run = started.data["run"]
        assert started.data["requester"] == "mcp:agent-a"  # the token's name, not a header's claim
        assert started.data["page"].startswith(f"{served}/r/")

        waited = await agent.call("wait_run", run=run, timeout_s=60)
        assert waited.data["attention"] == "gate", waited.text
        own = await agent.call("approve", run=run)
        assert own.error and "never decides a gate of its own run" in own.text

        decided = await other.call("approve", run=run, comment="ok from b")
        assert not decided.error, decided.text
        done = await agent.call("wait_run", run=run, timeout_s=60)
        assert done.data["status"] == "completed", done.text
        assert (await agent.call("get_output", run=run, node="ship")).data["output"] == {"shipped": True}

    async with http_session(url, TOKENS["stranger"]) as stranger:
        refused = await stranger.call("run_workflow", workflow="gated")
        assert refused.error and "mcp:stranger may not run `gated`" in refused.text
        hidden = await stranger.call("get_run", run=run)  # as an id nobody has: nothing learnt
        assert hidden.error and hidden.data["error"] == f"No run id starts with {run}."


async def test_an_agent_whose_token_is_removed_loses_its_page_links(tmp_path: Path, sqlite_url: str) -> None:
    """A link is signed for a principal; removing the agent's token from BATON_MCP_TOKENS (and
    restarting) must take its links with it, or a revoked agent could still approve from one."""
    port = free_port()

    def env(tokens: dict[str, str]) -> dict[str, str]:
        return mcp_env(sqlite_url, tmp_path, BATON_WEB_PORT=str(port), BATON_LOG_LEVEL="INFO",
                       BATON_MCP_TOKENS=json.dumps({token_hash(t): n for n, t in tokens.items()}))

    async def serving(tokens: dict[str, str]) -> BatonProcess:
        baton = await BatonProcess.start(env(tokens), "run", "--conversation", "ops", "--user", "ana",
                                         cwd=tmp_path, stdin=asyncio.subprocess.PIPE)
        await baton.wait_log("action=http_started")
        return baton

    url = f"http://127.0.0.1:{port}"
    baton = await serving(TOKENS)
    try:
        async with http_session(f"{url}/mcp", TOKENS["agent-a"]) as agent, \
                http_session(f"{url}/mcp", TOKENS["agent-b"]) as other:
            run = (await agent.call("run_workflow", workflow="gated", message="x")).data["run"]
            assert (await agent.call("wait_run", run=run, timeout_s=60)).data["attention"] == "gate"
            own_page = (await agent.call("get_run", run=run)).data["page"]
            other_page = (await other.call("get_run", run=run)).data["page"]
        async with httpx2.AsyncClient() as client:
            before = await client.get(other_page)
    finally:
        await baton.stop()
    assert before.status_code == 200 and "Approve" in before.text

    kept = {name: token for name, token in TOKENS.items() if name != "agent-b"}  # agent-b revoked
    baton = await serving(kept)
    try:
        async with httpx2.AsyncClient() as client:
            revoked = await client.get(other_page)
            output = await client.get(other_page + "/nodes/ship/output")
            still = await client.get(own_page)
    finally:
        await baton.stop()
    assert revoked.status_code == 403 and "access was withdrawn" in revoked.text
    assert output.status_code == 403
    assert still.status_code == 200  # agent-a still holds its token
