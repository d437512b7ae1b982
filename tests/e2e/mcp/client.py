"""Driving Baton with the official MCP client (the SDK's `ClientSession`), never our own.

    async with stdio_session(env, home) as agent:          # spawns `baton mcp`
        result = await agent.call("run_workflow", workflow="gated")
    async with http_session(url, token) as agent:          # `/mcp` of `baton run`
        ...

`call` returns the tool's `Result`: its structured JSON, its one line of text, and whether
it is a tool error.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.console.cli import baton_env

WORKFLOWS = Path(__file__).parent / "workflows"
#: who may do what in these tests: two agents and a person run and approve everything
ACCESS = {
    "run": {"*": ["mcp:agent-a", "mcp:agent-b", "mcp:local", "console:ana", "slack:U0ANA"]},
    "approve": {"*": ["mcp:agent-a", "mcp:agent-b", "mcp:local", "console:ana", "slack:U0ANA"]},
}


def mcp_env(database_url: str, home: Path, **extra: str) -> dict[str, str]:
    settings = {"BATON_WORKFLOW_DIRS": str(WORKFLOWS), "BATON_ACCESS": json.dumps(ACCESS),
                "BATON_WEB_PORT": "off"}
    return baton_env(database_url, home, **{**settings, **extra})


@dataclass(frozen=True)
class Result:
    data: dict[str, Any]
    text: str
    error: bool


class Agent:
    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, tool: str, **arguments: Any) -> Result:
        result = await self.session.call_tool(tool, arguments)
        texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
        return Result(dict(result.structured_content or {}), "\n".join(texts), bool(result.is_error))

    async def tools(self) -> dict[str, str]:
        listed = await self.session.list_tools()
        return {t.name: t.description or "" for t in listed.tools}


@asynccontextmanager
async def stdio_session(env: dict[str, str], home: Path) -> AsyncIterator[Agent]:
    """`baton mcp` spawned by the SDK's stdio client; its stderr (logs) in `home/mcp.log`."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "bot.main", "mcp"], env=env,
                                   cwd=home)
    with (home / "mcp.log").open("a") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield Agent(session)


@asynccontextmanager
async def http_session(url: str, token: str | None) -> AsyncIterator[Agent]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0)) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield Agent(session)
