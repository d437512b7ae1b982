"""The progress reporter forgets runs: a run that comes to rest drops its rate-limit entry at
once, and one that never comes to rest here (another replica took it over: no final event
in this process) is dropped by a later progress edit, so the map does not grow for the life
of the process. A cancellation a command announced is forgotten when the engine emits it,
whether or not anything reports it."""

from __future__ import annotations

import asyncio

from core.delivery.edits import PRUNE_EVERY
from core.store.records import RunStatus
from tests.integration.commands.conftest import FINAL_KINDS, Chat

INTERVAL = 0.005  # a prune is due every PRUNE_EVERY * INTERVAL = 0.1 s

WORKFLOWS = {
    "stuck": "name: stuck\nnodes:\n  - id: hold\n    tool: hold\n    replay: pure\n",
    "slow": (
        "name: slow\nnodes:\n  - id: pause\n    tool: pause\n    replay: pure\n"
        "  - id: after\n    tool: pause\n    replay: pure\n    depends_on: [pause]\n"
    ),
}


async def progress_of(chat: Chat, run_id: str) -> None:
    """Wait (with a deadline) until a progress edit of `run_id` was handed to the outbox."""

    async def until() -> None:
        while not any(r.run_id == run_id and r.kind == "progress" for r in chat.outbox):
            chat._arrived.clear()
            await chat._arrived.wait()

    await asyncio.wait_for(until(), 30)


async def test_a_run_taken_over_elsewhere_is_forgotten_by_a_later_edit(chat: Chat) -> None:
    progress = chat.handler.progress
    progress.interval = INTERVAL
    released = asyncio.Event()

    @chat.engine.tools.tool("hold", replay="pure")
    async def hold() -> str:
        await released.wait()  # until the engine cancels it
        return "never"

    @chat.engine.tools.tool("pause", replay="pure")
    async def pause() -> str:
        await asyncio.sleep(2 * PRUNE_EVERY * INTERVAL)  # a step's duration: edits come after it
        return "ok"

    for name, text in WORKFLOWS.items():
        (chat.root / "workflows" / f"{name}.yaml").write_text(text)

    taken = []
    for _ in range(3):
        [started] = await chat.say("run stuck")
        assert started.run_id is not None
        await progress_of(chat, started.run_id)
        taken.append(started.run_id)

    for run_id in taken:  # another replica takes each run over; this one stops executing it
        chat.store.leases.take_over(chat.store.runs.get_run(run_id), "other:1:peer", 60)
    assert sorted(await chat.engine.heartbeat_now()) == sorted(taken)
    await chat.handler.drain()  # no final event for them here: nothing pops their entries

    [later] = await chat.say("run slow")
    final = await chat.final(later.run_id or "")
    assert final.kind == "run_completed"
    assert progress.edits.paced == {}  # the taken runs by its edits, its own when it came to rest


async def test_the_map_stays_bounded_by_the_runs_edited_recently(chat: Chat) -> None:
    progress = chat.handler.progress
    progress.interval = INTERVAL
    start = progress.edits._pruned_at
    for i in range(2_000):  # one edit each for 2,000 runs, a quarter interval apart
        progress.edits.edited(f"r{i}", start + i * INTERVAL / 4)
        assert len(progress.edits.paced) <= 4 * (PRUNE_EVERY + 1) + 1
    newest = start + 1999 * INTERVAL / 4
    assert all(at > newest - (PRUNE_EVERY + 1) * INTERVAL for at in progress.edits.paced.values())


async def test_a_cancellation_its_command_told_is_not_told_again_and_is_forgotten(chat: Chat) -> None:
    progress = chat.handler.progress
    [started] = await chat.say("run gated v1")
    run_id = started.run_id or ""
    assert (await chat.final(run_id)).kind == "gate_waiting"

    [told] = await chat.say(f"abandon {run_id}")
    await chat.handler.drain()

    assert told.kind == "run_cancelled"
    finals = [r for r in chat.outbox if r.run_id == run_id and r.kind in FINAL_KINDS]
    [withdrawn] = [r for r in finals if r.how.edit_only]  # the gate message loses its buttons
    assert withdrawn.kind == "gate_waiting" and withdrawn.buttons == ()
    assert [r for r in finals if not r.how.edit_only] == []
    assert progress.announced == set()


async def test_a_cancellation_nothing_reports_here_is_forgotten_too(chat: Chat) -> None:
    """A run of a platform this process has no outbox for: its report stops before the final
    reply, so the run id must not wait there to be taken out (it would stay for good)."""
    progress = chat.handler.progress
    chat.platform = "discord"  # only the console's outbox is registered here
    paused = []
    for n in range(3):
        [started] = await chat.say(f"run gated --force v{n}")
        assert started.run_id is not None
        assert (await chat.rest(started.run_id)).status is RunStatus.PAUSED
        paused.append(started.run_id)

    for run_id in paused:
        [told] = await chat.say(f"abandon {run_id}")
        assert told.kind == "run_cancelled"
    await chat.handler.drain()

    assert progress.announced == set()
    assert chat.outbox == []  # nothing went to another platform's outbox
