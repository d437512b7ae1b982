"""The durable outbox through the real wiring (`build_baton`, on SQLite and PostgreSQL): a
run's completion is written with its state change and delivered through the platform's
confirming sender; a refused reply is retried after a backoff; a reply a process left behind
(its claim lapsed) is delivered by another; a stopping process flushes it within its grace."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import tenacity

from bot.app import Baton, build_baton
from core.commands.messages import Reply
from core.config import Settings
from core.delivery.edits import NotDelivered, urgent
from core.delivery.envelope import Once
from core.delivery.outbox import backoff
from core.store.records import RunStatus

HELLO = """
name: hello
nodes:
  - id: say
    bash: echo hello
    replay: pure
"""
SLOW = """
name: slow
nodes:
  - id: wait
    bash: sleep 1; echo slept
    replay: pure
"""


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    (workflows / "hello.yaml").write_text(HELLO)
    (workflows / "slow.yaml").write_text(SLOW)
    return Settings(
        database_url=database_url, workflow_dirs=[workflows], data_dir=tmp_path / "data", tool_modules=[],
        outbox_poll_seconds=0.05, outbox_lease_seconds=1.0,
    )


class Platform:
    """A chat platform: its outbox (`confirm`) takes a reply unless told to refuse (or hang on)
    the next ones."""

    def __init__(self) -> None:
        self.taken: list[Reply] = []
        self.refuse = 0
        self.hang = False
        self.changed = asyncio.Event()

    async def confirm(self, reply: Reply) -> None:
        if self.hang and urgent(reply):
            await asyncio.Event().wait()
        if self.refuse and urgent(reply):  # state-carrying: the progress of a run still moving passes
            self.refuse -= 1
            raise NotDelivered("503 from the platform")
        self.taken.append(reply)
        self.changed.set()

    def finals(self, run_id: str) -> list[Reply]:
        return [r for r in self.taken if r.run_id == run_id and r.kind != "progress"]

    async def wait(self, ready: Callable[[], object], timeout: float = 15) -> None:
        async with asyncio.timeout(timeout):
            while not ready():
                self.changed.clear()
                await self.changed.wait()


def _baton(settings: Settings, platform: Platform) -> Baton:
    baton = build_baton(settings)
    baton.handler.register_outbox("chat", platform.confirm)
    return baton


async def _start(baton: Baton, workflow: str = "hello") -> str:
    run = await baton.engine.start_run(workflow=workflow, args={}, platform="chat", conversation="C1",
                                       thread=None, requester="chat:U1")
    return run.id


async def _settled(baton: Baton, run_id: str) -> None:
    await baton.engine.wait(run_id, timeout=30)


async def test_a_completion_is_written_with_its_state_and_delivered_once(settings: Settings) -> None:
    platform = Platform()
    baton = _baton(settings, platform)
    try:
        async with baton.running(grace=1.0, handle_signals=False):
            run_id = await _start(baton)
            await platform.wait(lambda: platform.finals(run_id))
            await baton.handler.drain()
            [row] = baton.store.outbox.deliveries(run_id)
            assert row.payload["status"] == "completed" and row.delivered_at is not None
            assert row.attempts == 1 and row.claimed_by == baton.engine.owner
            [final] = platform.finals(run_id)
            assert final.kind == "run_completed"
            # a first attempt: the platform posts it directly, keyed by its row
            assert final.how.once == Once(f"outbox:{row.id}", None)
            progress = [r for r in platform.taken if r.run_id == run_id and r.kind == "progress"]
            assert progress[-1].run_status == "completed"  # the final edit, before the final reply
            assert platform.taken.index(progress[-1]) < platform.taken.index(final)
    finally:
        baton.close()


async def test_a_refused_reply_is_retried_after_a_backoff(settings: Settings) -> None:
    platform = Platform()
    platform.refuse = 2
    baton = _baton(settings, platform)
    baton.handler.progress.deliverer.wait = tenacity.wait_fixed(0.3)
    try:
        async with baton.running(grace=1.0, handle_signals=False):
            began = time.monotonic()
            run_id = await _start(baton)
            await platform.wait(lambda: platform.finals(run_id))
            took = time.monotonic() - began
            [row] = baton.store.outbox.deliveries(run_id)
            assert row.delivered_at is not None and row.attempts == 3
            assert row.last_error == "NotDelivered: 503 from the platform"
            assert took >= 0.6  # two waits of the backoff
            assert len(platform.finals(run_id)) == 1
    finally:
        baton.close()


def test_the_backoff_grows_exponentially_with_jitter_up_to_its_cap() -> None:
    waits = [backoff(n) for n in range(1, 12)]
    assert 1 <= waits[0] <= 2 and 2 <= waits[1] <= 3 and 4 <= waits[2] <= 5
    assert all(w <= 300 for w in waits) and waits[-1] >= 250


async def test_a_reply_left_by_a_process_that_stopped_answering_is_delivered_by_another(
    settings: Settings,
) -> None:
    stuck, healthy = Platform(), Platform()
    stuck.hang = True
    # a lease long enough that the hanging send (cut at 0.8 of it) still holds its claim when
    # the first goes silent, on a loaded machine too (1 s was cut before: a CI run saw it)
    settings = settings.model_copy(update={"outbox_lease_seconds": 3.0})
    first = _baton(settings, stuck)
    second = _baton(settings, healthy)
    try:
        async with first.running(grace=1.0, handle_signals=False):
            run_id = await _start(first)
            await _settled(first, run_id)
            await asyncio.sleep(0.2)  # the first claimed the row and hangs on the platform
            [row] = first.store.outbox.deliveries(run_id)
            assert row.claimed_by == first.engine.owner and row.delivered_at is None
            assert first.outbox is not None
            await first.outbox.stop()  # the first goes silent holding its claim (as if killed)
            assert first.store.outbox.deliveries(run_id)[0].claimed_by == first.engine.owner
            async with second.running(grace=1.0, handle_signals=False):
                await healthy.wait(lambda: healthy.finals(run_id))  # after the first's claim lapsed
                [row] = second.store.outbox.deliveries(run_id)
                assert row.delivered_at is not None and row.attempts == 2
                assert row.claimed_by == second.engine.owner
                [final] = healthy.finals(run_id)
                assert final.kind == "run_completed" and not stuck.finals(run_id)
                # claimed before: the platform is told it may hold the reply already, since when
                assert final.how.once == Once(f"outbox:{row.id}", row.created_at)
    finally:
        first.close()
        second.close()


async def test_a_stopping_process_sends_the_replies_of_runs_that_finish_in_its_grace(
    settings: Settings,
) -> None:
    platform = Platform()
    baton = _baton(settings, platform)
    sent: list[int] = []
    try:
        async with baton.running(grace=10.0, handle_signals=False):
            run_id = await _start(baton, "slow")
            baton.request_stop()  # SIGTERM while the step runs
            await baton.settle()
            sent.append(len(platform.finals(run_id)))  # before the process goes on to exit
        assert baton.store.runs.get_run(run_id).status is RunStatus.COMPLETED
        assert sent == [1] and baton.store.outbox.undelivered() == []
    finally:
        baton.close()


async def test_what_a_stopping_process_cannot_send_is_left_for_the_next(settings: Settings) -> None:
    stuck, healthy = Platform(), Platform()
    stuck.refuse = 1000
    first = _baton(settings, stuck)
    try:
        async with first.running(grace=0.5, handle_signals=False):
            run_id = await _start(first)
            await _settled(first, run_id)
        [row] = first.store.outbox.undelivered()
        assert row.run_id == run_id and row.claimed_by is None  # released: the next takes it at once
    finally:
        first.close()
    second = _baton(settings, healthy)
    try:
        async with second.running(grace=1.0, handle_signals=False):
            await healthy.wait(lambda: healthy.finals(run_id), timeout=30)
    finally:
        second.close()



TWO_SLOW = """
name: twoslow
nodes:
  - id: first
    bash: sleep 1; echo one
    replay: pure
  - id: second
    depends_on: [first]
    bash: sleep 1; echo two
    replay: pure
