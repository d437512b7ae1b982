"""The `openai` provider against a real local HTTP server (aiohttp) on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from core.engine.nodes import RenderedNode, execute_node
from core.engine.providers import OpenAIProvider, ProviderRegistry
from core.engine.tools import ToolRegistry
from core.errors import NodeFailed
from tests.unit.engine.nodes.conftest import MakeContext

KEY = "sk-test-0123456789abcdef"


@dataclass
class FakeEndpoint:
    """What the server saw, and the failures it should answer with first."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    fail_with: list[int] = field(default_factory=list)  # statuses for the next requests
    answer: Any = None
    base_url: str = ""
    hang: bool = False
    released: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {KEY}":
            return web.json_response({"error": {"message": "Incorrect API key provided"}}, status=401)
        body = await request.json()
        self.requests.append(body)
        if self.hang:
            await self.released.wait()
        if self.fail_with:
            return web.json_response({"error": "busy"}, status=self.fail_with.pop(0))
        if self.answer is not None:
            return web.json_response(self.answer)
        return web.json_response(
            {
                "id": "chatcmpl-1",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "Release 1.2 adds X."}}],
                "usage": {"prompt_tokens": 17, "completion_tokens": 5, "total_tokens": 22},
            }
        )


@pytest.fixture
async def endpoint() -> AsyncIterator[FakeEndpoint]:
    fake = FakeEndpoint()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", fake.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    fake.base_url = f"http://127.0.0.1:{server.port}/v1"
    try:
        yield fake
    finally:
        fake.released.set()
        await server.close()


def provider(endpoint: FakeEndpoint, key: str | None = KEY, attempts: int = 3) -> OpenAIProvider:
    return OpenAIProvider(
        base_url=endpoint.base_url,
        model="test-model",
        api_key=key,
        attempts=attempts,
        backoff=0.01,
        max_backoff=0.05,
    )


async def test_completion_text_and_token_usage_are_recorded(
    endpoint: FakeEndpoint, make_ctx: MakeContext
) -> None:
    providers = ProviderRegistry({"openai": provider(endpoint)}, "openai")
    node = RenderedNode(kind="prompt", prompt="Write release notes for 1.2")
    result = await execute_node(node, make_ctx(), providers=providers, tools=ToolRegistry())
    assert result.output == "Release 1.2 adds X."
    assert (result.tokens_in, result.tokens_out) == (17, 5)
    assert endpoint.requests == [
        {"model": "test-model", "messages": [{"role": "user", "content": "Write release notes for 1.2"}]}
    ]


async def test_json_steps_send_the_schema_as_a_system_message(
    endpoint: FakeEndpoint, make_ctx: MakeContext
) -> None:
    await provider(endpoint).complete(
        "notes", ctx=make_ctx(), schema={"type": "object", "required": ["title"]}
    )
    system, user = endpoint.requests[0]["messages"]
    assert system["role"] == "system"
    assert '"required": ["title"]' in system["content"]
    assert user == {"role": "user", "content": "notes"}


async def test_429_and_5xx_are_retried_with_backoff(endpoint: FakeEndpoint, make_ctx: MakeContext) -> None:
    endpoint.fail_with = [429, 503]
    completion = await provider(endpoint, attempts=3).complete("hi", ctx=make_ctx())
    assert completion.text == "Release 1.2 adds X."
    assert len(endpoint.requests) == 3


async def test_retries_are_bounded(endpoint: FakeEndpoint, make_ctx: MakeContext) -> None:
    endpoint.fail_with = [500, 502, 503, 504]
    with pytest.raises(NodeFailed) as caught:
        await provider(endpoint, attempts=3).complete("hi", ctx=make_ctx(node_id="draft"))
    assert len(endpoint.requests) == 3
    assert (
        caught.value.message
        == f"prompt step `draft`: {endpoint.base_url}/chat/completions answered HTTP 503 after 3 attempts"
    )
    assert "BATON_OPENAI_BASE_URL" in caught.value.hint


async def test_a_wrong_key_names_the_setting_and_never_shows_the_key(
    endpoint: FakeEndpoint, make_ctx: MakeContext
) -> None:
    wrong = "sk-wrong-9876543210"
    with pytest.raises(NodeFailed) as caught:
        await provider(endpoint, key=wrong).complete("hi", ctx=make_ctx())
    error = caught.value
    assert "refused the API key (HTTP 401)" in error.message
    assert error.hint == "Set BATON_OPENAI_API_KEY to a valid key for that endpoint and restart Baton."
    assert wrong not in f"{error.message} {error.hint} {error!r}"
    assert endpoint.requests == []  # a 401 is not retried


async def test_a_missing_key_says_so(endpoint: FakeEndpoint, make_ctx: MakeContext) -> None:
    with pytest.raises(NodeFailed, match=r"wants an API key and none is set \(HTTP 401\)"):
        await provider(endpoint, key=None).complete("hi", ctx=make_ctx())


async def test_an_unexpected_answer_is_a_clear_failure(endpoint: FakeEndpoint, make_ctx: MakeContext) -> None:
    endpoint.answer = {"data": []}
    with pytest.raises(NodeFailed, match=r"has no choices\[0\]\.message\.content"):
        await provider(endpoint).complete("hi", ctx=make_ctx())


async def test_an_unreachable_endpoint_is_retried_then_fails(make_ctx: MakeContext) -> None:
    unreachable = FakeEndpoint(base_url="http://127.0.0.1:9/v1")  # discard port: nothing listens
    with pytest.raises(NodeFailed, match=r"could not be reached \(ConnectError\) after 2 attempts"):
        await provider(unreachable, attempts=2).complete("hi", ctx=make_ctx())


async def test_a_slow_endpoint_times_out_with_the_step_timeout(
    endpoint: FakeEndpoint, make_ctx: MakeContext
) -> None:
    endpoint.hang = True
    with pytest.raises(NodeFailed, match=r"prompt step `draft` timed out after 0\.3 s"):
        await provider(endpoint).complete("hi", ctx=make_ctx(node_id="draft", timeout=0.3))
