"""`/mcp` over streamable HTTP, a route of the process's one HTTP server (bot/http.py).

A request needs `Authorization: Bearer <token>` whose sha256 BATON_MCP_TOKENS lists; the SDK's
bearer middleware answers 401 otherwise, before any tool runs. The SDK's session manager runs
while the route is served (`running()`); the Host and Origin headers are checked against the
server's public address (DNS rebinding).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import BaseRoute, Route

from adapters.mcp.identity import TokenTable, request_principal
from adapters.mcp.server import build_server
from adapters.mcp.tools import AgentTools, Baton
from core.config import Settings

PATH = "/mcp"
LOCAL_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
LOCAL_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


class HttpMount:
    """The `/mcp` route and the lifetime of its sessions."""

    def __init__(self, baton: Baton, settings: Settings) -> None:
        tools = AgentTools(baton, post_to=settings.mcp_post_to)
        public = urlsplit(settings.page_base_url)
        self.server = build_server(
            tools, principal=request_principal,
            token_verifier=TokenTable(settings.mcp_tokens),
            auth=AuthSettings.model_validate(
                {"issuer_url": settings.page_base_url, "resource_server_url": None}),
        )
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[public.netloc, *LOCAL_HOSTS],
            allowed_origins=[f"{public.scheme}://{public.netloc}", *LOCAL_ORIGINS],
        )
        self.app = self.server.streamable_http_app(streamable_http_path=PATH, transport_security=security)

    @property
    def routes(self) -> list[BaseRoute]:
        return [Route(PATH, endpoint=self.app)]

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self.server.session_manager.run():
            yield
