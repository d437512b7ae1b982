"""Run threads on platforms where the adapter opens one per run (`register_outbox(threads=True)`):
no background reply of a run leaves before its thread is attached, and none waits forever."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.store.records import RunStatus
from tests.integration.commands.conftest import Chat, make_chat


@pytest.fixture
async def threaded(tmp_path: Path, sqlite_url: str) -> AsyncIterator[Chat]:
    c = await make_chat(tmp_path, sqlite_url, platform="slack")
    c.handler.register_outbox("slack", c._collect, threads=True)
    yield c
    await c.engine.stop(grace=5)
    await c.handler.drain()
    c.store.close()


async def test_background_replies_wait_for_the_thread_then_go_there(threaded: Chat) -> None:
    threaded.handler.progress.thread_wait = 60.0  # far beyond the test: only attach releases them
    [started] = await threaded.say("run gated --force x")
    assert started.how.starts_thread and started.run_id and started.to.thread is None
    run = await threaded.engine.wait(started.run_id, timeout=30)
    assert run.status is RunStatus.PAUSED
    assert [r for r in threaded.outbox if r.run_id == run.id] == []  # held: no thread yet

    await threaded.handler.attach_thread(run.id, "T-root")

    waiting = await threaded.final(run.id)
    assert waiting.kind == "gate_waiting" and waiting.to.thread == "T-root"
    assert {r.to.thread for r in threaded.outbox if r.run_id == run.id} == {"T-root"}  # progress too


async def test_a_run_started_inside_a_thread_does_not_wait(threaded: Chat) -> None:
    threaded.handler.progress.thread_wait = 60.0
    [started] = await threaded.say("run gated --force y", thread="T-given")
    assert started.run_id is not None
    waiting = await threaded.final(started.run_id)  # nobody attaches: it must not be held
    assert waiting.to.thread == "T-given"


async def test_no_thread_possible_releases_the_replies_at_once(threaded: Chat) -> None:
    threaded.handler.progress.thread_wait = 60.0
    [started] = await threaded.say("run gated --force z")
    assert started.run_id is not None
    await threaded.handler.attach_thread(started.run_id, None)  # e.g. a DM: posted, no thread

    waiting = await threaded.final(started.run_id)
    assert waiting.to.thread is None and waiting.to.conversation == "c1"
    assert threaded.store.runs.get_run(started.run_id).thread is None


async def test_a_thread_never_attached_delays_the_replies_only_until_the_deadline(threaded: Chat) -> None:
    threaded.handler.progress.thread_wait = 0.3
    [started] = await threaded.say("run gated --force w")
    assert started.run_id is not None
    waiting = await threaded.final(started.run_id, timeout=10)  # the adapter never attaches
    assert waiting.kind == "gate_waiting" and waiting.to.thread is None
    [again] = await threaded.say(f"approve {started.run_id}")
    assert again.kind == "gate_decided"
    done = await threaded.final(started.run_id, timeout=10)  # no second wait for the same run
    assert done.kind == "run_completed"
