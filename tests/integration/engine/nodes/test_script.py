"""`script` steps: Python in a subprocess with the inputs as JSON on stdin."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path

import pytest

from core.engine.nodes import NodeResult, RenderedNode, execute_node
from core.engine.nodes.script import INLINE_LIMIT
from core.engine.providers import ProviderRegistry
from core.engine.tools import ToolRegistry
from core.errors import NodeFailed
from tests.integration.engine.nodes.processes import make_fifo, read_fifo, wait_gone
from tests.unit.engine.nodes.conftest import MakeContext


async def script(
    source: str, ctx: object, providers: ProviderRegistry, stdin: bytes | None = None
) -> NodeResult:
    node = RenderedNode(kind="script", script_source=textwrap.dedent(source), stdin=stdin)
    return await execute_node(node, ctx, providers=providers, tools=ToolRegistry())  # type: ignore[arg-type]


ECHO_INPUTS = """
    import json, os, sys
    inputs = json.load(sys.stdin)
    print(json.dumps({"got": inputs, "node": os.environ["BATON_NODE_ID"], "cwd": os.getcwd()}))
"""


async def test_inputs_arrive_as_json_on_stdin(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    inputs = {"version": "1.2", "message": "it's `quoted` $(not run)\nsecond line", "n": [1, 2]}
    ctx = make_ctx(node_id="parse")
    result = await script(ECHO_INPUTS, ctx, fake_providers, stdin=json.dumps(inputs).encode())
    value = json.loads(result.output)
    assert value["got"] == inputs
    assert value["node"] == "parse"
    assert Path(value["cwd"]).resolve() == ctx.workdir.resolve()


async def test_missing_stdin_reads_as_empty(make_ctx: MakeContext, fake_providers: ProviderRegistry) -> None:
    result = await script("import sys; print(repr(sys.stdin.read()))", make_ctx(), fake_providers)
    assert result.output == "''\n"


async def test_an_exception_fails_the_step_with_the_traceback_tail(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    with pytest.raises(NodeFailed) as caught:
        await script("print('partial')\n1 / 0\n", make_ctx(node_id="calc"), fake_providers)
    message = caught.value.message
    assert message.startswith("script `calc` exited with code 1; stderr ends with:\nTraceback")
    assert message.endswith("ZeroDivisionError: division by zero")


async def test_large_sources_run_from_a_temporary_file(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    padding = "# " + "x" * 100 + "\n"
    source = (
        padding * (INLINE_LIMIT // len(padding) + 10) + "import sys, json\nprint(json.load(sys.stdin)['a'])\n"
    )
    assert len(source) > INLINE_LIMIT
    result = await script(source, make_ctx(), fake_providers, stdin=b'{"a": "from a file"}')
    assert result.output == "from a file\n"


async def test_large_stdin_and_stdout_do_not_deadlock(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    blob = "y" * (8 * 1024 * 1024)
    source = "import sys, json\nsys.stdout.write(json.load(sys.stdin)['blob'])\n"
    result = await script(
        source,
        make_ctx(timeout=60, max_output=len(blob)),
        fake_providers,
        stdin=json.dumps({"blob": blob}).encode(),
    )
    assert result.output == blob


async def test_timeout_kills_the_script_and_its_children(
    make_ctx: MakeContext, fake_providers: ProviderRegistry, tmp_path: Path
) -> None:
    fifo = make_fifo(tmp_path)
    source = f"""
        import subprocess, time
        child = subprocess.Popen(["sleep", "300"])
        with open({str(fifo)!r}, "w") as f:
            f.write(f"{{child.pid}}\\n")
        child.wait()
    """
    step = asyncio.ensure_future(script(source, make_ctx(node_id="py", timeout=1.5), fake_providers))
    child = int(await read_fifo(fifo))
    with pytest.raises(NodeFailed, match=r"script `py` timed out after 1\.5 s"):
        await step
    assert wait_gone(child)
