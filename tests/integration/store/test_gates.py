"""Approval gates: opening, finding the waiting ones, and the decide compare-and-swap."""

from __future__ import annotations

import pytest

from core.errors import GateAlreadyDecided, RunNotFound
from core.store.port import Store
from core.store.records import GateStatus, RunStatus
from tests.factories import decide_gate
from tests.integration.store.conftest import Clock, MakeRun


def test_open_gate_copies_where_the_run_lives_and_is_idempotent(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.RUNNING, thread="T1")
    gate = store.gates.open_gate(run.id, "review", "Publish 'v1.2'?")
    assert (gate.run_id, gate.node_id, gate.prompt, gate.status) == (
        run.id,
        "review",
        "Publish 'v1.2'?",
        GateStatus.WAITING,
    )
    assert gate.decided_by is None and gate.decided_at is None
    assert store.gates.open_gate(run.id, "review", "another prompt") == gate
    assert store.gates.get_gate(run.id, "review") == gate


def test_open_gate_of_an_unknown_run_raises(store: Store) -> None:
    with pytest.raises(RunNotFound):
        store.gates.open_gate("000000000000", "review", "ok?")


def test_get_gate_unknown_raises(store: Store, make_run: MakeRun) -> None:
    run = make_run()
    with pytest.raises(RunNotFound, match=f"Run {run.id} has no approval gate review"):
        store.gates.get_gate(run.id, "review")


def test_waiting_gates_by_conversation_and_thread(store: Store, make_run: MakeRun) -> None:
    in_thread = make_run(RunStatus.PAUSED, thread="T1")
    elsewhere = make_run(RunStatus.PAUSED, thread="T2")
    other_channel = make_run(RunStatus.PAUSED, conversation="C2", thread="T1")
    decided = make_run(RunStatus.PAUSED, thread="T1")
    for run in (in_thread, elsewhere, other_channel, decided):
        store.gates.open_gate(run.id, "review", f"ok {run.id}?")
    decide_gate(store, decided.id, "review", approved=True, by="slack:U2", comment=None)

    pairs = store.gates.waiting_gates(platform="slack", conversation="C1")
    assert [(run.id, gate.node_id) for run, gate in pairs] == [
        (elsewhere.id, "review"),
        (in_thread.id, "review"),
    ]
    assert pairs[1][0] == store.runs.get_run(in_thread.id)
    assert pairs[1][1] == store.gates.get_gate(in_thread.id, "review")
    assert [r.id for r, _ in store.gates.waiting_gates(platform="slack", conversation="C1", thread="T1")] == [
        in_thread.id
    ]
    assert store.gates.waiting_gates(platform="discord", conversation="C1") == []


def test_set_thread_moves_the_runs_gates(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.PAUSED)
    store.gates.open_gate(run.id, "review", "ok?")
    assert store.gates.waiting_gates(platform="slack", conversation="C1", thread="T5") == []
    store.runs.set_thread(run.id, "T5")
    assert [
        r.thread for r, _ in store.gates.waiting_gates(platform="slack", conversation="C1", thread="T5")
    ] == [
        "T5"
    ]


@pytest.mark.parametrize("approved", [True, False])
def test_decide_gate_once(store: Store, make_run: MakeRun, approved: bool) -> None:
    run = make_run(RunStatus.PAUSED)
    store.gates.open_gate(run.id, "review", "ok?")
    decided = decide_gate(store, run.id, "review", approved=approved, by="slack:U2", comment="lgtm")
    expected = GateStatus.APPROVED if approved else GateStatus.REJECTED
    assert (decided.status, decided.decided_by, decided.comment) == (expected, "slack:U2", "lgtm")
    assert decided.decided_at is not None
    assert store.gates.get_gate(run.id, "review") == decided

    with pytest.raises(GateAlreadyDecided) as info:
        decide_gate(store, run.id, "review", approved=not approved, by="slack:U3", comment=None)
    assert (
        info.value.message == f"the approval review of run {run.id} was already {expected.value} by slack:U2"
    )
    assert (info.value.run_id, info.value.node_id, info.value.decision, info.value.by) == (
        run.id, "review", expected.value, "slack:U2",
    )  # fmt: skip
    assert "/workflow" not in info.value.message + info.value.hint  # the commands layer words the next step
    assert store.gates.get_gate(run.id, "review") == decided


def test_decide_unknown_gate_raises_run_not_found(store: Store, make_run: MakeRun) -> None:
    run = make_run()
    with pytest.raises(RunNotFound):
        decide_gate(store, run.id, "review", approved=True, by="slack:U2", comment=None)


def test_open_gate_for_the_same_key_keeps_the_decision(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.RUNNING)
    store.gates.open_gate(run.id, "review", "Publish v1?", "key-1")
    decided = decide_gate(store, run.id, "review", approved=True, by="slack:U2", comment="ok")

    again = store.gates.open_gate(run.id, "review", "Publish v1?", "key-1")

    assert again == decided and again.cache_key == "key-1"
    assert (again.status, again.decided_by) == (GateStatus.APPROVED, "slack:U2")


