"""Approval gates: opening, finding the waiting ones, and the decide compare-and-swap."""

from __future__ import annotations

import pytest

from core.errors import GateAlreadyDecided, RunNotFound
from core.store.records import GateStatus, RunStatus
from core.store.repository import SqlStore
from tests.integration.store.conftest import MakeRun


def test_open_gate_copies_where_the_run_lives_and_is_idempotent(store: SqlStore, make_run: MakeRun) -> None:
    run = make_run(RunStatus.RUNNING, thread="T1")
    gate = store.open_gate(run.id, "review", "Publish 'v1.2'?")
    assert (gate.run_id, gate.node_id, gate.prompt, gate.status) == (
        run.id,
        "review",
        "Publish 'v1.2'?",
        GateStatus.WAITING,
    )
    assert gate.decided_by is None and gate.decided_at is None
    assert store.open_gate(run.id, "review", "another prompt") == gate
    assert store.get_gate(run.id, "review") == gate


def test_open_gate_of_an_unknown_run_raises(store: SqlStore) -> None:
    with pytest.raises(RunNotFound):
        store.open_gate("000000000000", "review", "ok?")


def test_get_gate_unknown_raises(store: SqlStore, make_run: MakeRun) -> None:
    run = make_run()
    with pytest.raises(RunNotFound, match=f"Run {run.id} has no approval gate review"):
        store.get_gate(run.id, "review")


def test_waiting_gates_by_conversation_and_thread(store: SqlStore, make_run: MakeRun) -> None:
    in_thread = make_run(RunStatus.PAUSED, thread="T1")
    elsewhere = make_run(RunStatus.PAUSED, thread="T2")
    other_channel = make_run(RunStatus.PAUSED, conversation="C2", thread="T1")
    decided = make_run(RunStatus.PAUSED, thread="T1")
    for run in (in_thread, elsewhere, other_channel, decided):
        store.open_gate(run.id, "review", f"ok {run.id}?")
    store.decide_gate(decided.id, "review", approved=True, by="slack:U2", comment=None)

    pairs = store.waiting_gates(platform="slack", conversation="C1")
    assert [(run.id, gate.node_id) for run, gate in pairs] == [
        (elsewhere.id, "review"),
        (in_thread.id, "review"),
    ]
    assert pairs[1][0] == store.get_run(in_thread.id)
    assert pairs[1][1] == store.get_gate(in_thread.id, "review")
    assert [r.id for r, _ in store.waiting_gates(platform="slack", conversation="C1", thread="T1")] == [
        in_thread.id
    ]
    assert store.waiting_gates(platform="discord", conversation="C1") == []


def test_set_thread_moves_the_runs_gates(store: SqlStore, make_run: MakeRun) -> None:
    run = make_run(RunStatus.PAUSED)
    store.open_gate(run.id, "review", "ok?")
    assert store.waiting_gates(platform="slack", conversation="C1", thread="T5") == []
    store.set_thread(run.id, "T5")
    assert [r.thread for r, _ in store.waiting_gates(platform="slack", conversation="C1", thread="T5")] == [
        "T5"
    ]


@pytest.mark.parametrize("approved", [True, False])
def test_decide_gate_once(store: SqlStore, make_run: MakeRun, approved: bool) -> None:
    run = make_run(RunStatus.PAUSED)
    store.open_gate(run.id, "review", "ok?")
    decided = store.decide_gate(run.id, "review", approved=approved, by="slack:U2", comment="lgtm")
    expected = GateStatus.APPROVED if approved else GateStatus.REJECTED
    assert (decided.status, decided.decided_by, decided.comment) == (expected, "slack:U2", "lgtm")
    assert decided.decided_at is not None
    assert store.get_gate(run.id, "review") == decided

    with pytest.raises(GateAlreadyDecided) as info:
        store.decide_gate(run.id, "review", approved=not approved, by="slack:U3", comment=None)
    assert (
        info.value.message == f"the approval review of run {run.id} was already {expected.value} by slack:U2"
    )
    assert (info.value.run_id, info.value.status, info.value.by) == (run.id, expected.value, "slack:U2")
    assert info.value.hint
    assert store.get_gate(run.id, "review") == decided


def test_decide_unknown_gate_raises_run_not_found(store: SqlStore, make_run: MakeRun) -> None:
    run = make_run()
    with pytest.raises(RunNotFound):
        store.decide_gate(run.id, "review", approved=True, by="slack:U2", comment=None)


def test_open_gate_for_the_same_key_keeps_the_decision(store: SqlStore, make_run: MakeRun) -> None:
    run = make_run(RunStatus.RUNNING)
    store.open_gate(run.id, "review", "Publish v1?", "key-1")
    decided = store.decide_gate(run.id, "review", approved=True, by="slack:U2", comment="ok")

    again = store.open_gate(run.id, "review", "Publish v1?", "key-1")

    assert again == decided and again.cache_key == "key-1"
    assert (again.status, again.decided_by) == (GateStatus.APPROVED, "slack:U2")


def test_open_gate_for_another_key_reopens_it_without_the_old_decision(
    store: SqlStore, make_run: MakeRun
) -> None:
    run = make_run(RunStatus.RUNNING, thread="T1")
    store.open_gate(run.id, "review", "Publish v1?", "key-1")
    store.decide_gate(run.id, "review", approved=True, by="slack:U2", comment="ok")

    reopened = store.open_gate(run.id, "review", "Publish v2?", "key-2")

    assert (reopened.status, reopened.prompt) == (GateStatus.WAITING, "Publish v2?")
    assert reopened.cache_key == "key-2"
    assert (reopened.decided_by, reopened.comment, reopened.decided_at) == (None, None, None)
    assert [g.prompt for _, g in store.waiting_gates(platform="slack", conversation="C1", thread="T1")] == [
        "Publish v2?"
    ]
    assert store.decide_gate(run.id, "review", approved=False, by="slack:U3", comment="no").status is (
        GateStatus.REJECTED
    )
