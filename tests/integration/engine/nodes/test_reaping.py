"""No process a step started outlives the step: not one that left the step's process group
with `setsid`, not a daemon's double fork, not the children of either.

Each step below starts a process that escapes, passes its pid on through FIFOs (the step
waits until the escaped process has reported in) and ends; when the step returns, that
process must be gone (killed and reaped, not a zombie of ours).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.engine.nodes import NodeResult, RenderedNode, execute_node
from core.engine.providers import ProviderRegistry
from core.engine.tools import ToolRegistry
from tests.integration.engine.nodes.processes import alive, make_fifo, read_fifo, wait_gone
from tests.unit.engine.nodes.conftest import MakeContext


async def bash(command: str, ctx: object, providers: ProviderRegistry) -> NodeResult:
    return await execute_node(
        RenderedNode("bash", command=command),
        ctx,
        providers=providers,
        tools=ToolRegistry(),  # type: ignore[arg-type]
    )


def relay(tmp_path: Path, launch: str) -> tuple[str, Path]:
    """A command running `launch` (which writes pids into $INNER) that hands them to the test
    through the returned FIFO, once the escaped process has written them."""
    inner, outer = make_fifo(tmp_path, "inner"), make_fifo(tmp_path, "outer")
    return f'export INNER={inner}; {launch}; read pids < {inner}; echo "$pids" > {outer}', outer


def gone(pid: int) -> bool:
    """Exited and reaped: no process, not even a zombie, has this pid any more."""
    return wait_gone(pid, timeout=0) and not Path(f"/proc/{pid}").exists()


async def test_a_setsid_child_does_not_outlive_its_step(
    make_ctx: MakeContext, fake_providers: ProviderRegistry, tmp_path: Path
) -> None:
    command, fifo = relay(tmp_path, "setsid -f sh -c 'echo $$ > $INNER; exec sleep 1000'")
    step = asyncio.ensure_future(bash(command, make_ctx(), fake_providers))
    escaped = int(await read_fifo(fifo))
    await step
    assert gone(escaped), "the setsid child outlived its step"


async def test_a_double_forked_daemon_and_its_children_do_not_outlive_their_step(
    make_ctx: MakeContext, fake_providers: ProviderRegistry, tmp_path: Path
) -> None:
    command, fifo = relay(tmp_path, "( setsid sh -c 'sleep 1000 & echo $$ $! > $INNER; wait' & )")
    step = asyncio.ensure_future(bash(command, make_ctx(), fake_providers))
    leader, child = (int(pid) for pid in (await read_fifo(fifo)).split())
    await step
    assert gone(leader) and gone(child), "the daemon or its child outlived the step"


async def test_a_running_step_keeps_what_it_started_while_another_step_ends(
    make_ctx: MakeContext, fake_providers: ProviderRegistry, tmp_path: Path
) -> None:
    release = make_fifo(tmp_path, "release")
    command, fifo = relay(tmp_path, "setsid -f sh -c 'echo $$ > $INNER; exec sleep 1000'")
    long = asyncio.ensure_future(
        bash(f"{command}; read line < {release}", make_ctx(node_id="long"), fake_providers)
    )
    escaped = int(await read_fifo(fifo))
    await bash("true", make_ctx(node_id="short"), fake_providers)
    assert alive(escaped), "another step's end killed a process of a step still running"
    await asyncio.to_thread(release.write_text, "go\n")
    await long
    assert gone(escaped)


async def test_a_step_that_exits_at_once_leaves_no_zombie_behind(
    make_ctx: MakeContext, fake_providers: ProviderRegistry, tmp_path: Path
) -> None:
    command, fifo = relay(tmp_path, "setsid -f sh -c 'echo $$ > $INNER'")
    step = asyncio.ensure_future(bash(command, make_ctx(), fake_providers))
    escaped = int(await read_fifo(fifo))
    await step
    assert wait_gone(escaped, timeout=5)
    await bash("true", make_ctx(node_id="next"), fake_providers)  # its sweep reaps the zombie
    assert gone(escaped)