"""


async def test_a_running_runs_elapsed_time_advances_on_its_progress_edits(settings: Settings) -> None:
    (settings.workflow_dirs[0] / "twoslow.yaml").write_text(TWO_SLOW)
    platform = Platform()
    baton = _baton(settings, platform)
    try:
        async with baton.running(grace=1.0, handle_signals=False):
            run_id = await _start(baton, "twoslow")
            await platform.wait(lambda: platform.finals(run_id))
            running = [r.data["seconds"] for r in platform.taken
                       if r.run_id == run_id and r.kind == "progress" and r.run_status == "running"]
            assert running and max(running) >= 0.9, running  # the edit as `second` starts: 1 s in
    finally:
        baton.close()


async def test_a_platform_that_connects_gets_what_waited_for_it_at_once(settings: Settings) -> None:
    """A run that finished while its platform was not connected: its rows wait; the platform
    connecting wakes the outbox loop (whose next pass is ten minutes away here)."""
    settings = settings.model_copy(update={"outbox_poll_seconds": 600.0})
    platform = Platform()
    baton = build_baton(settings)
    assert baton.handler.progress.deliverer.lease_seconds == settings.outbox_lease_seconds == 1.0
    try:
        async with baton.running(grace=1.0, handle_signals=False):
            run_id = await _start(baton)
            await _settled(baton, run_id)
            await baton.handler.drain()
            [row] = baton.store.outbox.deliveries(run_id)
            assert row.delivered_at is None  # nowhere to send it yet
            began = time.monotonic()
            baton.handler.register_outbox("chat", platform.confirm)
            await platform.wait(lambda: platform.finals(run_id), timeout=10)
            assert time.monotonic() - began < 10
            [final] = platform.finals(run_id)
            assert final.kind == "run_completed"
    finally:
        baton.close()
