"""A chat event is not lost when the replica handling it dies, and is not acted on twice.

The "dead replica" is simulated with the real parts it would have used: `claim_event`
(and, for a `run` command, `Engine.start_run(origin_event=…)`) without `finish_event`.
The platform's redelivery of the same event then reaches the Handler. On SQLite and
PostgreSQL (`database_url` through the `chat` fixture).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.store.records import RunStatus
from tests.integration.commands.conftest import Chat, make_chat

STALE = 0.05


def _wait_out_the_window(claimed_at: float) -> None:
    """One wait on the clock until a claim made at `claimed_at` is stale (no polling)."""
    time.sleep(max(0.0, claimed_at + STALE - time.time()) + 0.01)


async def test_redelivery_within_the_window_of_a_live_claim_is_a_duplicate(chat: Chat) -> None:
    assert chat.store.events.claim_event("console", "ev-live") is True  # another replica is on it
    assert await chat.say("run gated --force live", event_id="ev-live") == []
    assert chat.runs() == []


async def test_event_of_a_dead_replica_is_handled_after_the_window(chat: Chat) -> None:
    chat.handler.event_stale_after = STALE
    claimed_at = time.time()
    assert chat.store.events.claim_event("console", "ev-dead") is True  # then the replica died
    _wait_out_the_window(claimed_at)
    [reply] = await chat.say("run gated --force rescued", event_id="ev-dead")
    assert reply.kind == "run_started" and reply.run_id is not None
    assert [run.id for run in chat.runs()] == [reply.run_id]
    await chat.final(reply.run_id)  # the run reaches its gate
    _wait_out_the_window(time.time())
    assert await chat.say("run gated --force rescued", event_id="ev-dead") == []  # finished
    assert len(chat.runs()) == 1


async def test_error_replies_finish_the_event(chat: Chat) -> None:
    chat.handler.event_stale_after = STALE
    [reply] = await chat.say("run no-such-workflow", event_id="ev-bad")
    assert reply.kind == "error"
    _wait_out_the_window(time.time())
    assert await chat.say("run no-such-workflow", event_id="ev-bad") == []


async def test_redelivered_run_command_answers_with_the_run_its_first_delivery_started(chat: Chat) -> None:
    chat.handler.event_stale_after = STALE
    claimed_at = time.time()
    assert chat.store.events.claim_event("console", "ev-run") is True
    first = await chat.engine.start_run(
        workflow="gated", args={"message": "once"}, platform="console", conversation="c1",
        thread=None, requester="console:ana", origin_event="console:ev-run",
    )  # ... and the replica died before replying or finishing the event
    _wait_out_the_window(claimed_at)
    [reply] = await chat.say("run gated --force once", event_id="ev-run")
    assert (reply.kind, reply.run_id) == ("run_started", first.id)
    assert reply.data["preview"] and "once" in reply.data["preview"]
    assert [run.id for run in chat.runs()] == [first.id]
    rested = await chat.rest(first.id)
    assert rested.status is RunStatus.PAUSED  # waiting at its approval gate, once
    assert chat.store.gates.get_gate(first.id, "review").status == "waiting"
    assert chat.store.events.claim_event("console", "ev-run", stale_after=0.0) is False  # now finished


WINDOW = 1.0  # BATON_EVENT_STALE_SECONDS of the replica that gets the redelivery


@pytest.fixture
async def windowed(tmp_path: Path, database_url: str) -> AsyncIterator[Chat]:
    """A Handler built with a short redelivery window, as `build_baton` passes the setting."""
    c = await make_chat(tmp_path, database_url, event_stale_after=WINDOW)
    yield c
    await c.engine.stop(grace=5)
    await c.handler.drain()
    c.store.close()


async def test_an_unfinished_claim_is_handled_again_after_the_window_and_not_before(windowed: Chat) -> None:
    before = time.time()
    assert windowed.store.events.claim_event("console", "ev-window") is True  # then the replica died
    claimed_at = time.time()  # the claim's time is between `before` and this

    assert await windowed.say("run gated --force late", event_id="ev-window") == []  # too soon
    assert time.time() - before < WINDOW, "the machine stalled: the first redelivery was not early"
    assert windowed.runs() == []

    # the window passes, counted from the claim: the refused re-claim did not extend it
    await asyncio.sleep(claimed_at + WINDOW - time.time())
    [reply] = await windowed.say("run gated --force late", event_id="ev-window")
    assert reply.kind == "run_started" and reply.run_id is not None
    assert (await windowed.final(reply.run_id)).kind == "gate_waiting"  # it really ran
    assert [run.id for run in windowed.runs()] == [reply.run_id]
    assert windowed.store.events.claim_event("console", "ev-window", stale_after=0.0) is False  # finished
