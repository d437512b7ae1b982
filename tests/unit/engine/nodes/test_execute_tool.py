"""`execute_node` for tool and prompt steps (no subprocess involved)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from core.engine.nodes import RenderedNode, execute_node
from core.engine.providers import ProviderRegistry
from core.engine.tools import ToolRegistry
from core.errors import NodeFailed
from core.redaction import Redactor
from tests.unit.engine.nodes.conftest import MakeContext


async def run_tool(
    registry: ToolRegistry, tool_name: str, ctx: Any, providers: ProviderRegistry, **kwargs: Any
) -> str:
    result = await execute_node(
        RenderedNode(kind="tool", tool=tool_name, kwargs=kwargs), ctx, providers=providers, tools=registry
    )
    return result.output


async def test_sync_tool_runs_in_a_worker_thread(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    registry = ToolRegistry()

    @registry.tool("where")
    def where() -> str:
        return str(threading.get_ident())

    output = await run_tool(registry, "where", make_ctx(), fake_providers)
    assert output != str(threading.get_ident())


async def test_inline_tool_runs_on_the_event_loop_thread(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    registry = ToolRegistry()

    @registry.tool("where", inline=True)
    def where() -> str:
        return str(threading.get_ident())

    assert await run_tool(registry, "where", make_ctx(), fake_providers) == str(threading.get_ident())


async def test_async_tool_is_awaited_with_its_keywords(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    registry = ToolRegistry()

    @registry.tool("greet")
    async def greet(who: str, punctuation: str = ".") -> str:
        return f"hello {who}{punctuation}"

    assert (
        await run_tool(registry, "greet", make_ctx(), fake_providers, who="ana", punctuation="!")
        == "hello ana!"
    )


async def test_idempotency_key_is_passed_only_to_tools_that_take_it(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    registry = ToolRegistry()
    seen: list[Any] = []

    @registry.tool("with_key", replay="idempotent")
    def with_key(idempotency_key: str | None) -> str:
        seen.append(idempotency_key)
        return "sent"

    @registry.tool("without_key")
    def without_key(**kwargs: Any) -> dict[str, Any]:
        return kwargs

    ctx = make_ctx(idempotency_key="run-1:publish:1")
    assert await run_tool(registry, "with_key", ctx, fake_providers) == "sent"
    assert seen == ["run-1:publish:1"]
    assert await run_tool(registry, "without_key", ctx, fake_providers, a=1) == '{"a":1}'


async def test_non_string_results_are_canonical_json(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    registry = ToolRegistry()

    @registry.tool("data", inline=True)
    def data() -> dict[str, Any]:
        return {"b": [1, 2], "a": "é", "c": None}

    @registry.tool("nothing", inline=True)
    def nothing() -> None:
        return None

    assert await run_tool(registry, "data", make_ctx(), fake_providers) == '{"a":"é","b":[1,2],"c":null}'
    assert await run_tool(registry, "nothing", make_ctx(), fake_providers) == "null"


async def test_a_result_that_is_not_json_fails_the_step(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    registry = ToolRegistry()
    registry.tool("odd", inline=True)(lambda: object())
    with pytest.raises(NodeFailed, match="returned a object, which is not JSON"):
        await run_tool(registry, "odd", make_ctx(), fake_providers)


async def test_a_tool_exception_names_type_and_message_with_secrets_hidden(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    registry = ToolRegistry()

    @registry.tool("post")
    def post() -> None:
        raise RuntimeError("server said no to token sk-abc-123")

    ctx = make_ctx(node_id="publish", redactor=Redactor(["sk-abc-123"]))
    with pytest.raises(NodeFailed) as caught:
        await run_tool(registry, "post", ctx, fake_providers)
    assert caught.value.node_id == "publish"
    assert caught.value.message == "tool `post` raised RuntimeError: server said no to token •••"
    assert caught.value.hint == "Fix the tool or its `with:` values, then resume the run."


async def test_wrong_with_values_get_a_hint_listing_the_parameters(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    registry = ToolRegistry()

    @registry.tool("post", replay="idempotent")
    def post(title: str, body: str = "", idempotency_key: str | None = None) -> str:
        return title

    with pytest.raises(NodeFailed) as caught:
        await run_tool(registry, "post", make_ctx(), fake_providers, titel="typo")
    assert caught.value.message.startswith("tool `post` raised TypeError")
    assert caught.value.hint == "`post` accepts: title, body; fix the step's `with:`."


async def test_unknown_tool_fails_the_step_listing_known_tools(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    registry = ToolRegistry()
    registry.tool("known")(lambda: None)
    with pytest.raises(NodeFailed, match=r"no tool is registered as `nope` \(known tools: `known`\)"):
        await run_tool(registry, "nope", make_ctx(), fake_providers)


async def test_async_tool_timeout_fails_the_step(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    registry = ToolRegistry()
    never = asyncio.Event()

    @registry.tool("hang")
    async def hang() -> None:
        await never.wait()

    with pytest.raises(NodeFailed, match=r"tool `step` timed out after 0\.2 s"):
        await run_tool(registry, "hang", make_ctx(timeout=0.2), fake_providers)


async def test_threaded_tool_timeout_fails_the_step(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    registry = ToolRegistry()
    release = threading.Event()

    @registry.tool("block")
    def block() -> None:
        release.wait(30)

    try:
        with pytest.raises(NodeFailed, match=r"timed out after 0\.2 s"):
            await run_tool(registry, "block", make_ctx(timeout=0.2), fake_providers)
    finally:
        release.set()


async def test_prompt_step_uses_the_named_provider_and_records_tokens(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    node = RenderedNode(kind="prompt", prompt="Summarise the changes", output_schema={"required": ["title"]})
    result = await execute_node(node, make_ctx(), providers=fake_providers, tools=ToolRegistry())
    assert result.output.startswith('{"title":"title: fake answer ')
    assert (result.tokens_in, result.tokens_out) == (3, len(result.output.split()))


async def test_unknown_provider_fails_the_step(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    node = RenderedNode(kind="prompt", prompt="hi", provider="claude")
    with pytest.raises(NodeFailed, match=r"unknown prompt provider `claude` \(known: `fake`\)"):
        await execute_node(node, make_ctx(), providers=fake_providers, tools=ToolRegistry())


async def test_approval_steps_are_refused(make_ctx: MakeContext, fake_providers: ProviderRegistry) -> None:
    with pytest.raises(NodeFailed, match="kind `approval`"):
        await execute_node(
            RenderedNode(kind="approval"), make_ctx(), providers=fake_providers, tools=ToolRegistry()
        )
