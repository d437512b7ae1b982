"""`Periodic`, the loop under the bot's periodic services: a tick at once, one after each pause,
`wake()` cuts a pause short, a failing tick never ends the loop, `stop` lets a tick finish."""

from __future__ import annotations

import asyncio

import pytest

from bot.periodic import Periodic


async def test_it_ticks_at_once_and_then_after_each_pause() -> None:
    seen: list[int] = []

    async def tick() -> None:
        seen.append(len(seen))

    loop = Periodic("test-periodic", tick, pause=0.001)
    await loop.start()
    await loop.wait_until(lambda: loop.ticks >= 3, timeout=10)
    await loop.stop()
    assert seen[:3] == [0, 1, 2] and loop.ticks == len(seen)


async def test_a_wake_ends_a_long_pause_and_stop_ends_it_too() -> None:
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        ticks += 1

    loop = Periodic("test-periodic", tick, pause=lambda: 3600.0)
    await loop.start()
    await loop.wait_until(lambda: loop.ticks >= 1, timeout=10)
    loop.wake()  # an hour's pause, cut short
    await loop.wait_until(lambda: loop.ticks >= 2, timeout=10)
    await asyncio.wait_for(loop.stop(), timeout=10)  # does not wait out the pause
    assert ticks == 2


async def test_a_failing_tick_is_logged_and_the_next_one_runs(caplog: pytest.LogCaptureFixture) -> None:
    calls = 0

    async def tick() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("database blinked")

    loop = Periodic("test-periodic", tick, pause=0.001, action="test_failed")
    await loop.start()
    await loop.wait_until(lambda: calls >= 2, timeout=10)
    await loop.stop()
    (failed,) = [r for r in caplog.records if getattr(r, "action", None) == "test_failed"]
    assert "database blinked" in (failed.exc_text or str(failed.exc_info))


async def test_stop_lets_the_tick_in_progress_finish() -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    finished: list[bool] = []

    async def tick() -> None:
        entered.set()
        await release.wait()
        finished.append(True)

    loop = Periodic("test-periodic", tick, pause=3600.0)
    await loop.start()
    await asyncio.wait_for(entered.wait(), timeout=10)
    stopping = asyncio.create_task(loop.stop())
    await asyncio.sleep(0)
    assert not stopping.done()
    release.set()
    await asyncio.wait_for(stopping, timeout=10)
    assert finished == [True] and loop.ticks == 1


async def test_stop_with_a_wait_cancels_a_tick_that_hangs() -> None:
    """The outbox's pass may hang on a platform that never answers: stopping gives it `wait`
    seconds, then cancels it."""
    began = asyncio.Event()
    cancelled = asyncio.Event()

    async def tick() -> None:
        began.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    loop = Periodic("test-periodic", tick, pause=3600)
    await loop.start()
    await asyncio.wait_for(began.wait(), 10)
    await asyncio.wait_for(loop.stop(wait=0.05), 10)
    assert cancelled.is_set()


async def test_an_event_set_by_others_brings_the_next_tick_forward() -> None:
    """The outbox loop's wake is the deliverer's nudge (a platform connected)."""
    nudged = asyncio.Event()
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        ticks += 1

    loop = Periodic("test-periodic", tick, pause=3600, wake=nudged)
    await loop.start()
    await loop.wait_until(lambda: ticks == 1, timeout=10)
    nudged.set()
    await loop.wait_until(lambda: ticks == 2, timeout=10)
    await loop.stop()
