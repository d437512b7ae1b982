"""Step processes are waited for with pidfds on the event loop (`core/engine/nodes/children.py`),
not by a thread each (Python 3.11's default); exit statuses still come through, in any loop."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading

from core.engine.nodes import NodeResult, RenderedNode, children, execute_node
from core.engine.providers import ProviderRegistry
from core.engine.tools import ToolRegistry
from tests.unit.engine.nodes.conftest import MakeContext


async def _bash(command: str, make_ctx: MakeContext, providers: ProviderRegistry) -> NodeResult:
    return await execute_node(RenderedNode(kind="bash", command=command), make_ctx(), providers=providers,
                              tools=ToolRegistry())


def _waiting_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if "waitpid-" in t.name]  # asyncio-waitpid-N: its threads


async def test_steps_running_at_once_start_no_thread_each(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    steps = [asyncio.ensure_future(_bash(f"sleep 0.3; printf {n}", make_ctx, fake_providers))
             for n in range(6)]
    await asyncio.sleep(0.15)  # all six are running
    seen = _waiting_threads()
    results = await asyncio.gather(*steps)
    assert [r.output for r in results] == [str(n) for n in range(6)]
    assert seen == []
    if sys.version_info < (3, 12):
        assert isinstance(asyncio.get_child_watcher(), children.PidfdWatcher)


async def test_exit_statuses_come_through_in_a_loop_of_another_thread(
    make_ctx: MakeContext, fake_providers: ProviderRegistry
) -> None:
    await _bash("true", make_ctx, fake_providers)  # the watcher is installed by a step
    statuses: list[int | None] = []

    async def elsewhere() -> None:
        for script in ("exit 7", "kill -TERM $$", "true"):
            proc = await asyncio.create_subprocess_exec("sh", "-c", script)
            statuses.append(await proc.wait())

    thread = threading.Thread(target=asyncio.run, args=(elsewhere(),))
    thread.start()
    await asyncio.to_thread(thread.join)
    assert statuses == [7, -15, 0]


async def test_the_main_process_exit_is_told_by_the_watchers_own_pidfd() -> None:
    if not children.use_pidfds():  # asyncio's own watcher (3.12+, no pidfds): nothing is handed out,
        assert children.exit_of(os.getpid()) is None  # process.py opens a pidfd of its own
        return
    proc = await asyncio.create_subprocess_exec(
        "sh", "-c", "sleep 30 & read go; exit 3", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, start_new_session=True,
    )  # it exits once told to; the background sleep keeps stdout open after that
    assert proc.stdin is not None
    try:
        exited = children.exit_of(proc.pid)
        assert exited is not None
        proc.stdin.write(b"go\n")
        await asyncio.wait_for(exited, 10)
        assert children.exit_of(proc.pid) is None  # no longer watched: the caller's own pidfd
        assert proc.stdout is not None and not proc.stdout.at_eof()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
    assert await proc.wait() == 3
