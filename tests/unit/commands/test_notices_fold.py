"""A stream of notices on `MemoryStore` (no I/O): the first is sent, the next ones within the
window folded into one digest per window, each step idempotent, so a notice delivered again
(a crash before its row was settled) is sent, or folded, once; a digest tells its window's
notices once."""

from __future__ import annotations

import gc
from typing import Any

from core.commands.messages import Reply
from core.commands.notices import DIGEST, NOTICE, Notices
from core.commands.offers import GateOffers
from core.config import Access
from core.store.memory import MemoryStore
from core.store.port import Transition
from core.store.records import Delivery, RunStatus
from tests.factories import create_run


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _rows(store: MemoryStore, kind: str) -> list[Delivery]:
    return [r for r in store.outbox.undelivered(1000) if r.kind == kind]


async def test_a_stream_is_one_notice_then_one_digest_per_window_and_redelivery_changes_nothing() -> None:
    clock, store, sent = Clock(), MemoryStore(), []
    outboxes: dict[str, Any] = {}

    async def slack(reply: Reply) -> None:
        sent.append(reply)

    outboxes["slack"] = slack
    notices = Notices(store=store, engine=None, access=Access.everyone(),  # type: ignore[arg-type]
                      offers=GateOffers(store, outboxes.get, outboxes.keys), outbox_of=outboxes.get,
                      window=600, clock=clock)
    runs = [create_run(store, workflow="deploy", platform="discord", conversation=f"11300011122233344{n}",
                       thread=None, requester="discord:7", args_digest="d", status=RunStatus.RUNNING)
            for n in range(4)]
    with store.transaction() as tx:
        for run in runs:
            tx.transition(Transition(run.id, RunStatus.COMPLETED, actor="baton",
                                     allowed_from=[RunStatus.RUNNING]))
            tx.enqueue_notice(run.id, NOTICE, platform="slack", conversation="C0OPS", dedupe=f"n:{run.id}",
                              payload={"event": "completed", "node": None, "by": None, "window": 600})
    first, second, third, late = _rows(store, NOTICE)

    await notices.deliver(first)
    await notices.deliver(first)  # delivered again: sent again under its key (the platform dedupes)
    assert [r.kind for r in sent] == [NOTICE, NOTICE]
    assert [r.how.once and r.how.once.key for r in sent] == [first.key] * 2
    clock.now += 10
    await notices.deliver(second)
    await notices.deliver(second)  # folded once
    clock.now += 10
    await notices.deliver(third)
    assert len(sent) == 2
    [digest] = _rows(store, DIGEST)
    assert digest.due_at == 1_000_600.0 and digest.payload["due"] == "1000600.000"

    clock.now += 600  # quiet for a window: the next one is sent
    await notices.deliver(late)
    assert len(sent) == 3 and sent[-1].data["run_id"] == late.run_id

    await notices.deliver_digest(digest)
    await notices.deliver_digest(digest)  # its window was told: nothing again
    [told] = [r for r in sent if r.kind == DIGEST]
    assert told.data["count"] == 2 and told.data["runs"] == [second.run_id, third.run_id]
    assert told.to.conversation == "C0OPS" and told.how.once is not None and told.how.once.key == digest.key


async def test_a_streams_lock_is_kept_while_held_and_dropped_once_idle() -> None:
    store, outboxes = MemoryStore(), {}
    notices = Notices(store=store, engine=None, access=Access.everyone(),  # type: ignore[arg-type]
                      offers=GateOffers(store, outboxes.get, outboxes.keys), outbox_of=outboxes.get)
    async with notices._lock("slack", "notify:C0OPS:deploy"):
        gc.collect()
        # in use: the same lock, never a second one that would let two deliveries interleave
        assert notices._lock("slack", "notify:C0OPS:deploy").locked()
    for n in range(1000):
        async with notices._lock("slack", f"notify:C{n}:deploy"):
            pass
    gc.collect()
    assert len(notices._locks) == 0  # idle streams keep no lock: the map stays bounded
