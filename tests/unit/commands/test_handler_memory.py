"""The chat handler and its progress reporter on an `Engine` over `MemoryStore`: commands
answered, errors worded by the commands layer, the final reply of a run by how it ended,
a redelivered event acted on once. Steps are inline tools: no database, no subprocess."""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bot import testing
from core.commands.handler import Handler
from core.commands.messages import ChatMessage, Reply
from core.engine.engine import Engine
from core.engine.tools import ToolRegistry
from core.store.memory import MemoryStore
from core.store.records import RunStatus

FINAL_KINDS = {"run_completed", "run_failed", "gate_waiting", "needs_attention", "run_cancelled"}
WORKFLOWS = {
    "echo": """
        name: echo
        nodes:
          - id: say
            tool: shout
            with: {text: "{{ inputs.message }}"}
    """,
    "broken": """
        name: broken
        nodes:
          - id: boom
            tool: boom
    """,
    "gated": """
        name: gated
        nodes:
          - id: review
            approval: "Ship {{ inputs.message }}?"
          - id: ship
            depends_on: [review]
            tool: shout
            with: {text: "shipped"}
    """,
}


@dataclass
class Chat:
    store: MemoryStore
    engine: Engine
    handler: Handler
    outbox: list[Reply] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    async def say(self, text: str, *, event_id: str | None = None) -> list[Reply]:
        event = event_id or f"e{next(self._ids)}"
        message = ChatMessage(platform="console", conversation="c1", user="ana", text=text, event_id=event,
                              is_command=True, direct=True)  # fmt: skip
        return await self.handler.handle(message)

    async def final(self, run_id: str) -> Reply:
        await self.engine.wait(run_id, timeout=10)
        await self.handler.drain()
        finals = [r for r in self.outbox
                  if r.run_id == run_id and r.kind in FINAL_KINDS and not r.how.edit_only]
        assert finals, f"no final reply for {run_id}: {[r.kind for r in self.outbox]}"
        return finals[-1]


@pytest.fixture
async def chat(tmp_path: Path) -> AsyncIterator[Chat]:
    folder = tmp_path / "workflows"
    folder.mkdir()
    for name, text in WORKFLOWS.items():
        (folder / f"{name}.yaml").write_text(textwrap.dedent(text))
    tools = ToolRegistry()

    @tools.tool("shout", replay="pure", inline=True)
    def shout(text: str) -> str:
        return text.upper()

    @tools.tool("boom", replay="pure", inline=True)
    def boom() -> str:
        raise RuntimeError("the wire is cut\nsecond line")

    baton = testing.build(tmp_path, tools=tools, replica_id="unit")
    assert isinstance(baton.store, MemoryStore)
    store, engine, handler = baton.store, baton.engine, baton.handler
    chat = Chat(store, engine, handler)

    async def collect(reply: Reply) -> None:
        chat.outbox.append(reply)

    handler.register_outbox("console", collect)
    yield chat
    await engine.stop(grace=5)
    await handler.drain()


async def test_a_run_command_starts_a_run_and_its_final_reply_carries_the_output(chat: Chat) -> None:
    [started] = await chat.say('run echo "hello there"')
    assert started.kind == "run_started" and started.run_id
    final = await chat.final(started.run_id)
    assert (final.kind, final.run_status) == ("run_completed", "completed")
    assert final.data["output"] == "HELLO THERE"
    audit = chat.store.events.audit_log(started.run_id)
    assert [(a.actor, a.action) for a in audit] == [("console:ana", "start"), ("console:ana", "command")]


async def test_a_redelivered_command_is_acted_on_once(chat: Chat) -> None:
    [started] = await chat.say("run echo once", event_id="ev-1")
    assert await chat.say("run echo once", event_id="ev-1") == []
    await chat.final(started.run_id or "")
    assert [r.id for r in chat.store.runs.recent_runs(limit=10)] == [started.run_id]


async def test_a_failed_run_offers_resume_and_shows_the_errors_first_line(chat: Chat) -> None:
    [started] = await chat.say("run broken")
    final = await chat.final(started.run_id or "")
    assert final.kind == "run_failed"
    assert "the wire is cut" in final.data["error_tail"]
    assert final.buttons[0].command == f"resume {started.run_id}"


async def test_resuming_a_completed_run_is_refused_with_the_next_step_worded(chat: Chat) -> None:
    [started] = await chat.say("run echo hi")
    run_id = started.run_id or ""
    await chat.final(run_id)
    [refused] = await chat.say(f"resume {run_id}")
    assert refused.is_error and refused.data["message"] == f"run {run_id} is completed; it cannot be resumed"
    reuse = f"Re-use its results in a new run: `/workflow run echo --resume-from {run_id}`."
    assert refused.data["hint"] == reuse


async def test_a_paused_run_offers_its_gate_and_an_approval_completes_it(chat: Chat) -> None:
    [started] = await chat.say("run gated v2")
    run_id = started.run_id or ""
    offer = await chat.final(run_id)
    assert (offer.kind, offer.data["node"], offer.data["question"]) == ("gate_waiting", "review", "Ship v2?")
    [refused] = await chat.say(f"cancel {run_id}")
    assert refused.data["hint"] == f"To drop it, use `/workflow abandon {run_id}`."
    [decided] = await chat.say(f"approve {run_id} -- looks good")
    assert (decided.kind, decided.data["node"], decided.data["approved"]) == ("gate_decided", "review", True)
    final = await chat.final(run_id)
    assert (final.kind, final.data["output"]) == ("run_completed", "SHIPPED")
    [late] = await chat.say(f"reject {run_id}")
    assert late.is_error and "already approved by console:ana" in late.data["message"]
    assert late.data["hint"] == f"Nothing more to decide; follow it with `/workflow status {run_id}`."


async def test_the_engine_usage_error_names_the_parsers_usage_line(chat: Chat) -> None:
    [started] = await chat.say("run echo hi")
    run_id = started.run_id or ""
    await chat.final(run_id)
    [refused] = await chat.say(f"invalidate {run_id} sayy")
    assert refused.is_error and "did you mean `say`?" in refused.data["message"]
    assert refused.data["hint"].startswith("Usage: /workflow invalidate ")
    assert chat.store.runs.get_run(run_id).status is RunStatus.COMPLETED
