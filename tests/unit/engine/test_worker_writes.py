"""A worker's store writes run in a thread (`node_worker._off_loop`): the job slots' round
trips overlap, and a job stopped during a write still waits for it, so that what the write
did (a claim, a result) is known before the job stops, as when it ran on the event loop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from core.engine.distributed.node_worker import _off_loop


async def test_writes_of_several_jobs_overlap() -> None:
    both_in = threading.Barrier(2, timeout=5)

    def write(n: int) -> int:
        both_in.wait()  # returns only when the other write is in progress too
        return n

    assert await asyncio.gather(_off_loop(write, 1), _off_loop(write, 2)) == [1, 2]


async def test_a_job_stopped_during_a_write_waits_for_it_then_stops() -> None:
    entered, release = threading.Event(), threading.Event()
    finished: list[str] = []

    def claim(entry_id: int) -> bool:
        entered.set()
        release.wait(5)
        finished.append(f"claimed {entry_id}")
        return True

    job = asyncio.create_task(_off_loop(claim, 7))
    await asyncio.to_thread(entered.wait, 5)
    job.cancel()
    await asyncio.sleep(0.05)
    assert not job.done()  # still waiting for the write it started

    release.set()
    with pytest.raises(asyncio.CancelledError):
        await job
    assert finished == ["claimed 7"]
