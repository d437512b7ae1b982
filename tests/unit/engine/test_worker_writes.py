"""A worker's journal writes (`node_worker._to_end`) run on its event loop: the job slots'
round trips overlap, and a job stopped during a write still waits for it, so that what the
write did (a claim, a result) is known before the job stops."""

from __future__ import annotations

import asyncio

import pytest

from core.engine.distributed.node_worker import _to_end


async def test_writes_of_several_jobs_overlap() -> None:
    arrived = 0
    both_in = asyncio.Event()

    async def write(n: int) -> int:
        nonlocal arrived
        arrived += 1
        if arrived == 2:
            both_in.set()
        await asyncio.wait_for(both_in.wait(), 5)  # returns only when the other write is in progress too
        return n

    assert await asyncio.gather(_to_end(write(1)), _to_end(write(2))) == [1, 2]


async def test_a_job_stopped_during_a_write_waits_for_it_then_stops() -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    finished: list[str] = []

    async def claim(entry_id: int) -> bool:
        entered.set()
        await asyncio.wait_for(release.wait(), 5)
        finished.append(f"claimed {entry_id}")
        return True

    job = asyncio.create_task(_to_end(claim(7)))
    await asyncio.wait_for(entered.wait(), 5)
    job.cancel()
    await asyncio.sleep(0.05)
    assert not job.done()  # still waiting for the write it started

    release.set()
    with pytest.raises(asyncio.CancelledError):
        await job
    assert finished == ["claimed 7"]
