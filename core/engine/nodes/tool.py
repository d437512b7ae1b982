"""`tool` steps: call a registered Python callable with the step's `with:` values.

Async tools are awaited, sync tools run in a worker thread, sync tools marked `inline=True`
are called directly (the cheap path: no thread, no task). The result is the step's output:
a `str` as is, anything else as canonical JSON.

Timeouts: an async tool is cancelled; a threaded one is abandoned (Python cannot stop a
thread) and the step fails; an inline tool runs to completion (keep inline tools instant).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import TYPE_CHECKING, Any

from core.engine.nodes import NodeResult
from core.engine.nodes.process import timed_out
from core.errors import BatonError, NodeFailed

if TYPE_CHECKING:
    from core.engine.nodes import NodeContext, RenderedNode
    from core.engine.tools import ToolRegistry, ToolSpec


async def run(node: RenderedNode, ctx: NodeContext, tools: ToolRegistry) -> NodeResult:
    spec = _spec(node, ctx, tools)
    kwargs = dict(node.kwargs)
    if spec.accepts_key:
        kwargs["idempotency_key"] = ctx.idempotency_key
    try:
        if spec.inline:
            result = spec.fn(**kwargs)
        else:
            timer = asyncio.timeout(ctx.timeout)
            try:
                async with timer:
                    if spec.is_async:
                        result = await spec.fn(**kwargs)
                    else:
                        result = await asyncio.to_thread(spec.fn, **kwargs)
            except TimeoutError:
                if timer.expired():
                    raise timed_out(ctx, "tool") from None
                raise
    except NodeFailed:
        raise
    except Exception as exc:
        raise _raised(spec, kwargs, ctx, exc) from exc
    return NodeResult(output=result if isinstance(result, str) else _canonical(result, spec, ctx))


def _spec(node: RenderedNode, ctx: NodeContext, tools: ToolRegistry) -> ToolSpec:
    if node.tool is None:
        raise NodeFailed(
            f"tool step `{ctx.node_id}` names no tool", node_id=ctx.node_id, hint="Give the node a `tool:`."
        )
    try:
        return tools.get(node.tool)
    except BatonError as exc:
        raise NodeFailed(exc.message, node_id=ctx.node_id, hint=exc.hint) from exc


def _canonical(value: Any, spec: ToolSpec, ctx: NodeContext) -> str:
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise NodeFailed(
            f"tool `{spec.name}` returned a {type(value).__name__}, which is not JSON: {exc}",
            node_id=ctx.node_id,
            hint="Return a str, or a JSON value (dict, list, number, bool, None).",
        ) from exc


def _raised(spec: ToolSpec, kwargs: dict[str, Any], ctx: NodeContext, exc: Exception) -> NodeFailed:
    message = ctx.redactor.redact(str(exc))
    hint = "Fix the tool or its `with:` values, then resume the run."
    if isinstance(exc, TypeError) and _bad_arguments(spec, kwargs):
        accepted = _parameters(spec)
        hint = f"`{spec.name}` accepts: {accepted}; fix the step's `with:`."
    return NodeFailed(
        f"tool `{spec.name}` raised {type(exc).__name__}: {message}", node_id=ctx.node_id, hint=hint
    )


def _bad_arguments(spec: ToolSpec, kwargs: dict[str, Any]) -> bool:
    try:
        inspect.signature(spec.fn).bind(**kwargs)
    except TypeError:
        return True
    except ValueError:
        return False
    return False


def _parameters(spec: ToolSpec) -> str:
    names = [p for p in inspect.signature(spec.fn).parameters if p != "idempotency_key"]
    return ", ".join(names) or "no arguments"
