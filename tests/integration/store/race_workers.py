"""The body of each racing process in `test_concurrency.py` (importable under spawn).

Every worker opens its own `SqlStore` on the shared URL, then, in step with the others
(a barrier before each race): migrates the fresh database, tries to resume the same
failed run, claims the same incoming event id, decides the same approval gate, and
approves the gate of a paused run (gate, run and audit row as one change).
It reports one outcome per race: ("won", detail) or ("lost", error type, status, by).
"""

from __future__ import annotations

from typing import Any

from core.errors import GateAlreadyDecided, RunNotResumable
from core.store.port import Transition
from core.store.records import RunStatus
from core.store.repository import SqlStore
from tests.factories import decide_gate

BARRIER_TIMEOUT = 240.0  # as the parent waits: spawning eight interpreters on a loaded machine is slow


def race(worker: int, url: str, barrier: Any, setup: Any, results: Any) -> None:
    outcome: dict[str, Any] = {"worker": worker}
    store = SqlStore(url)
    try:
        barrier.wait(BARRIER_TIMEOUT)  # 1: everyone started and imported
        store.migrate()
        outcome["migrate"] = ("won", None)
        barrier.wait(BARRIER_TIMEOUT)  # 2: schema ready; the parent creates the run and gate
        failed_run, gated_run, paused_run = setup.get(timeout=BARRIER_TIMEOUT)
        store.runs.get_run(failed_run)  # warm the connection so the race is tight
        store.steps.journal([failed_run])  # and the hot path's imports

        barrier.wait(BARRIER_TIMEOUT)  # 3: resume race
        try:
            run = store.runs.transition(Transition(failed_run, RunStatus.RUNNING, actor=f"worker:{worker}"))
            outcome["resume"] = ("won", run.status.value, run.status_by)
        except RunNotResumable as exc:
            outcome["resume"] = ("lost", type(exc).__name__, exc.status, exc.by)

        barrier.wait(BARRIER_TIMEOUT)  # 4: dedupe race
        outcome["claim"] = ("won",) if store.events.claim_event("slack", "Ev-race") else ("lost",)

        barrier.wait(BARRIER_TIMEOUT)  # 5: approval race
        try:
            gate = decide_gate(store, gated_run, "review", approved=True, by=f"worker:{worker}", comment=None)
            outcome["decide"] = ("won", gate.status.value, gate.decided_by)
        except GateAlreadyDecided as exc:
            outcome["decide"] = ("lost", type(exc).__name__, exc.decision, exc.by)

        paused = store.runs.get_run(paused_run)
        barrier.wait(BARRIER_TIMEOUT)  # 6: approve race (gate CAS + run CAS + audit)
        try:
            with store.transaction() as tx:
                tx.decide_gate(paused.id, "ok", approved=True, by=f"worker:{worker}", comment=None)
                resumed = tx.transition(Transition(
                    paused.id, RunStatus.RUNNING, actor=f"worker:{worker}", expected_version=paused.version,
                    allowed_from=[RunStatus.PAUSED], lease_owner=f"worker:{worker}", lease_seconds=60,
                ))
                tx.audit(actor=f"worker:{worker}", action="approve", run_id=paused.id, details={"node": "ok"})
            run = resumed.value
            outcome["approve"] = ("won", run.status.value, run.status_by)
        except GateAlreadyDecided as exc:
            outcome["approve"] = ("lost", type(exc).__name__, exc.decision, exc.by)
        except RunNotResumable as exc:
            outcome["approve"] = ("lost", type(exc).__name__, exc.status, exc.by)
    except Exception as exc:  # reported, never swallowed: the parent asserts on it
        outcome["error"] = f"{type(exc).__name__}: {exc}"
        barrier.abort()  # the others stop waiting at once; the first error names the cause
    finally:
        store.close()
        results.put(outcome)