def test_open_gate_for_another_key_reopens_it_without_the_old_decision(
    store: Store, make_run: MakeRun
) -> None:
    run = make_run(RunStatus.RUNNING, thread="T1")
    store.gates.open_gate(run.id, "review", "Publish v1?", "key-1")
    decide_gate(store, run.id, "review", approved=True, by="slack:U2", comment="ok")

    reopened = store.gates.open_gate(run.id, "review", "Publish v2?", "key-2")

    assert (reopened.status, reopened.prompt) == (GateStatus.WAITING, "Publish v2?")
    assert reopened.cache_key == "key-2"
    assert (reopened.decided_by, reopened.comment, reopened.decided_at) == (None, None, None)
    assert [
        g.prompt for _, g in store.gates.waiting_gates(platform="slack", conversation="C1", thread="T1")
    ] == [
        "Publish v2?"
    ]
    assert decide_gate(store, run.id, "review", approved=False, by="slack:U3", comment="no").status is (
        GateStatus.REJECTED
    )


def test_the_waiting_gate_of_a_run_is_the_one_that_waited_longest(
    store: Store, make_run: MakeRun, clock: Clock
) -> None:
    """Two approvals in parallel branches wait together: a plain approve or reject answers
    the question asked first (every reader of a run's waiting gate uses this one rule)."""
    run = make_run(RunStatus.PAUSED)
    assert store.gates.waiting_gate(run.id) is None
    first = store.gates.open_gate(run.id, "first", "one?")
    clock.advance(1)
    second = store.gates.open_gate(run.id, "second", "two?")
    neighbour = make_run(RunStatus.PAUSED)
    clock.advance(-5)  # an older gate of another run in the same conversation: not this run's
    store.gates.open_gate(neighbour.id, "first", "one?")
    assert store.gates.waiting_gate(run.id) == first
    assert store.views.gate_and_args(run) == (first, b'{"message":"B"}')
    decide_gate(store, run.id, "first", approved=True, by="slack:U2")
    assert store.gates.waiting_gate(run.id) == second
    assert store.views.gate_and_args(run) == (second, b'{"message":"B"}')
    decide_gate(store, run.id, "second", approved=False, by="slack:U3")
    assert store.gates.waiting_gate(run.id) is None
    assert store.views.gate_and_args(run) == (None, b'{"message":"B"}')
    with pytest.raises(KeyError):
        store.views.gate_and_args(run.evolve(args_digest="0" * 64))


def test_the_decided_gate_of_a_run_is_the_one_decided_last(
    store: Store, make_run: MakeRun, clock: Clock
) -> None:
    run = make_run(RunStatus.PAUSED)
    for node in ("early", "late", "open"):
        store.gates.open_gate(run.id, node, f"{node}?")
    assert store.gates.decided_gate(run.id) is None
    clock.advance(1)
    decide_gate(store, run.id, "late", approved=True, by="slack:U2")
    clock.advance(1)
    last = decide_gate(store, run.id, "early", approved=False, by="slack:U3")
    assert store.gates.decided_gate(run.id) == last  # decided last, though opened first
    assert store.gates.decided_gate(make_run().id) is None
    assert [g.node_id for g in store.gates.run_gates(run.id)] == ["early", "late", "open"]  # oldest first


def test_waiting_gates_on_a_platform_in_every_conversation(
    store: Store, make_run: MakeRun, clock: Clock
) -> None:
    here, there = make_run(RunStatus.PAUSED), make_run(RunStatus.PAUSED, conversation="C2")
    other_platform, decided = make_run(RunStatus.PAUSED, platform="discord"), make_run(RunStatus.PAUSED)
    for run in (here, there, other_platform, decided):
        clock.advance(1)
        store.gates.open_gate(run.id, "review", f"ok {run.id}?")
    decide_gate(store, decided.id, "review", approved=True, by="slack:U2", comment=None)

    pairs = store.gates.waiting_gates_on("slack")

    assert [(run.id, gate.node_id) for run, gate in pairs] == [(there.id, "review"), (here.id, "review")]
    assert pairs[0][0] == store.runs.get_run(
        there.id
    ) and pairs[0][1] == store.gates.get_gate(there.id, "review")
    assert [run.id for run, _ in store.gates.waiting_gates_on("slack", limit=1)] == [there.id]


def test_a_gate_decided_before_its_node_was_invalidated_is_re_opened_waiting(
    store: Store, make_run: MakeRun, clock: Clock
) -> None:
    """Every store re-opens a gate for the same key whose decision predates `decided_before`
    (the node's invalidation); a decision made since, or a gate still waiting, stays."""
    run = make_run(RunStatus.RUNNING)
    first = store.gates.open_gate(run.id, "review", "Ship?", "k1")
    decide_gate(store, run.id, "review", approved=True, by="slack:U1")
    clock.advance(10)
    invalidated_at = clock()
    clock.advance(10)
    assert store.gates.open_gate(run.id, "review", "Ship?", "k1").status is GateStatus.APPROVED  # no cut
    again = store.gates.open_gate(run.id, "review", "Ship?", "k1", decided_before=invalidated_at)
    assert again.status is GateStatus.WAITING and again.decided_by is None
    assert again.created_at > first.created_at
    waiting = store.gates.open_gate(run.id, "review", "Ship?", "k1", decided_before=clock() + 5)
    assert waiting == again  # nothing decided: nothing to drop
    decide_gate(store, run.id, "review", approved=True, by="slack:U2")
    kept = store.gates.open_gate(run.id, "review", "Ship?", "k1", decided_before=invalidated_at)
    assert kept.status is GateStatus.APPROVED and kept.decided_by == "slack:U2"  # decided since: it answers
