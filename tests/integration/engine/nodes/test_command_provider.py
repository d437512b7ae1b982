"""The `command` provider: a real CLI, prompt on stdin, no shell."""

from __future__ import annotations

import asyncio
import shlex
import sys
from pathlib import Path

import pytest

from core.config import Settings
from core.engine.nodes import NodeResult, RenderedNode, execute_node
from core.engine.providers import CommandProvider, ProviderRegistry
from core.engine.tools import ToolRegistry
from core.errors import NodeFailed
from tests.integration.engine.nodes.processes import make_fifo, read_fifo, wait_gone
from tests.unit.engine.nodes.conftest import MakeContext

# A stand-in agent CLI: answers with the prompt it read, upper-cased, and its argv.
AGENT = "import sys; print(sys.stdin.read().upper(), end=''); print('|' + ' '.join(sys.argv[1:]))"


def registry_for(command: str) -> ProviderRegistry:
    settings = Settings(_env_file=None, prompt_provider="command", prompt_command=command)  # type: ignore[call-arg]
    return ProviderRegistry.from_settings(settings)


async def prompt(
    providers: ProviderRegistry, text: str, ctx: object, schema: dict | None = None
) -> NodeResult:
    node = RenderedNode(kind="prompt", prompt=text, output_schema=schema)
    return await execute_node(node, ctx, providers=providers, tools=ToolRegistry())  # type: ignore[arg-type]


async def test_prompt_goes_to_stdin_and_stdout_is_the_answer(make_ctx: MakeContext) -> None:
    providers = registry_for(shlex.join([sys.executable, "-c", AGENT, "--model", "big one"]))
    text = "summarise `git log` && $(rm -rf ~) 'quoted'"
    result = await prompt(providers, text, make_ctx())
    assert result.output == text.upper() + "|--model big one\n"
    assert (result.tokens_in, result.tokens_out) == (0, 0)


async def test_json_steps_get_the_schema_instruction(make_ctx: MakeContext) -> None:
    providers = registry_for(shlex.join([sys.executable, "-c", "import sys; print(sys.stdin.read())"]))
    schema = {"type": "object", "required": ["title"]}
    result = await prompt(providers, "notes", make_ctx(), schema=schema)
    assert result.output.startswith("notes\n\nAnswer with JSON only")
    assert '"required": ["title"]' in result.output


async def test_a_failing_command_names_it_with_exit_code_and_stderr(make_ctx: MakeContext) -> None:
    providers = registry_for(
        shlex.join([sys.executable, "-c", "import sys; sys.exit('rate limited, try later')"])
    )
    with pytest.raises(NodeFailed) as caught:
        await prompt(providers, "hi", make_ctx(node_id="draft"))
    assert caught.value.message == (
        f"prompt command `{sys.executable}` for step `draft` exited with code 1; "
        "stderr ends with:\nrate limited, try later"
    )


async def test_a_missing_program_is_a_clear_failure(make_ctx: MakeContext) -> None:
    with pytest.raises(NodeFailed, match="could not start `no-such-agent-cli`"):
        await prompt(registry_for("no-such-agent-cli -p"), "hi", make_ctx())


async def test_cancel_stops_the_command_and_its_children(make_ctx: MakeContext, tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path)
    agent = (
        "import subprocess, sys\n"
        "child = subprocess.Popen(['sleep', '300'])\n"
        f"open({str(fifo)!r}, 'w').write(f'{{child.pid}}\\n')\n"
        "child.wait()\n"
    )
    provider = CommandProvider([sys.executable, "-c", agent])
    step = asyncio.ensure_future(provider.complete("hi", ctx=make_ctx()))
    child = int(await read_fifo(fifo))
    step.cancel()
    with pytest.raises(asyncio.CancelledError):
        await step
    assert wait_gone(child)
