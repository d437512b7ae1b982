"""`ProgressReporter` on an `Engine` over `MemoryStore`: node events coalesced into few
progress edits, one final reply by how the run ended naming only what this execution ran,
and no background reply for a cancellation a command already announces."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.commands.messages import Reply
from core.commands.progress import ProgressReporter
from core.delivery.edits import Edits, NotDelivered
from core.engine.engine import Engine
from core.engine.events import EngineEvent, EventKind
from core.store.records import RunStatus
from tests.unit.engine.memory_rig import Rig

LONG = "name: long\nnodes:\n" + "".join(
    f"  - id: s{i}\n    tool: first\n" + (f"    depends_on: [s{i - 1}]\n" if i else "") for i in range(40)
)
SHAKY = """
    name: shaky
    nodes:
      - id: a
        tool: first
      - id: b
        depends_on: [a]
        tool: flaky
"""
GATED = """
    name: gated
    nodes:
      - id: ok
        approval: "Ship?"
"""


class Outbox:
    def __init__(self) -> None:
        self.replies: list[Reply] = []

    async def __call__(self, reply: Reply) -> None:
        self.replies.append(reply)

    def of(self, run_id: str) -> list[Reply]:
        return [r for r in self.replies if r.run_id == run_id]


@pytest.fixture
async def parts(tmp_path: Path) -> AsyncIterator[tuple[Engine, ProgressReporter, Outbox]]:
    rig = Rig(tmp_path)
    rig.counted("first")
    rig.counted("flaky", fail=1)
    engine = rig.engine(long=LONG, shaky=SHAKY, gated=GATED)
    progress = ProgressReporter(store=rig.store, engine=engine, edits=Edits(interval=60.0))
    outbox = Outbox()
    progress.register_outbox("console", outbox)
    yield engine, progress, outbox
    await engine.stop(grace=5)
    await progress.drain()


async def _run(engine: Engine, progress: ProgressReporter, workflow: str) -> str:
    run = await engine.start_run(workflow=workflow, args={}, platform="console", conversation="c1",
                                 thread=None, requester="console:ana")  # fmt: skip
    await engine.wait(run.id, timeout=10)
    await progress.drain()
    return run.id


async def test_many_node_events_make_few_progress_edits_and_one_final_reply(
    parts: tuple[Engine, ProgressReporter, Outbox],
) -> None:
    engine, progress, outbox = parts
    run_id = await _run(engine, progress, "long")
    kinds = [r.kind for r in outbox.of(run_id)]
    assert kinds.count("run_completed") == 1 and kinds[-1] == "run_completed"
    assert kinds.count("progress") <= 3  # 120 node events; one edit per minute, plus the last
    last_progress = [r for r in outbox.of(run_id) if r.kind == "progress"][-1]
    assert last_progress.data["large"] and ["done", 40] in last_progress.data["counts"]  # summed up
    assert last_progress.how.replace_key == f"progress:{run_id}"  # edited in place


async def test_the_final_reply_of_a_resume_names_only_what_it_ran(
    parts: tuple[Engine, ProgressReporter, Outbox],
) -> None:
    engine, progress, outbox = parts
    run_id = await _run(engine, progress, "shaky")
    failed = outbox.of(run_id)[-1]
    assert (failed.kind, failed.data["failed_node"]) == ("run_failed", "b")
    outbox.replies.clear()
    await engine.resume(run_id, actor="console:ana")
    await engine.wait(run_id, timeout=10)
    await progress.drain()
    final = outbox.of(run_id)[-1]
    assert final.kind == "run_completed"
    assert [n["node_id"] for n in final.data["ran"]] == ["b"]  # `a` was done before the resume


async def test_a_cancellation_a_command_announces_gets_no_second_reply(
    parts: tuple[Engine, ProgressReporter, Outbox],
) -> None:
    engine, progress, outbox = parts
    told = await _run(engine, progress, "gated")
    assert outbox.of(told)[-1].kind == "gate_waiting"
    progress.announced.add(told)  # the command's own reply says it
    await engine.abandon(told, actor="console:bo")
    await progress.drain()
    assert "run_cancelled" not in [r.kind for r in outbox.of(told)]
    assert told not in progress.announced
    untold = await _run(engine, progress, "gated")
    ended = await engine.abandon(untold, actor="console:bo")
    assert ended.status is RunStatus.CANCELLED
    await progress.drain()
    final = outbox.of(untold)[-1]
    assert (final.kind, final.data["by"]) == ("run_cancelled", "console:bo")


async def test_an_edit_refused_while_shutting_down_is_given_up_not_retried_in_a_loop(tmp_path: Path) -> None:
    """Shutting down makes every edit due at once: a platform refusing edits then (its client
    closing) must not spin the run's worker; the run's outbox row tells its state later."""
    rig = Rig(tmp_path)
    rig.counted("first")
    engine = rig.engine(long=LONG)
    progress = ProgressReporter(store=rig.store, engine=engine, edits=Edits(interval=60.0))
    tries: list[Reply] = []

    async def closing(reply: Reply) -> None:
        tries.append(reply)
        raise NotDelivered("the client is closing")

    progress.register_outbox("console", closing)
    run = rig.run(rig.workflow(LONG))
    progress.hurry()
    await progress.on_event(EngineEvent(EventKind.NODE_STARTED, run.id, node_id="s0"))
    await asyncio.wait_for(progress.drain(), 5)  # spun forever before
    assert len(tries) == 1 and tries[0].kind == "progress"
