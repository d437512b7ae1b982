"""Agents drive Baton through the Model Context Protocol (docs/agents.md), on the official SDK.

    await serve_stdio(baton, settings)     # `baton mcp`: one agent, as BATON_MCP_PRINCIPAL
    mount = http_mount(baton, settings)    # `baton run`: `/mcp` on its one HTTP server,
                                           # each request as the principal its bearer token names

The adapter only translates: `tools` (a tool call -> the chat command it names, sent through
the same `Handler` as a person's; replies -> JSON and one line), `server` (the tools' schemas
and descriptions on the SDK's `MCPServer`), `identity` (BATON_MCP_TOKENS: token hashes ->
`mcp:<name>`), `http` (the streamable HTTP app and its session manager), `arguments` (a
tool call checked against its schema), `stdio` (the SDK's stdio, answering unreadable lines).
The SDK is imported only here, and only when one of these is called: a process that serves no
agent never loads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.commands.messages import Reply
from core.config import Settings

if TYPE_CHECKING:
    from adapters.mcp.http import HttpMount
    from adapters.mcp.tools import Baton


async def _nowhere(reply: Reply) -> None:
    """Background replies of runs reporting to no conversation: the agent reads the run instead."""


async def serve_stdio(baton: Baton, settings: Settings) -> None:
    """Serve MCP on this process's stdin/stdout until the client closes it."""
    from adapters.mcp.server import build_server, refusal
    from adapters.mcp.stdio import serve
    from adapters.mcp.tools import PLATFORM, AgentTools

    baton.handler.register_outbox(PLATFORM, _nowhere)
    tools = AgentTools(baton, post_to=settings.mcp_post_to)
    principal = settings.mcp_principal
    await serve(build_server(tools, principal=lambda: principal), refusal(tools))


def http_mount(baton: Baton, settings: Settings) -> HttpMount:
    """`/mcp` for the HTTP server of `baton run` (BATON_MCP_TOKENS set)."""
    from adapters.mcp.http import HttpMount
    from adapters.mcp.tools import PLATFORM

    baton.handler.register_outbox(PLATFORM, _nowhere)
    return HttpMount(baton, settings)


__all__ = ["http_mount", "serve_stdio"]
