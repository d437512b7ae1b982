"""Outbox claims under the sender's heartbeat (`Deliverer`, on the in-memory store): a send
that takes long keeps its claim, a sender that went silent loses it within `claim_seconds`,
and a restarted process of the same replica releases its dead predecessor's claims at once."""

from __future__ import annotations

import asyncio
import os

from core.delivery.outbox import Deliverer
from core.engine.leases import new_owner
from core.store.memory import MemoryStore
from core.store.port import Transition
from core.store.records import Delivery, RunStatus
from tests.integration.store.conftest import run_factory


def _row(store: MemoryStore) -> str:
    run = run_factory(store)(RunStatus.RUNNING)
    with store.transaction() as tx:
        tx.transition(Transition(run.id, RunStatus.COMPLETED, actor="engine",
                                 allowed_from=[RunStatus.RUNNING]))
        tx.enqueue_delivery(run.id, "run_finished", {"status": "completed"})
    return run.id


class Chat:
    def __init__(self, *, hang: float = 0.0) -> None:
        self.hang = hang
        self.sent: list[int] = []

    async def send(self, row: Delivery) -> None:
        await asyncio.sleep(self.hang)
        self.sent.append(row.id)


def _deliverer(store: MemoryStore, chat: Chat, owner: str, claim: float = 0.3) -> Deliverer:
    return Deliverer(store.outbox, chat.send, lambda: ["slack"], owner=owner, lease_seconds=60.0,
                     claim_seconds=claim)


async def test_a_long_send_keeps_its_claim_and_a_silent_one_loses_it() -> None:
    store = MemoryStore()
    run_id = _row(store)
    slow, peer = Chat(hang=1.2), Chat()
    sending = asyncio.create_task(_deliverer(store, slow, "a:1:x").deliver_due())
    await asyncio.sleep(0.1)
    for _ in range(4):  # four times the claim's lease: renewed meanwhile, the peer gets nothing
        assert await _deliverer(store, peer, "b:2:y").deliver_due() == 0
        await asyncio.sleep(0.25)
    assert await sending == 1 and peer.sent == []
    assert store.outbox.deliveries(run_id)[0].claimed_by == "a:1:x"

    other = _row(store)
    stuck = Chat(hang=3600)
    dead = _deliverer(store, stuck, "a:1:x")
    dying = asyncio.create_task(dead.deliver_due())
    await asyncio.sleep(0.1)
    await dead.cancel()  # "a" dies mid-send (as under a kill -9): no renewal, no release
    dying.cancel()
    await asyncio.gather(dying, return_exceptions=True)
    assert store.outbox.deliveries(other)[0].claimed_by == "a:1:x"
    assert await _deliverer(store, peer, "b:2:y").deliver_due() == 0
    await asyncio.sleep(0.35)
    assert await _deliverer(store, peer, "b:2:y").deliver_due() == 1  # within the claim's lease
    [row] = store.outbox.deliveries(other)
    assert peer.sent == [row.id] and row.attempts == 2 and stuck.sent == []


async def test_a_restarted_process_takes_its_dead_predecessors_claims_at_once() -> None:
    store = MemoryStore()
    run_id = _row(store)
    # the process before the restart had our pid (a container's pid 1) or one now gone
    dead = f"web-0:{os.getpid()}:0dead0"
    store.outbox.claim_deliveries(dead, ["slack"], lease_seconds=600)
    alive = new_owner("web-0")  # a live sibling of this replica: its claims are its own
    sibling_run = _row(store)
    store.outbox.claim_deliveries(alive, ["slack"], lease_seconds=600, run_id=sibling_run)
    elsewhere = _row(store)
    store.outbox.claim_deliveries(
        f"web-01:{os.getpid()}:0dead1", ["slack"], lease_seconds=600, run_id=elsewhere
    )

    chat = Chat()
    restarted = _deliverer(store, chat, new_owner("web-0"), claim=10.0)
    assert restarted.release_dead() == 1
    assert await restarted.deliver_due() == 1
    assert store.outbox.deliveries(run_id)[0].delivered_at is not None
    assert store.outbox.deliveries(sibling_run)[0].claimed_by == alive
    assert store.outbox.deliveries(elsewhere)[0].delivered_at is None  # another replica's: its lease
