"""`GateKeeper` on `MemoryStore`: which gate a run means, the refusals (with their data), and
approve and reject each as one unit of work (a lost CAS leaves nothing behind)."""

from __future__ import annotations

import itertools

import pytest

from core.engine.gates import Decision, GateKeeper, answers
from core.engine.journal_index import MARKER_KEY, REJECTED_MARKER
from core.errors import GateAlreadyDecided, Next, RunNotResumable
from core.store.memory import MemoryStore
from core.store.port import Transition
from core.store.records import GateStatus, NodeStatus, Run, RunStatus
from tests.factories import create_run, decide_gate


@pytest.fixture
def store() -> MemoryStore:
    ticks = itertools.count(1000)
    return MemoryStore(clock=lambda: float(next(ticks)))


def _paused(store: MemoryStore, *nodes: str) -> Run:
    run = create_run(store, workflow="ship", platform="console", conversation="c1", thread=None,
                     requester="console:ana", args_digest=store.blobs.put_blob(b"{}"),
                     status=RunStatus.RUNNING, lease_owner="me")  # fmt: skip
    for node in nodes:
        store.gates.open_gate(run.id, node, f"{node} ok?", f"key-{node}")
    return store.runs.transition(Transition(run.id, RunStatus.PAUSED, actor="baton", reason="waiting"))


def test_the_gate_meant_is_the_one_asked_first_and_only_while_the_run_is_paused(store: MemoryStore) -> None:
    gates = GateKeeper(store)
    run = _paused(store, "legal", "security")
    assert gates.waiting(run).node_id == "legal"  # type: ignore[union-attr]
    assert gates.to_decide(run).node_id == "legal"
    running = store.runs.transition(Transition(run.id, RunStatus.RUNNING, actor="console:bo",
                                               allowed_from=[RunStatus.PAUSED]))
    assert gates.waiting(running) is None  # gates still wait in the store; a running run asks nothing
    with pytest.raises(RunNotResumable) as refused:
        gates.to_decide(running)
    assert (refused.value.run_id, refused.value.status, refused.value.next_step) == (
        run.id, "running", Next.SEE,
    )  # fmt: skip


def test_a_gate_the_caller_read_is_used_only_while_it_waits_in_that_run(store: MemoryStore) -> None:
    gates = GateKeeper(store)
    run = _paused(store, "legal", "security")
    other = _paused(store, "elsewhere")
    security = store.gates.get_gate(run.id, "security")
    assert gates.to_decide(run, security) is security  # waiting as read: no second read
    decided = decide_gate(store, run.id, "security", approved=True, by="console:bo")
    assert gates.to_decide(run, decided).node_id == "legal"  # a decided one: the one waiting now
    assert gates.to_decide(run, store.gates.get_gate(other.id, "elsewhere")).node_id == "legal"


def test_nothing_to_decide_says_who_decided_last(store: MemoryStore) -> None:
    gates = GateKeeper(store)
    run = _paused(store, "legal")
    decide_gate(store, run.id, "legal", approved=False, by="console:bo")
    with pytest.raises(GateAlreadyDecided) as refused:
        gates.to_decide(run)
    error = refused.value
    assert (error.run_id, error.node_id, error.decision, error.by, error.status, error.next_step) == (
        run.id, "legal", "rejected", "console:bo", "paused", Next.DECIDED,
    )  # fmt: skip
    assert "/workflow" not in error.message + error.hint  # words are the commands layer's


def test_a_run_that_never_asked_is_refused_with_what_is_allowed_next(store: MemoryStore) -> None:
    gates = GateKeeper(store)
    run = create_run(store, workflow="ship", platform="console", conversation="c1", thread=None,
                     requester="console:ana", args_digest=store.blobs.put_blob(
                         b"{}"
                     ), status=RunStatus.RUNNING)
    failed = store.runs.transition(Transition(run.id, RunStatus.FAILED, actor="baton", reason="boom"))
    with pytest.raises(RunNotResumable) as unfinished:
        gates.to_decide(failed)
    assert unfinished.value.next_step is Next.RESUME
    done = store.runs.transition(Transition(run.id, RunStatus.CANCELLED, actor="console:bo"))
    with pytest.raises(RunNotResumable) as finished:
        gates.to_decide(done)
    assert (finished.value.status, finished.value.next_step) == ("cancelled", Next.SEE)


