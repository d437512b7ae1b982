"""`baton mcp`'s stdio: the SDK's transport, with a line it cannot read answered, not dropped.

The SDK's stdio reader hands a line it cannot parse to the server as an exception, and the
server drops it: the client waits forever for a reply. Between the two, each such line is
answered here (DESIGN, Trust boundary: bad input is refused at the edge with one line):

- not JSON at all: the JSON-RPC parse error (-32700, `id` null: it could not be read);
- JSON holding a lone surrogate (`"\\ud800"`, which the SDK's parser refuses) in a tool call:
  the tool error every refusal is (one line and a hint), for the call's id; elsewhere in a
  request, an invalid request (-32600) for its id;
- JSON that is no JSON-RPC message: an invalid request (-32600).

Raw invalid UTF-8 is not seen here: the SDK's reader decodes it to U+FFFD before anything else
reads the line.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, CallToolResult, ErrorData, JSONRPCError, JSONRPCResponse
from pydantic import ValidationError

from adapters.mcp.arguments import Mistake
from core.commands.input_text import value_problem

log = logging.getLogger(__name__)

Refuse = Callable[[Mistake], CallToolResult]


async def serve(server: MCPServer[Any], refuse: Refuse) -> None:
    """Serve `server` on stdin/stdout until the client closes stdin."""
    # the SDK runs an MCPServer on streams only through its low-level server (its in-memory
    # client does the same); the streams in between are ours
    lowlevel = server._lowlevel_server
    async with stdio_server() as (read, write):
        passed, screened = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def screen() -> None:
            async with passed:
                async for item in read:
                    if not isinstance(item, Exception):
                        await passed.send(item)
                        continue
                    reply = answer(item, refuse)
                    if reply is not None:
                        await write.send(SessionMessage(reply))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(screen)
            await lowlevel.run(screened, write, lowlevel.create_initialization_options())
            tasks.cancel_scope.cancel()


def answer(problem: Exception, refuse: Refuse) -> JSONRPCError | JSONRPCResponse | None:
    """The reply to a line the SDK could not read (`problem`, what its reader raised), or None
    for a notification (nothing to answer)."""
    line = _line(problem)
    try:
        message = json.loads(line) if line is not None else None
    except ValueError:
        log.info("mcp line refused: not JSON", extra={"action": "mcp_refused"})
        said = "Parse error: the line is not JSON; send one JSON-RPC message per line."
        return JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=PARSE_ERROR, message=said))
    ident = message.get("id") if isinstance(message, Mapping) else None
    if not isinstance(ident, str | int) or isinstance(ident, bool):
        ident = None
    surrogate = value_problem(message) if message is not None else None
    if isinstance(message, Mapping) and "method" in message and ident is None:
        log.info("mcp notification refused: %s", surrogate or "unreadable", extra={"action": "mcp_refused"})
        return None
    log.info("mcp request refused: %s", surrogate or "not JSON-RPC", extra={"action": "mcp_refused"})
    calls_tool = isinstance(message, Mapping) and message.get("method") == "tools/call"
    if surrogate is not None and ident is not None and calls_tool:
        found = Mistake(f"The arguments contain {surrogate}, which Baton does not accept.",
                        "Remove it (a `\\ud800`-style escape that is not half of a pair) and call again.")
        result = refuse(found).model_dump(by_alias=True, exclude_none=True, mode="json")
        return JSONRPCResponse(jsonrpc="2.0", id=ident, result=result)
    why = f"it contains {surrogate}" if surrogate else "it is not a JSON-RPC 2.0 message"
    return JSONRPCError(jsonrpc="2.0", id=ident, error=ErrorData(
        code=INVALID_REQUEST, message=f"Invalid request: {why}; send it again without that."))


def _line(problem: Exception) -> str | None:
    """The line the SDK's reader failed to parse, when its error says it (pydantic's
    `json_invalid` carries the input); else None."""
    if isinstance(problem, ValidationError):
        for error in problem.errors():
            if error.get("type") == "json_invalid" and isinstance(error.get("input"), str):
                return str(error["input"])
    return None
