"""A run whose unsafe step may have half-happened, through the conversation: the thread is told
what may have happened with one button per way out, and `resolve` settles it forward."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.redaction import Redactor
from core.render import platforms, render
from core.store.records import RunStatus
from tests.integration.commands.conftest import Chat, make_chat
from tests.integration.step_signals import StepSignals

PLAIN = Redactor(())  # these tests are about templates; redaction has its own

SEND = """
    name: send
    nodes:
      - id: send
        bash: |
          echo send $$ >> {{ inputs.sig }}
          [ -f {{ inputs.release }} ] || exec sleep 30
          echo delivered
        replay: unsafe
      - id: report
        depends_on: [send]
        bash: echo reported
        replay: pure
"""


@dataclass
class Crashed:
    survivor: Chat  # the process that recovered the run
    run_id: str


@pytest.fixture
async def crashed(tmp_path: Path, sqlite_url: str) -> AsyncIterator[Crashed]:
    """`send` was in flight when its process died; a peer took the run over."""
    owner = await make_chat(tmp_path / "owner", sqlite_url, lease_seconds=0.3)
    peer = await make_chat(tmp_path / "peer", sqlite_url, lease_seconds=0.3)
    for chat in (owner, peer):
        (chat.root / "workflows" / "send.yaml").write_text(textwrap.dedent(SEND))
    signals = StepSignals(tmp_path / "signals.fifo")
    try:
        release = tmp_path / "release"
        [started] = await owner.say(f"run send --set sig={signals.path} --set release={release}")
        assert started.run_id
        await signals.wait_for("send", timeout=15)
        await owner.engine.stop(grace=0)  # like a killed process: `send` stays started
        release.touch()
        await peer.engine.start()
        yield Crashed(peer, started.run_id)
    finally:
        signals.close()
        for chat in (owner, peer):
            await chat.engine.stop(grace=5)
            await chat.handler.drain()
            chat.store.close()


async def test_the_thread_is_told_and_resolve_done_continues_the_run(crashed: Crashed) -> None:
    chat, run_id = crashed.survivor, crashed.run_id
    told = await chat.final(run_id)

    assert told.kind == "needs_attention" and told.data["node"] == "send"
    assert [b.command for b in told.buttons] == [
        f"resolve {run_id} send done", f"resolve {run_id} send retry", f"resolve {run_id} send fail"]
    for platform in platforms():
        assert "send" in "\n".join(render(told, platform, PLAIN))

    [unsettled] = await chat.say(f"resume {run_id}")  # never re-runs it blindly
    assert unsettled.kind == "run_resumed"
    assert (await chat.rest(run_id)).status is RunStatus.NEEDS_ATTENTION

    [wrong] = await chat.say(f"resolve {run_id} report done")
    assert wrong.is_error and wrong.data["hint"] and "\n" not in wrong.data["message"]

    [settled] = await chat.say(told.buttons[0].command + ' --output "delivered by hand"')
    assert settled.kind == "node_resolved" and settled.data["action"] == "done"
    assert (await chat.rest(run_id)).status is RunStatus.COMPLETED
    [again] = await chat.say(told.buttons[0].command)  # a second click: refused, one line
    assert again.is_error and "needs attention" in again.data["message"]
