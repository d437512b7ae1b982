"""Who an agent is: `BATON_MCP_TOKENS` maps the sha256 of each bearer token to a name, and a
request bearing that token acts as the principal `mcp:<name>`. Tokens themselves are never
stored or logged; a token nobody listed (or none) is refused by the SDK's bearer middleware
with 401 before any tool runs.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken

from core.config import AGENT_PREFIX


def token_hash(token: str) -> str:
    """What `BATON_MCP_TOKENS` lists for `token`: `printf %s TOKEN | sha256sum`."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class TokenTable:
    """The SDK's `TokenVerifier`: a bearer token -> the principal its hash names, else None."""

    def __init__(self, names: Mapping[str, str]) -> None:
        self._names = dict(names)  # sha256 hex -> agent name (validated in core/config.py)

    def principal(self, token: str) -> str | None:
        digest = token_hash(token)
        for known, name in self._names.items():  # constant time per entry: no early exit on a prefix
            if hmac.compare_digest(known, digest):
                return AGENT_PREFIX + name
        return None

    async def verify_token(self, token: str) -> AccessToken | None:
        principal = self.principal(token)
        if principal is None:
            return None
        return AccessToken(token=token_hash(token), client_id=principal, scopes=[])


def request_principal() -> str:
    """The principal of the HTTP request being served (its verified bearer token)."""
    token = get_access_token()
    if token is None:  # unreachable behind RequireAuthMiddleware; refuse rather than guess
        raise PermissionError("no bearer token on this request")
    return token.client_id
