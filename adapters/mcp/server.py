"""The MCP server (the official SDK's `MCPServer`): the tools' names, arguments and descriptions,
written for a model, each forwarding to `AgentTools` as the principal of the connection.

    server = build_server(tools, principal=lambda: "mcp:local")          # `baton mcp` (stdio)
    server = build_server(tools, principal=request_principal)            # `/mcp` (bearer token)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, WithJsonSchema

from adapters.mcp.arguments import ArgumentCheck, Mistake, Schema
from adapters.mcp.tools import MAX_WAIT, AgentTools, Answer
from core.commands.model import RUN_STATUSES

Principal = Callable[[], str]

INSTRUCTIONS = """\
Baton runs durable workflows (DAGs of steps, some of which wait for a person's approval).
Typical loop: list_workflows -> run_workflow -> wait_run (repeat until it rests) -> get_run /
get_output. A run is named by its id (or a unique prefix of it). Every result carries the run's
status and `attention`: `gate` (a person must approve; you may not approve runs you started),
`needs_attention` (a step needs a decision), `queued`, or null. Never start a second run to
retry: resume the failed one (finished steps are served from cache). When run_workflow answers
with `choice: unfinished_run`, pick one of its `options` explicitly."""

RUN = Annotated[str, Field(description="The run's id, or a unique prefix of it (e.g. '3f9a').")]
#: a run's status, as the schema lists them (`adapters.mcp.arguments` refuses any other)
STATUS = Annotated[str, WithJsonSchema({"type": "string", "enum": list(RUN_STATUSES)})]


def _result(answer: Answer) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=answer.text)],
                          structured_content=answer.data, is_error=answer.error)


def refusal(tools: AgentTools) -> Callable[[Mistake], CallToolResult]:
    """A call no tool can take, answered as the tool error every refusal is."""
    return lambda found: _result(tools.mistake(found.error, found.hint))


def build_server(tools: AgentTools, *, principal: Principal, name: str = "baton",
                 **options: Any) -> MCPServer[Any]:
    """`options`: the SDK server's own (`token_verifier`, `auth` for `/mcp`)."""
    server: MCPServer[Any] = MCPServer(name, instructions=INSTRUCTIONS, **options)
    reading = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    acting = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)
    ending = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True)

    async def call(op: Callable[..., Awaitable[Answer]], *args: Any, **kwargs: Any) -> CallToolResult:
        return _result(await op(principal(), *args, **kwargs))

    async def schemas() -> dict[str, Schema]:
        return {tool.name: tool.input_schema for tool in await server.list_tools()}

    server.middleware.append(ArgumentCheck(schemas, refusal(tools)))

    @server.tool(annotations=reading)
    async def list_workflows() -> CallToolResult:
        """List the workflows you may run, with their description and input names.

        Use it first, to find a workflow's exact name and what inputs it takes. Returns
        `workflows` [{name, description, inputs}] and `broken` (files that fail to load, with why)."""
        return await call(tools.list_workflows)

    @server.tool(annotations=acting)
    async def run_workflow(
        workflow: Annotated[str, Field(description="The workflow's name, as list_workflows gives it.")],
        message: Annotated[str | None, Field(description="The free-text `message` input, if any.")] = None,
        args: Annotated[dict[str, Any] | None, Field(
            description="Inputs as a JSON object, e.g. {\"env\": \"staging\"}. Pass the same values "
                        "byte for byte to re-use cached results.")] = None,
        force: Annotated[bool, Field(
            description="Start a new run even though an unfinished run of this workflow exists "
                        "(only after a `choice: unfinished_run` answer told you so).")] = False,
        replace: Annotated[str | None, Field(
            description="Abandon this unfinished run first, then start (the `replace` option).")] = None,
    ) -> CallToolResult:
        """Start a run of a workflow. Returns at once with the run's id, status and handle; follow it
        with wait_run.

        If you already have an unfinished run of this workflow (failed, paused, needing attention),
        nothing starts: the result is `choice: unfinished_run` with three `options` (resume it,
        replace it, or force a new one beside it), each naming the tool and arguments to call.
        Missing required inputs are an error listing them."""
        return await call(tools.run_workflow, workflow, message=message, args=args, force=force,
                          replace=replace)

    @server.tool(annotations=reading)
    async def get_run(run: RUN) -> CallToolResult:
        """Read a run now: status, what it waits for, its page link and each node's state.

        Use it to check a run without waiting; use wait_run to wait for it to move."""
        return await call(tools.get_run, run)

    @server.tool(annotations=reading)
    async def list_runs(
        workflow: Annotated[str | None, Field(description="Only runs of this workflow.")] = None,
        status: Annotated[STATUS | None, Field(
            description=f"Only runs with this status: {', '.join(RUN_STATUSES)}.")] = None,
    ) -> CallToolResult:
        """List recent runs where your runs report (newest first, up to 20) that you may see.

        Use it to find a run's id again. Returns `runs`, each as get_run describes a run."""
        return await call(tools.list_runs, workflow=workflow, status=status)

    @server.tool(annotations=reading)
    async def wait_run(
        run: RUN,
        timeout_s: Annotated[float, Field(
            description=f"Seconds to wait at most (0 to {int(MAX_WAIT)}).", ge=0, le=MAX_WAIT)] = 60,
    ) -> CallToolResult:
        """Wait until a run stops moving: it completed, failed or was cancelled, or it needs a person
        (`attention`: `gate`, `needs_attention`, `queued`). Returns the run as get_run does, with
        `timed_out: true` if it was still running when the time was up (call it again).

        A gate is decided by people in chat or on the run's page; you cannot approve a run you
        started, so wait for them."""
        return await call(tools.wait_run, run, timeout_s)

    @server.tool(annotations=acting)
    async def approve(
        run: RUN,
        comment: Annotated[str | None, Field(description="Why; shown in the run's thread.")] = None,
        values: Annotated[dict[str, Any] | None, Field(
            description="Values the gate's form asks for, e.g. {\"replicas\": 3}.")] = None,
        choice: Annotated[str | None, Field(
            description="One of the gate's choices other than approve (e.g. `hotfix`).")] = None,
    ) -> CallToolResult:
        """Approve the gate a run waits at (a vote under its policy, as a person's would be).

        Only for runs someone else started, when you are one of the gate's approvers; gates marked
        humans_only refuse every agent. Returns the run and `decision` (`gate_decided`, or
        `vote_counted` while more approvals are needed)."""
        return await call(tools.approve, run, comment=comment, values=values, choice=choice)

    @server.tool(annotations=ending)
    async def reject(
        run: RUN, reason: Annotated[str, Field(description="Why; shown in the run's thread.")],
    ) -> CallToolResult:
        """Reject the gate a run waits at; the run is cancelled. Same rules as approve."""
        return await call(tools.reject, run, reason)

    @server.tool(annotations=acting)
    async def resume(run: RUN) -> CallToolResult:
        """Continue a failed or paused run with its own inputs: finished steps are served from
        cache, only what failed or changed runs again. Use it instead of starting a new run.
        Returns the run, running again; follow it with wait_run."""
        return await call(tools.resume, run)

    @server.tool(annotations=ending)
    async def abandon(run: RUN) -> CallToolResult:
        """Give up a run you started (failed, paused, needing attention or running): it is
        cancelled and cannot be resumed. Returns the run, cancelled."""
        return await call(tools.abandon, run)

    @server.tool(annotations=reading)
    async def get_output(
        run: RUN, node: Annotated[str, Field(description="The node's id, as get_run lists it.")],
    ) -> CallToolResult:
        """Read one node's output in a run (parsed JSON when it is JSON, else text), secrets
        hidden. Use it after wait_run reports the run completed, to use its results."""
        return await call(tools.get_output, run, node)

    return server
