"""`bash` steps: `bash -c <command>`; stdout is the output, a non-zero exit fails the step.

The command arrives rendered by `core/workflows/bash_template.py`: every templated value is
a `$BATON_ARG_n` reference, and the values themselves come in `node.variables`, exported to
the step. The command is passed to bash as one argv element, never through another shell.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.engine.nodes.process import run_process, step_result
from core.errors import NodeFailed

if TYPE_CHECKING:
    from core.engine.nodes import NodeContext, NodeResult, RenderedNode

BASH = "bash"


async def run(node: RenderedNode, ctx: NodeContext) -> NodeResult:
    if node.command is None:
        raise NodeFailed(
            f"bash step `{ctx.node_id}` has no command",
            node_id=ctx.node_id,
            hint="Give the node a `bash:` command.",
        )
    outcome = await run_process([BASH, "-c", node.command], ctx, variables=node.variables)
    return step_result(outcome, ctx)
