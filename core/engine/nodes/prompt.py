"""`prompt` steps: ask a provider (`core/engine/providers.py`); its text is the output.

Token usage is the provider's count. A provider's own `NodeFailed` passes through; any other
exception it raises becomes one, with the provider named.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.engine.nodes import NodeResult
from core.errors import BatonError, NodeFailed

if TYPE_CHECKING:
    from core.engine.nodes import NodeContext, RenderedNode
    from core.engine.providers import ProviderRegistry


async def run(node: RenderedNode, ctx: NodeContext, providers: ProviderRegistry) -> NodeResult:
    if node.prompt is None:
        raise NodeFailed(
            f"prompt step `{ctx.node_id}` has no prompt",
            node_id=ctx.node_id,
            hint="Give the node a `prompt:`.",
        )
    try:
        provider = providers.get(node.provider)
    except BatonError as exc:
        raise NodeFailed(exc.message, node_id=ctx.node_id, hint=exc.hint) from exc
    schema = dict(node.output_schema) if node.output_schema is not None else None
    try:
        completion = await provider.complete(node.prompt, ctx=ctx, schema=schema)
    except NodeFailed:
        raise
    except Exception as exc:
        message = ctx.redactor.redact(f"{type(exc).__name__}: {exc}")
        raise NodeFailed(
            f"prompt step `{ctx.node_id}`: provider `{provider.name}` failed: {message}",
            node_id=ctx.node_id,
            hint="Check the provider's settings (docs/providers.md), then resume the run.",
        ) from exc
    return NodeResult(
        output=completion.text, tokens_in=completion.tokens_in, tokens_out=completion.tokens_out
    )
