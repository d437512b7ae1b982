"""`MemoryStore` shared by threads (the engine's `asyncio.to_thread` work and its event loop):
each compare-and-swap has exactly one winner, and a unit of work is seen whole or not at all."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from core.errors import BatonError
from core.store.memory import MemoryStore
from core.store.port import Transition
from core.store.records import GateStatus, RunStatus
from tests.factories import create_run

RACERS = 8


def _race(attempt: Callable[[int], Any]) -> list[Any]:
    """Run `attempt(i)` in RACERS threads released together: "won" (or what it returned, when
    it returned something) or the name of the error it raised."""
    start = threading.Barrier(RACERS)

    def one(i: int) -> Any:
        start.wait(timeout=30)
        try:
            result = attempt(i)
        except BatonError as exc:
            return type(exc).__name__
        return "won" if result is None or not isinstance(result, bool) else result

    with ThreadPoolExecutor(RACERS) as pool:
        return list(pool.map(one, range(RACERS)))


def _run(store: MemoryStore, status: RunStatus) -> str:
    run = create_run(store, workflow="w", platform="slack", conversation="C1", thread=None,
                     requester="slack:U1", args_digest=store.blobs.put_blob(b"{}"))  # fmt: skip
    store.runs.transition(Transition(run.id, RunStatus.RUNNING, actor="engine"))
    if status is not RunStatus.RUNNING:
        store.runs.transition(Transition(run.id, status, actor="engine"))
    return run.id


def test_one_thread_resumes_a_failed_run() -> None:
    store = MemoryStore()
    run_id = _run(store, RunStatus.FAILED)
    outcomes = _race(lambda i: store.runs.transition(Transition(run_id, RunStatus.RUNNING, actor=f"t{i}")))
    assert sorted(outcomes) == ["RunNotResumable"] * (RACERS - 1) + ["won"]
    assert store.runs.get_run(run_id).version == 4


def test_one_thread_approves_and_the_losers_write_nothing() -> None:
    store = MemoryStore()
    run_id = _run(store, RunStatus.RUNNING)
    store.gates.open_gate(run_id, "review", "ship?")
    paused = store.runs.transition(Transition(run_id, RunStatus.PAUSED, actor="engine"))

    def approve(i: int) -> None:
        with store.transaction() as tx:
            tx.decide_gate(run_id, "review", approved=True, by=f"t{i}", comment=None)
            tx.transition(Transition(run_id, RunStatus.RUNNING, actor=f"t{i}",
                                     expected_version=paused.version,
                                     allowed_from=[RunStatus.PAUSED]))  # fmt: skip
            tx.audit(actor=f"t{i}", action="approve", run_id=run_id)

    outcomes = _race(approve)
    assert sorted(outcomes) == ["GateAlreadyDecided"] * (RACERS - 1) + ["won"]
    gate, run = store.gates.get_gate(run_id, "review"), store.runs.get_run(run_id)
    assert gate.status is GateStatus.APPROVED and run.status_by == gate.decided_by
    assert [e.actor for e in store.events.audit_log(run_id)] == [gate.decided_by]


def test_one_thread_claims_an_event() -> None:
    store = MemoryStore()
    outcomes = _race(lambda i: store.events.claim_event("slack", "Ev1"))
    assert outcomes.count(True) == 1 and outcomes.count(False) == RACERS - 1
