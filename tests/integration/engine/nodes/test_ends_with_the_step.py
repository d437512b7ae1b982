"""Whatever a step started ends with it: on a timeout, on cancellation and, in the sandbox,
however it detached. Each process is found on this machine by a unique `sleep` argument
(a pid seen inside the sandbox's PID namespace means nothing outside it)."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path

import pytest

from core.engine.nodes import NodeResult, RenderedNode, execute_node
from core.engine.providers import ProviderRegistry
from core.engine.tools import ToolRegistry
from core.errors import NodeFailed
from tests.unit.engine.nodes.conftest import MakeContext


async def bash(command: str, ctx: object, providers: ProviderRegistry) -> NodeResult:
    return await execute_node(
        RenderedNode(kind="bash", command=command), ctx, providers=providers, tools=ToolRegistry()
    )  # type: ignore[arg-type]


def _marker() -> str:
    return f"0.{uuid.uuid4().int % 10**9:09d}"


def _running(marker: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


async def _until(check: bool, marker: str, deadline: float = 5.0) -> bool:
    """Wait (bounded) until processes carrying `marker` are running (`check`) or gone."""
    until = time.monotonic() + deadline
    while bool(_running(marker)) != check:
        if time.monotonic() > until:
            return False
        await asyncio.sleep(0.02)
    return True


async def test_a_timeout_ends_everything_the_step_started(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    marker = _marker()
    with pytest.raises(NodeFailed, match="timed out after 1 s"):
        ctx = make_ctx(node_id="slow", timeout=1.0)
        await bash(f"sleep 300 {marker} & trap '' TERM; wait", ctx, fake_providers)
    assert await _until(False, marker), "a process of the step outlived its timeout"


async def test_cancelling_ends_everything_the_step_started(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    marker = _marker()
    step = asyncio.ensure_future(bash(f"sleep 300 {marker} & wait", make_ctx(), fake_providers))
    assert await _until(True, marker), "the step never started its child"
    step.cancel()
    with pytest.raises(asyncio.CancelledError):
        await step
    assert await _until(False, marker), "a process of the step outlived its cancellation"


@pytest.mark.parametrize("step_mode", ["sandboxed"])  # without it, such a process has no marker
async def test_in_the_sandbox_a_process_that_cleared_its_environment_and_detached_ends_too(
    make_ctx: MakeContext, fake_providers: ProviderRegistry, step_mode: str
) -> None:
    marker = _marker()
    command = f"env -i setsid -f sh -c 'exec sleep 300 {marker}'; echo left"
    result = await bash(command, make_ctx(), fake_providers)
    assert result.output == "left\n"
    assert await _until(False, marker), "`env -i setsid -f` outlived its step in the sandbox"
