"""The other side of a sandboxed tool step: a Python process that imports the tool's module,
calls the tool with the step's JSON arguments and answers in JSON.

Baton starts it in the step's sandbox (`core/engine/nodes/tool.py`) as

    python -c BOOT    with, on stdin, {"paths": [...], "module": "...", "tool": "...",
                                       "kwargs": {...}, "key": "..." | null}

and reads one JSON object on its stdout: `{"text": str}`, `{"json": canonical JSON}`, or
`{"error": "load" | "raised" | "not_json", "message": ..., ...}`. What the tool prints goes to
stderr (the step's stderr tail), so it cannot be taken for the answer. The process then ends
without the interpreter's teardown (`core/exiting.py`), as the `baton` executable does.
Imports the standard library, `core.engine.tools` and `core.exiting` only (asyncio only for
an `async` tool): a tool step pays for the interpreter's start, not for Baton's modules.

It also tells Baton which tools a module defines without Baton importing it (whatever a
module does at import would run with Baton's rights): with `{"paths": [...], "describe":
[module, ...]}` on stdin it imports them, keys their tools as Baton would, and answers
`{"tools": [ToolSpec as JSON, ...]}` (`describe`; Baton's side is `bot/runtime.py`).
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from pathlib import Path
from typing import Any

#: what `python -c` runs: Baton's import path first, then `main`
BOOT = (
    "import json, sys\n"
    "request = json.loads(sys.stdin.buffer.read())\n"
    "sys.path[:0] = request['paths']\n"
    "from core.engine.tool_runner import main\n"
    "main(request)\n"
    "from core.exiting import leave\n"
    "leave(0)\n"
)


def import_paths() -> list[str]:
    """The `paths` of a request: Baton's own code first, then this process's import path."""
    code = str(Path(__file__).resolve().parents[2])
    return [code, *(p for p in sys.path if p and p != code)]


def canonical(value: Any) -> str:
    """A tool's non-str result as the step's output (TypeError/ValueError: not JSON)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def bad_arguments(fn: Any, kwargs: dict[str, Any]) -> bool:
    """The keywords do not fit the function's signature."""
    try:
        inspect.signature(fn).bind(**kwargs)
    except TypeError:
        return True
    except ValueError:
        return False
    return False


def parameters(fn: Any) -> str:
    names = [p for p in inspect.signature(fn).parameters if p != "idempotency_key"]
    return ", ".join(names) or "no arguments"


def main(request: dict[str, Any]) -> None:
    answer = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the tool's prints (and its children's) go to stderr
    with answer:
        said = describe(request) if "describe" in request else call(request)
        answer.write(json.dumps(said, ensure_ascii=False))


def describe(request: dict[str, Any]) -> dict[str, Any]:
    """The tools the modules of `request["describe"]` define, as Baton registers them (their
    identities computed here, from the files this sandbox shows at the same paths)."""
    from core.engine.tools import ToolRegistry, described
    from core.errors import BatonError

    registry = ToolRegistry()
    try:
        registry.load([str(m) for m in request["describe"]], Path(str(request.get("base", "/"))))
    except BatonError as exc:
        return {"error": "load", "message": exc.message, "hint": exc.hint}
    return {"tools": [described(registry.get(name)) for name in registry.names()]}


def call(request: dict[str, Any]) -> dict[str, Any]:
    from core.engine import tools
    from core.engine.tools import ToolRegistry
    from core.errors import BatonError

    tools._identities = False  # this process calls the tool; Baton keyed it already
    registry = ToolRegistry()
    try:
        registry.load([str(request["module"])], Path("/"))
        spec = registry.get(str(request["tool"]))
    except BatonError as exc:
        return {"error": "load", "message": exc.message, "hint": exc.hint}
    kwargs = dict(request.get("kwargs") or {})
    if spec.accepts_key:
        kwargs["idempotency_key"] = request.get("key")
    try:
        if spec.is_async:
            import asyncio  # ~70 ms of this process's start: only for the tools that need it

            result = asyncio.run(spec.fn(**kwargs))
        else:
            result = spec.fn(**kwargs)
    except Exception as exc:
        sys.stderr.flush()
        return {
            "error": "raised",
            "type": type(exc).__name__,
            "message": str(exc),
            "bad_arguments": isinstance(exc, TypeError) and bad_arguments(spec.fn, kwargs),
            "accepted": parameters(spec.fn),
        }
    if isinstance(result, str):
        return {"text": result}
    try:
        return {"json": canonical(result)}
    except (TypeError, ValueError) as exc:
        return {"error": "not_json", "type": type(result).__name__, "message": str(exc)}
