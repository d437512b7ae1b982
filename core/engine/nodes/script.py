"""`script` steps: Python source run by this interpreter in a subprocess.

The step's inputs arrive as JSON on stdin; stdout is the output. Same environment, timeout,
process-group and failure rules as `bash` steps. Short sources go through `-c`; long ones
(beyond what one argv element may hold) through a temporary file.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from core.engine.nodes.process import run_process, step_result
from core.errors import NodeFailed

if TYPE_CHECKING:
    from core.engine.nodes import NodeContext, NodeResult, RenderedNode

#: Linux caps one argv element at 128 KiB; stay well below it.
INLINE_LIMIT = 64 * 1024


async def run(node: RenderedNode, ctx: NodeContext) -> NodeResult:
    source = node.script_source
    if source is None:
        raise NodeFailed(
            f"script step `{ctx.node_id}` has no source",
            node_id=ctx.node_id,
            hint="Give the node a `script:` (a .py path or inline Python).",
        )
    stdin = node.stdin if node.stdin is not None else b""
    if len(source.encode("utf-8")) <= INLINE_LIMIT:
        outcome = await run_process([sys.executable, "-c", source], ctx, stdin=stdin, what="script")
        return step_result(outcome, ctx, what="script")
    with tempfile.TemporaryDirectory(prefix="baton-script-") as tmp:
        path = Path(tmp) / f"{ctx.node_id}.py"
        path.write_text(source, encoding="utf-8")
        path.chmod(0o644)
        seen = Path("/tmp") / f"baton-script-{ctx.node_id}.py"  # where a sandboxed step reads it
        sandboxed = ctx.environment.sandbox.enabled
        if sandboxed:
            Path(tmp).chmod(0o755)
        argv = [sys.executable, str(seen if sandboxed else path)]
        outcome = await run_process(argv, ctx, stdin=stdin, what="script", files={path: seen})
    return step_result(outcome, ctx, what="script")
