"""BATON_MCP_TOKENS: a bearer token is known by its sha256 only and names `mcp:<name>`."""

from __future__ import annotations

import hashlib

from adapters.mcp.identity import TokenTable, token_hash


async def test_a_listed_token_names_its_principal_and_nothing_else_does() -> None:
    table = TokenTable({token_hash("s3cret-a"): "ci-agent", token_hash("s3cret-b"): "triage"})
    assert token_hash("s3cret-a") == hashlib.sha256(b"s3cret-a").hexdigest()
    assert table.principal("s3cret-a") == "mcp:ci-agent"
    assert table.principal("s3cret-b") == "mcp:triage"
    assert table.principal("s3cret-") is None and table.principal("") is None
    assert table.principal(token_hash("s3cret-a")) is None  # the hash is not a token
    verified = await table.verify_token("s3cret-a")
    assert verified is not None and verified.client_id == "mcp:ci-agent"
    assert "s3cret-a" not in verified.model_dump_json()  # the token itself is kept nowhere
    assert await table.verify_token("nope") is None
