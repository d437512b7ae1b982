"""Approval gates through the engine and the chat handler on `MemoryStore`: no database, no
subprocess (the steps are inline tools). Two approvals that wait at once are answered in the
order they were asked, by every path (engine, chat command, the final reply's offer), and a
gate decided before is told with who decided it and what to do next."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot import testing
from core.commands.handler import Handler
from core.commands.messages import ChatMessage, Reply
from core.engine.engine import Engine
from core.engine.tools import ToolRegistry
from core.errors import GateAlreadyDecided
from core.store.memory import MemoryStore
from core.store.records import GateStatus, NodeStatus, RunStatus

TWIN = """
    name: twin
    nodes:
      - id: legal
        approval: "Legal ok?"
      - id: security
        approval: "Security ok?"
      - id: ship
        depends_on: [legal, security]
        tool: noop
"""


@dataclass
class Bot:
    store: MemoryStore
    engine: Engine
    handler: Handler
    finals: list[Reply]

    async def say(self, text: str, event: str) -> list[Reply]:
        message = ChatMessage(platform="console", conversation="c1", user="ana", text=text, event_id=event,
                              is_command=True, direct=True)  # fmt: skip
        return await self.handler.handle(message)


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "twin.yaml").write_text(textwrap.dedent(TWIN))
    tools = ToolRegistry()

    @tools.tool("noop", replay="pure", inline=True)
    def noop() -> str:
        return "shipped"

    baton = testing.build(tmp_path, tools=tools, replica_id="unit")
    assert isinstance(baton.store, MemoryStore)
    store, engine, handler = baton.store, baton.engine, baton.handler
    finals: list[Reply] = []

    async def outbox(reply: Reply) -> None:
        finals.append(reply)

    handler.register_outbox("console", outbox)
    yield Bot(store, engine, handler, finals)
    await engine.stop(grace=5)
    await handler.drain()


async def _paused(bot: Bot) -> str:
    run = await bot.engine.start_run(workflow="twin", args={}, platform="console", conversation="c1",
                                     thread=None, requester="console:ana")  # fmt: skip
    paused = await bot.engine.wait(run.id, timeout=30)
    assert paused.status is RunStatus.PAUSED
    waiting = [g for g in bot.store.gates.run_gates(run.id) if g.status is GateStatus.WAITING]
    assert [g.node_id for g in waiting] == ["legal", "security"]  # both wait, legal asked first
    return run.id


async def test_the_engine_answers_the_gate_asked_first(bot: Bot) -> None:
    run_id = await _paused(bot)
    await bot.engine.approve(run_id, actor="console:bo")
    assert bot.store.gates.get_gate(run_id, "legal").status is GateStatus.APPROVED
    assert (await bot.engine.wait(run_id, timeout=30)).status is RunStatus.PAUSED  # security still asks
    await bot.engine.approve(run_id, actor="console:cy")
    done = await bot.engine.wait(run_id, timeout=30)
    assert done.status is RunStatus.COMPLETED
    assert [(a.actor, a.action, a.details["node"]) for a in bot.store.events.audit_log(run_id)[1:]] == [
        ("console:bo", "approve", "legal"),
        ("console:cy", "approve", "security"),
    ]


async def test_a_chat_approve_and_the_final_offer_name_the_gate_asked_first(bot: Bot) -> None:
    run_id = await _paused(bot)
    await bot.handler.drain()
    offered = [r for r in bot.finals if r.run_id == run_id and r.kind == "gate_waiting"]
    assert offered and offered[-1].data["node"] == "legal"  # the final reply offers legal's buttons
    [decided] = await bot.say(f"approve {run_id}", "e1")
    assert (decided.kind, decided.data["node"], decided.data["by"]) == (
        "gate_decided", "legal", "console:ana",
    )  # fmt: skip
    assert bot.store.gates.get_gate(run_id, "security").status is GateStatus.WAITING


async def test_a_rejection_is_one_change_and_a_late_approval_is_told_who_decided(bot: Bot) -> None:
    run_id = await _paused(bot)
    [rejected] = await bot.say(f"reject {run_id} -- not yet", "e1")
    assert (rejected.kind, rejected.data["node"], rejected.data["approved"]) == (
        "gate_decided", "legal", False,
    )  # fmt: skip
    run = bot.store.runs.get_run(run_id)
    assert (run.status, run.status_by) == (RunStatus.CANCELLED, "console:ana")
    assert bot.store.gates.get_gate(run_id, "legal").status is GateStatus.REJECTED
    notes = [e for e in bot.store.steps.journal([run_id]) if e.node_id == "legal"]
    assert [(e.status, e.cache_key) for e in notes] == [(NodeStatus.FAILED, "")]  # the rejection's note
    [late] = await bot.say(f"approve {run_id}", "e2")
    assert late.is_error and "already rejected by console:ana" in late.data["message"]
    assert late.data["hint"] == f"Nothing more to decide; follow it with `/workflow status {run_id}`."
    with pytest.raises(GateAlreadyDecided) as again:
        await bot.engine.reject(run_id, actor="console:bo")
    assert (again.value.node_id, again.value.decision, again.value.by) == ("legal", "rejected", "console:ana")
