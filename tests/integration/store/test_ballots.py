"""Votes on approval gates and their durable deadlines, on every store (the contract), and what
only a shared database shows: two replicas voting and firing at once, a restart in between."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import pytest

from core.engine.approval_policy import Policy
from core.engine.gates import GateKeeper
from core.errors import DeadlineAlreadyFired, VoteDiffers, VotesChanged
from core.store.port import Store
from core.store.records import GateDeadline, GateVote, RunStatus
from core.store.repository import SqlStore
from tests.integration.store.conftest import MakeRun

OPENED = 5_000.0
T = TypeVar("T")


def _vote(run_id: str, user: str, choice: str = "approve", at: float = OPENED + 1, **kw: object) -> GateVote:
    return GateVote(run_id, "review", OPENED, user, choice, at, **kw)  # type: ignore[arg-type]


def test_a_vote_is_kept_once_per_person_and_gate_opening(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.PAUSED)
    assert store.ballots.cast_vote(_vote(run.id, "slack:U1", comment="ok", values={"replicas": 5}))
    assert not store.ballots.cast_vote(_vote(run.id, "slack:U1", at=OPENED + 9))  # again: counts once
    assert store.ballots.cast_vote(_vote(run.id, "slack:U2", at=OPENED + 2, values={"replicas": 5}))
    votes = store.ballots.gate_votes(run.id, "review", OPENED)
    assert [(v.user, v.choice, v.at) for v in votes] == [
        ("slack:U1", "approve", OPENED + 1),
        ("slack:U2", "approve", OPENED + 2),
    ]
    assert votes[0].values == {"replicas": 5} and votes[0].comment == "ok"


def test_a_person_who_approved_may_still_reject(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.PAUSED)
    assert store.ballots.cast_vote(_vote(run.id, "slack:U1"))
    assert store.ballots.cast_vote(_vote(run.id, "slack:U1", "reject", at=OPENED + 2))
    assert not store.ballots.cast_vote(_vote(run.id, "slack:U1", "hotfix", at=OPENED + 3))  # never a switch
    assert [v.choice for v in store.ballots.gate_votes(run.id, "review", OPENED)] == ["approve", "reject"]


def test_a_quorum_approves_one_thing_the_first_votes_proposal(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.PAUSED)
    assert store.ballots.cast_vote(_vote(run.id, "slack:U1", values={"replicas": 5}, comment="five"))
    with pytest.raises(VoteDiffers) as other:  # other values: not kept, and the proposal is named
        store.ballots.cast_vote(_vote(run.id, "slack:U2", at=OPENED + 2, values={"replicas": 4}))
    proposal = (other.value.by, other.value.choice, other.value.values)
    assert proposal == ("slack:U1", "approve", {"replicas": 5})
    with pytest.raises(VoteDiffers):  # the same values for another choice: not the same thing either
        store.ballots.cast_vote(_vote(run.id, "slack:U2", "hotfix", at=OPENED + 3, values={"replicas": 5}))
    assert store.ballots.cast_vote(_vote(run.id, "slack:U2", at=OPENED + 4, values={"replicas": 5}))
    assert store.ballots.cast_vote(
        _vote(run.id, "slack:U3", "reject", at=OPENED + 5)
    )  # a rejection always counts
    votes = store.ballots.gate_votes(run.id, "review", OPENED)
    assert [(v.user, v.choice, v.values) for v in votes] == [
        ("slack:U1", "approve", {"replicas": 5}),
        ("slack:U2", "approve", {"replicas": 5}),
        ("slack:U3", "reject", {}),
    ]
    assert not store.ballots.cast_vote(
        _vote(run.id, "slack:U1", at=OPENED + 6, values={"replicas": 9})
    )  # a repeat


def test_a_vote_in_a_unit_of_work_is_a_cas_on_the_votes_read(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.PAUSED)
    with store.transaction() as tx:
        kept = tx.cast_vote(_vote(run.id, "slack:U1", values={"replicas": 5}), seen=0)
        tx.audit(actor="slack:U1", action="vote", run_id=run.id, details={"node": "review"})
    assert kept.value is True
    with pytest.raises(VotesChanged), store.transaction() as tx:  # read before U1's vote: decide again
        tx.cast_vote(_vote(run.id, "slack:U2", at=OPENED + 2, values={"replicas": 5}), seen=0)
        tx.audit(actor="slack:U2", action="vote", run_id=run.id, details={"node": "review"})
    assert [v.user for v in store.ballots.gate_votes(run.id, "review", OPENED)] == ["slack:U1"]
    assert [
        e.actor for e in store.events.audit_log(run.id) if e.action == "vote"
    ] == ["slack:U1"]  # undone too
    with store.transaction() as tx:
        tx.cast_vote(_vote(run.id, "slack:U2", at=OPENED + 2, values={"replicas": 5}), seen=1)
        tx.audit(actor="slack:U2", action="vote", run_id=run.id, details={"node": "review"})
    assert [v.user for v in store.ballots.gate_votes(run.id, "review", OPENED)] == ["slack:U1", "slack:U2"]
    assert store.ballots.gate_votes(run.id, "review", OPENED)[1].values == {"replicas": 5}


def test_a_reopened_gate_starts_without_votes(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.PAUSED)
    store.ballots.cast_vote(_vote(run.id, "slack:U1"))
    assert store.ballots.gate_votes(run.id, "review", OPENED + 100) == []
    assert store.ballots.gate_votes(run.id, "other", OPENED) == []


def test_a_deadline_fired_in_a_unit_of_work_takes_the_units_writes_with_it(
    store: Store, make_run: MakeRun
) -> None:
    run = make_run(RunStatus.PAUSED)
    store.ballots.plan_deadlines(run.id, "review", OPENED, [("remind:0", OPENED + 1)])
    [due] = store.ballots.due_deadlines(OPENED + 1)
    with store.transaction() as tx:
        fired = tx.fire_deadline(due, "replica-a")
        tx.audit(actor="baton", action="remind", run_id=run.id, details={})
        tx.enqueue_delivery(run.id, "gate_reminder", {"node": "review", "to": ["slack:U1"]})
    assert fired.value is True
    [deadline] = store.ballots.gate_deadlines(run.id, "review", OPENED)
    assert deadline.fired_by == "replica-a" and deadline.fired_at is not None
    with pytest.raises(DeadlineAlreadyFired) as lost, store.transaction() as tx:  # a second replica
        tx.fire_deadline(due, "replica-b")
        tx.audit(actor="baton", action="remind", run_id=run.id, details={})
        tx.enqueue_delivery(run.id, "gate_reminder", {"node": "review"})
    assert lost.value.by == "replica-a"
    assert [r.payload["to"] for r in store.outbox.deliveries(run.id)] == [["slack:U1"]]  # the loser's undone
    assert [a.action for a in store.events.audit_log(run.id)].count("remind") == 1
    assert not store.ballots.fire_deadline(due, "replica-c")
    assert store.ballots.gate_deadlines(run.id, "review", OPENED)[0].fired_by == "replica-a"


def test_deadlines_are_planned_once_and_fire_once(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.PAUSED)
    plan = [("remind:0", OPENED + 3600), ("timeout", OPENED + 14400)]
    store.ballots.plan_deadlines(run.id, "review", OPENED, plan)
    store.ballots.plan_deadlines(
        run.id, "review", OPENED, [("remind:0", OPENED + 1)]
    )  # a replanning: no change
    assert [(d.name, d.due_at) for d in store.ballots.gate_deadlines(run.id, "review", OPENED)] == plan
    assert store.ballots.due_deadlines(OPENED + 3599) == []
    due = store.ballots.due_deadlines(OPENED + 3600)
    assert [d.name for d in due] == ["remind:0"]
    assert store.ballots.fire_deadline(due[0], "replica-a")
    assert not store.ballots.fire_deadline(due[0], "replica-b")
    fired = store.ballots.gate_deadlines(run.id, "review", OPENED)[0]
    assert fired.fired_by == "replica-a" and fired.fired_at is not None
    assert [d.name for d in store.ballots.due_deadlines(OPENED + 20_000)] == ["timeout"]


def test_due_deadlines_are_earliest_first_and_bounded(store: Store, make_run: MakeRun) -> None:
    runs = [make_run(RunStatus.PAUSED) for _ in range(3)]
    for i, run in enumerate(reversed(runs)):
        store.ballots.plan_deadlines(run.id, "review", OPENED, [("timeout", OPENED + i)])
    due = store.ballots.due_deadlines(OPENED + 10, limit=2)
    assert [d.due_at for d in due] == [OPENED, OPENED + 1]


def _race(workers: list[Callable[[], T]]) -> list[T]:
    barrier = threading.Barrier(len(workers))
    results: list[Any] = [None] * len(workers)

    def go(i: int) -> None:
        barrier.wait()
        results[i] = workers[i]()

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


def test_two_replicas_voting_at_once_both_count(database_url: str, make_sql_run: MakeRun) -> None:
    run = make_sql_run(RunStatus.PAUSED)
    with SqlStore(database_url) as a, SqlStore(database_url) as b:
        for round_ in range(5):
            opened = OPENED + round_
            votes = [GateVote(run.id, "review", opened, f"slack:U{i}", "approve", opened + 1) for i in (1, 2)]
            assert _race(
                [partial(a.ballots.cast_vote, votes[0]), partial(b.ballots.cast_vote, votes[1])]
            ) == [True, True]
            assert len(a.ballots.gate_votes(run.id, "review", opened)) == 2


def test_two_replicas_proposing_different_values_at_once_keep_one(
    database_url: str, make_sql_run: MakeRun
) -> None:
    run = make_sql_run(RunStatus.PAUSED)
    with SqlStore(database_url) as a, SqlStore(database_url) as b:
        for round_ in range(5):
            opened = OPENED + round_
            votes = [
                GateVote(run.id, "review", opened, f"slack:U{i}", "approve", opened + 1, "", {"replicas": i})
                for i in (1, 2)
            ]

            def cast(store: SqlStore, vote: GateVote) -> bool:
                try:
                    return store.ballots.cast_vote(vote)
                except VoteDiffers:
                    return False

            assert sorted(_race([partial(cast, a, votes[0]), partial(cast, b, votes[1])])) == [False, True]
            [kept] = a.ballots.gate_votes(run.id, "review", opened)
            assert kept.values == {"replicas": int(kept.user[-1])}


def _vote_in_unit(store: SqlStore, vote: GateVote) -> bool:
    try:
        with store.transaction() as tx:
            tx.cast_vote(vote, seen=0)
            tx.audit(actor=vote.user, action="vote", run_id=vote.run_id, details={"at": vote.opened_at})
    except VotesChanged:
        return False
    return True


def test_two_replicas_voting_in_units_from_the_same_reading_keep_one(
    database_url: str, make_sql_run: MakeRun
) -> None:
    run = make_sql_run(RunStatus.PAUSED)
    with SqlStore(database_url) as a, SqlStore(database_url) as b:
        for round_ in range(5):
            opened = OPENED + round_
            votes = [GateVote(run.id, "review", opened, f"slack:U{i}", "approve", opened + 1) for i in (1, 2)]
            results = _race([partial(_vote_in_unit, a, votes[0]), partial(_vote_in_unit, b, votes[1])])
            assert sorted(results) == [False, True]
            assert len(a.ballots.gate_votes(run.id, "review", opened)) == 1
        assert len([e for e in a.events.audit_log(run.id) if e.action == "vote"]) == 5  # the losers' undone


def test_the_same_vote_from_two_replicas_counts_once(database_url: str, make_sql_run: MakeRun) -> None:
    run = make_sql_run(RunStatus.PAUSED)
    with SqlStore(database_url) as a, SqlStore(database_url) as b:
        vote = _vote(run.id, "slack:U1")
        assert sorted(
            _race([lambda: a.ballots.cast_vote(vote), lambda: b.ballots.cast_vote(vote)])
        ) == [False, True]


def test_a_deadline_fires_on_exactly_one_of_two_replicas(database_url: str, make_sql_run: MakeRun) -> None:
    run = make_sql_run(RunStatus.PAUSED)
    with SqlStore(database_url) as a, SqlStore(database_url) as b:
        for i in range(5):
            a.ballots.plan_deadlines(run.id, "review", OPENED, [(f"remind:{i}", OPENED + i)])
            due: GateDeadline = b.ballots.due_deadlines(OPENED + 100)[0]
            results = _race(
                [partial(a.ballots.fire_deadline, due, "a"), partial(b.ballots.fire_deadline, due, "b")]
            )
            assert sorted(results) == [False, True]


def test_a_vote_survives_a_restart(database_url: str, make_sql_run: MakeRun) -> None:
    run = make_sql_run(RunStatus.PAUSED)
    with SqlStore(database_url) as before:
        before.ballots.cast_vote(_vote(run.id, "slack:U1", values={"window": "now"}))
        before.ballots.plan_deadlines(run.id, "review", OPENED, [("timeout", OPENED + 60)])
    with SqlStore(database_url) as after:
        assert [(v.user, v.values) for v in after.ballots.gate_votes(run.id, "review", OPENED)] == [
            ("slack:U1", {"window": "now"})
        ]
        assert [d.name for d in after.ballots.due_deadlines(OPENED + 60)] == ["timeout"]


def test_a_decision_carries_its_choice_and_outcome_and_a_reopening_clears_them(
    store: Store, make_run: MakeRun
) -> None:
    run = make_run(RunStatus.PAUSED)
    store.gates.open_gate(run.id, "review", "Go?", "k1")
    outcome = {"values": {"replicas": 5}, "approvers": [{"user": "slack:U1", "at": 1.0, "comment": ""}]}
    with store.transaction() as tx:
        decided = tx.decide_gate(
            run.id, "review", approved=True, by="slack:U1", comment=None, decision="hotfix", outcome=outcome
        )
    assert decided.value.decision == "hotfix" and decided.value.outcome == outcome
    assert store.gates.get_gate(run.id, "review").outcome == outcome
    reopened = store.gates.open_gate(run.id, "review", "Go again?", "k2")
    assert reopened.decision is None and reopened.outcome == {}


def test_a_plain_decision_records_approve_or_reject(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.PAUSED)
    store.gates.open_gate(run.id, "review", "Go?")
    with store.transaction() as tx:
        tx.decide_gate(run.id, "review", approved=False, by="slack:U1", comment="no")
    assert store.gates.get_gate(run.id, "review").decision == "reject"


def test_two_replicas_completing_a_quorum_at_once_open_the_gate_once_and_both_votes_count(
    database_url: str, make_sql_run: MakeRun
) -> None:
    """`GateKeeper.vote` on two replicas at once: the policy evaluated and the ballot and the
    decision written in one unit each; one opens the gate, the other's vote is counted after
    it (read again) and names who opened it. Another proposal racing them is refused."""
    members = lambda refs: frozenset(refs)  # noqa: E731 - users only
    policy = Policy(approvers=("slack:U1", "slack:U2", "slack:U3", "slack:U4"), required=2)
    for _ in range(3):
        run = make_sql_run(RunStatus.PAUSED)
        with SqlStore(database_url) as a, SqlStore(database_url) as b:
            gate = a.gates.open_gate(run.id, "review", "Go?")
            first = GateVote(run.id, "review", gate.created_at, "slack:U1", "approve", gate.created_at + 1,
                             values={"replicas": 5})
            voted = GateKeeper(a, owner="a", lease_seconds=60).count(run, gate, first, policy, members)
            assert voted.counted and not voted.decides
            votes = [GateVote(run.id, "review", gate.created_at, user, "approve", gate.created_at + 2,
                              values={"replicas": 5}) for user in ("slack:U2", "slack:U3")]
            keepers = [GateKeeper(a, owner=f"r{i}", lease_seconds=60) for i, a in enumerate((a, b))]
            results = _race([partial(keepers[i].count, run, gate, votes[i], policy, members) for i in (0, 1)])
            opened = [r for r in results if r.decides]
            later = [r for r in results if not r.decides]
            assert len(opened) == 1 and len(later) == 1 and later[0].counted
            assert later[0].decided is not None and later[0].decided.decided_by == opened[0].run.status_by
            decided = a.gates.get_gate(run.id, "review")
            assert decided.outcome["values"] == {"replicas": 5} and len(decided.outcome["approvers"]) == 2
            assert len(a.ballots.gate_votes(run.id, "review", gate.created_at)) == 3  # every vote kept
            assert [e.action for e in a.events.audit_log(run.id)].count("approve") == 1  # opened once
            other = GateVote(run.id, "review", gate.created_at, "slack:U4", "approve", gate.created_at + 3,
                             values={"replicas": 4})
            with pytest.raises(VoteDiffers):
                GateKeeper(b, owner="b", lease_seconds=60).count(run, gate, other, policy, members)