def test_approve_is_one_change(store: MemoryStore) -> None:
    gates = GateKeeper(store, owner="me", lease_seconds=5)
    run = _paused(store, "legal")
    gate = gates.to_decide(run)
    running = gates.approve(run, gate, Decision("console:bo", True, "ok"))
    assert (running.status, running.status_by, running.lease_owner) == (RunStatus.RUNNING, "console:bo", "me")
    decided = store.gates.get_gate(run.id, "legal")
    assert (decided.status, decided.decided_by, decided.comment) == (GateStatus.APPROVED, "console:bo", "ok")
    assert [(a.action, a.details) for a in store.events.audit_log(run.id)] == [
        ("approve", {"node": "legal", "comment": "ok"})
    ]


def test_an_approval_on_a_stale_run_leaves_the_gate_waiting(store: MemoryStore) -> None:
    gates = GateKeeper(store, owner="me", lease_seconds=5)
    run = _paused(store, "legal")
    gate = gates.to_decide(run)
    store.runs.transition(Transition(run.id, RunStatus.CANCELLED, actor="console:cy"))  # meanwhile
    with pytest.raises(RunNotResumable):
        gates.approve(run, gate, Decision("console:bo", True))
    assert store.gates.get_gate(run.id, "legal").status is GateStatus.WAITING  # the unit wrote nothing
    assert store.events.audit_log(run.id) == []


def test_reject_cancels_marks_and_audits_in_one_change(store: MemoryStore) -> None:
    gates = GateKeeper(store)
    run = _paused(store, "legal")
    cancelled, why = gates.reject(run, gates.to_decide(run), Decision("console:bo", False, "not yet"))
    assert why == "rejected at `legal` by console:bo: not yet"
    assert (cancelled.status, cancelled.reason) == (RunStatus.CANCELLED, why)
    assert store.gates.get_gate(run.id, "legal").status is GateStatus.REJECTED
    [marker] = store.steps.journal([run.id])
    assert (marker.node_id, marker.status, marker.cache_key, marker.error) == (
        "legal", NodeStatus.FAILED, MARKER_KEY, why,
    )  # fmt: skip
    assert marker.components["marker"] == REJECTED_MARKER
    assert [a.action for a in store.events.audit_log(run.id)] == ["reject"]


def test_a_rejection_that_loses_the_race_names_the_winner_and_changes_nothing(store: MemoryStore) -> None:
    gates = GateKeeper(store)
    run = _paused(store, "legal")
    gate = gates.to_decide(run)
    decide_gate(store, run.id, "legal", approved=True, by="console:cy")  # the other approver won
    with pytest.raises(GateAlreadyDecided) as lost:
        gates.reject(run, gate, Decision("console:bo", False))
    assert (lost.value.decision, lost.value.by, lost.value.status) == ("approved", "console:cy", "paused")
    assert store.runs.get_run(run.id).status is RunStatus.PAUSED
    assert store.steps.journal([run.id]) == [] and store.events.audit_log(run.id) == []


def test_asking_keeps_an_answering_gate_and_reopens_one_asked_another_question(store: MemoryStore) -> None:
    gates = GateKeeper(store)
    run = _paused(store)
    first = gates.ask(run.id, "legal", "Ship v1?", "k1", why="new")
    assert (first.status, first.cache_key) == (GateStatus.WAITING, "k1")
    decide_gate(store, run.id, "legal", approved=True, by="console:bo")
    kept = gates.ask(run.id, "legal", "Ship v1?", "k1", why="same")
    assert (kept.status, kept.decided_by) == (GateStatus.APPROVED, "console:bo")
    assert store.events.audit_log(run.id) == []
    again = gates.ask(run.id, "legal", "Ship v2?", "k2", why="upstream changed")
    assert (again.status, again.prompt, again.decided_by) == (GateStatus.WAITING, "Ship v2?", None)
    [reopened] = store.events.audit_log(run.id)
    assert (reopened.actor, reopened.action, reopened.details) == (
        "baton", "reopen_gate",
        {"node": "legal", "was": "approved", "by": "console:bo", "why": "upstream changed"},
    )  # fmt: skip
    assert answers(again, "k2", "anything") and not answers(again, "k1", "Ship v2?")
