"""An incoming event claimed by a replica that died before finishing it is handled again.

`claim_event` inserts an unfinished claim; `finish_event` marks it done. A redelivery of an
unfinished claim older than `stale_after` is re-claimed by exactly one caller; a finished
event is a duplicate forever. On SQLite and PostgreSQL (`database_url`).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from core.store.port import Store
from core.store.repository import SqlStore
from tests.factories import create_run
from tests.integration.store.conftest import Clock, MakeRun

BARRIER_TIMEOUT = 30.0


def test_unfinished_claim_is_a_duplicate_within_the_stale_window(store: Store, clock: Clock) -> None:
    assert store.events.claim_event("slack", "Ev1", stale_after=60) is True
    clock.advance(59)
    assert store.events.claim_event("slack", "Ev1", stale_after=60) is False


def test_unfinished_claim_is_reclaimed_once_after_the_stale_window(store: Store, clock: Clock) -> None:
    assert store.events.claim_event("slack", "Ev1", stale_after=60) is True
    clock.advance(61)
    assert store.events.claim_event("slack", "Ev1", stale_after=60) is True
    # the re-claim renewed the claim's time: the next redelivery waits a full window again
    assert store.events.claim_event("slack", "Ev1", stale_after=60) is False
    clock.advance(61)
    assert store.events.claim_event("slack", "Ev1", stale_after=60) is True


def test_finished_event_is_always_a_duplicate(store: Store, clock: Clock) -> None:
    assert store.events.claim_event("slack", "Ev1", stale_after=60) is True
    store.events.finish_event("slack", "Ev1")
    clock.advance(3600)
    assert store.events.claim_event("slack", "Ev1", stale_after=60) is False
    assert store.events.claim_event("slack", "Ev1", stale_after=0) is False
    assert store.events.claim_event("discord", "Ev1", stale_after=60) is True  # per platform


def test_reclaim_on_the_real_clock_after_a_short_window(database_url: str) -> None:
    with SqlStore(database_url) as store:
        store.migrate()
        claimed_at = time.time()
        assert store.events.claim_event("console", "Ev-real", stale_after=0.05) is True
        assert store.events.claim_event("console", "Ev-real", stale_after=30) is False
        deadline = claimed_at + 0.05
        time.sleep(max(0.0, deadline - time.time()) + 0.01)  # one wait until the window is over
        assert store.events.claim_event("console", "Ev-real", stale_after=0.05) is True
        store.events.finish_event("console", "Ev-real")
        assert store.events.claim_event("console", "Ev-real", stale_after=0.0) is False


@pytest.mark.parametrize("racers", [8])
def test_one_of_several_concurrent_reclaimers_wins(database_url: str, racers: int) -> None:
    clock = Clock()
    with SqlStore(database_url, clock=clock) as first:
        first.migrate()
        assert first.events.claim_event("slack", "Ev-race", stale_after=60) is True  # then it "dies"
    clock.advance(120)
    stores = [SqlStore(database_url, clock=clock) for _ in range(racers)]
    barrier = threading.Barrier(racers)

    def reclaim(store: Store) -> bool:
        store.state.get_state("slack", "warm-up")  # open the connection before the race
        barrier.wait(BARRIER_TIMEOUT)
        return store.events.claim_event("slack", "Ev-race", stale_after=60)

    try:
        with ThreadPoolExecutor(racers) as pool:
            outcomes = list(pool.map(reclaim, stores))
    finally:
        for store in stores:
            store.close()
    assert outcomes.count(True) == 1, outcomes


def test_command_runs_finds_the_run_its_event_started(store: Store, make_run: MakeRun) -> None:
    digest = store.blobs.put_blob(b'{"message":"B"}')
    started = create_run(store, workflow="w", platform="slack", conversation="C1", thread=None,
                         requester="slack:U1", args_digest=digest, origin_event="slack:Ev7")
    make_run()  # a run without an origin event
    assert store.views.command_runs("slack:Ev7", "w", "slack", "C1") == (started, [])
    assert store.views.command_runs("discord:Ev7", "w", "slack", "C1") == (None, [])
    assert store.runs.get_run(started.id) == started


def test_a_recorded_event_left_unfinished_is_open_until_handled(store: Store, clock: Clock) -> None:
    """A message recorded with its first claim (before the platform's acknowledgement) is open
    while its handling never finished; a re-claim keeps it (the message stays), finishing it
    closes it; claims recorded without a message (older adapters, plain chatter) never are."""
    message = {"platform": "slack", "text": 'run deploy "v1"', "user": "U1", "event_id": "Ev1"}
    assert store.events.claim_event("slack", "Ev1", stale_after=60, payload=message)
    assert store.events.claim_event("slack", "Ev2", stale_after=60)  # no payload: nothing to replay
    assert not store.events.claim_event(
        "slack", "Ev1", stale_after=60, payload={"other": True}
    )  # a duplicate
    clock.advance(5)
    [open_event] = store.events.open_events(before=clock.now)
    assert (open_event.platform, open_event.event_id, open_event.payload) == ("slack", "Ev1", message)
    assert store.events.open_events(before=clock.now - 10) == []  # claimed too recently: its handler may live
    clock.advance(61)
    assert store.events.claim_event("slack", "Ev1", stale_after=60)  # a replica re-claims it
    assert [e.payload for e in store.events.open_events(before=clock.now + 1)] == [message]
    store.events.finish_event("slack", "Ev1")
    assert store.events.open_events(before=clock.now + 1) == []
