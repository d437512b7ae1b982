"""`tool` steps: call a registered Python callable with the step's `with:` values.

Async tools are awaited, sync tools run in a worker thread, sync tools marked `inline=True`
are called directly (the cheap path: no thread, no task). The result is the step's output:
a `str` as is, anything else as canonical JSON.

Timeouts: an async tool is cancelled; a threaded one is abandoned (Python cannot stop a
thread) and the step fails; an inline tool runs to completion (keep inline tools instant).

In the step sandbox (`core/engine/sandbox.py`; every tool loaded from `BATON_TOOL_MODULES`)
the tool runs in none of those ways but in a Python process of its own, in the sandbox, like
a script step: it imports the tool's module, calls it with the JSON `with:` values (and
`idempotency_key=`), and answers in JSON (`core/engine/tool_runner.py`). It sees nothing of
Baton's process: no tokens, no store, no secrets but its step's. A timeout kills it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.engine.nodes import NodeResult, output_refused
from core.engine.nodes.process import exit_failure, run_process, timed_out
from core.engine.tool_runner import BOOT, import_paths
from core.engine.workdirs import ArtifactOutside, read_in
from core.errors import BatonError, NodeFailed

if TYPE_CHECKING:
    from core.engine.nodes import NodeContext, RenderedNode
    from core.engine.tools import ToolRegistry, ToolSpec


async def run(node: RenderedNode, ctx: NodeContext, tools: ToolRegistry) -> NodeResult:
    spec = _spec(node, ctx, tools)
    if ctx.environment.sandbox.enabled and spec.source is not None:
        return await _sandboxed(spec, node, ctx)
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


_ANSWER_ROOM = 1 << 20  # bytes of JSON around the result, beyond the step's output cap


async def _sandboxed(spec: ToolSpec, node: RenderedNode, ctx: NodeContext) -> NodeResult:
    paths = import_paths()
    try:
        request = json.dumps(
            {"paths": paths, "module": spec.source, "tool": spec.name, "kwargs": dict(node.kwargs),
             "key": ctx.idempotency_key}
        ).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise NodeFailed(
            f"tool `{spec.name}` cannot be called with these `with:` values: {exc}",
            node_id=ctx.node_id,
            hint="Give the step JSON values (text, numbers, booleans, lists, mappings).",
        ) from exc
    room = dataclasses.replace(ctx, max_output=ctx.max_output + _ANSWER_ROOM)
    outcome = await run_process(
        [sys.executable, "-c", BOOT], room, stdin=request, what="tool", readable=_module_root(spec)
    )
    if outcome.returncode != 0:
        raise exit_failure(outcome, ctx, what=f"tool `{spec.name}` for step")
    data = outcome.stdout
    if outcome.stdout_file is not None and outcome.stdout_in_file < outcome.stdout_total:
        outcome.stdout_file.unlink(missing_ok=True)
        raise NodeFailed(
            f"tool `{spec.name}` answered with {outcome.stdout_total:,} bytes, more than the "
            f"{ctx.max_output_file:,} Baton keeps (BATON_MAX_OUTPUT_FILE_BYTES)",
            node_id=ctx.node_id,
            hint="Have the tool return less (leave a large result in a file of the run directory), "
            "then resume the run.",
        )
    if outcome.stdout_file is not None:
        try:
            data = read_in(ctx.workdir, outcome.stdout_file)
        except ArtifactOutside as exc:
            raise output_refused(ctx, f"tool `{spec.name}` for step", exc) from None
        outcome.stdout_file.unlink(missing_ok=True)  # (a name: unlink never follows a link)
    try:
        answer = json.loads(data)
    except ValueError:
        raise NodeFailed(
            f"tool `{spec.name}` ended without an answer", node_id=ctx.node_id,
            hint="Fix the tool (it must return, not exit the process), then resume the run.",
        ) from None
    return _answered(answer, spec, ctx, outcome.stderr_tail)


def _module_root(spec: ToolSpec) -> list[Path]:
    """The directory the tool's module is imported from (its package's, for a dotted name):
    shown to the sandboxed runner, read-only."""
    try:
        path = Path(spec.file or inspect.getfile(spec.fn)).resolve()
    except (TypeError, OSError):
        return []
    source = spec.source or ""
    depth = 0 if source.endswith(".py") or "/" in source else source.count(".")
    depth += path.name == "__init__.py"  # a package: the directory holding it
    return [path.parents[depth]] if depth < len(path.parents) else []


def _answered(answer: dict[str, Any], spec: ToolSpec, ctx: NodeContext, stderr_tail: str) -> NodeResult:
    if "text" in answer:
        return NodeResult(output=str(answer["text"]), stderr_tail=stderr_tail)
    if "json" in answer:
        return NodeResult(output=str(answer["json"]), stderr_tail=stderr_tail)
    error = answer.get("error")
    message = ctx.redactor.redact(str(answer.get("message", "")))
    if error == "raised":
        hint = "Fix the tool or its `with:` values, then resume the run."
        if answer.get("bad_arguments"):
            hint = f"`{spec.name}` accepts: {answer.get('accepted')}; fix the step's `with:`."
        raise NodeFailed(
            f"tool `{spec.name}` raised {answer.get('type')}: {message}", node_id=ctx.node_id, hint=hint
        )
    if error == "not_json":
        raise NodeFailed(
            f"tool `{spec.name}` returned a {answer.get('type')}, which is not JSON: {message}",
            node_id=ctx.node_id,
            hint="Return a str, or a JSON value (dict, list, number, bool, None).",
        )
    raise NodeFailed(message or f"tool `{spec.name}` could not be loaded", node_id=ctx.node_id,
                     hint=str(answer.get("hint") or "Fix the tool module, then resume the run."))


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
