"""The outbox on every store (the contract): rows written only with their state change,
claimed by exactly one claimer, taken over when a lease lapses, retried after a backoff, kept
in order per run, pruned once delivered; and two replicas claiming at once on a shared
database."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from core.errors import InvalidTransition
from core.store.port import Store, Transition
from core.store.records import Delivery, RunStatus
from core.store.repository import SqlStore
from tests.integration.store.conftest import Clock, MakeRun


def _finish(store: Store, run_id: str, to: RunStatus = RunStatus.COMPLETED, **payload: object) -> None:
    with store.transaction() as tx:
        tx.transition(Transition(run_id, to, actor="engine", allowed_from=[RunStatus.RUNNING]))
        tx.enqueue_delivery(run_id, "run_finished", {"status": to.value, **payload})


def test_a_row_is_written_with_its_state_change_and_the_runs_place(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.RUNNING, platform="discord", conversation="C9", thread="T9")
    _finish(store, run.id, reason="done")
    [row] = store.outbox.deliveries(run.id)
    assert (row.kind, row.platform, row.conversation, row.thread) == ("run_finished", "discord", "C9", "T9")
    assert row.payload == {"status": "completed", "reason": "done"}
    assert row.delivered_at is None and row.attempts == 0 and row.claimed_by is None
    assert store.outbox.undelivered() == [row]
    assert row.key == f"outbox:{row.id}"


def test_a_lost_compare_and_swap_writes_no_row(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.COMPLETED)
    with pytest.raises(InvalidTransition):
        _finish(store, run.id, RunStatus.FAILED)
    assert store.outbox.deliveries(run.id) == []


def test_an_exception_in_the_unit_writes_no_row(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.RUNNING)
    with pytest.raises(RuntimeError), store.transaction() as tx:
        tx.enqueue_delivery(run.id, "run_finished", {"status": "completed"})
        raise RuntimeError("boom")
    assert store.outbox.deliveries(run.id) == []


def test_a_claimed_row_is_not_claimed_again_until_its_lease_lapses(
    store: Store, make_run: MakeRun, clock: Clock
) -> None:
    run = make_run(RunStatus.RUNNING)
    _finish(store, run.id)
    [mine] = store.outbox.claim_deliveries("a", ["slack"], lease_seconds=30)
    assert (mine.claimed_by, mine.attempts) == ("a", 1)
    assert store.outbox.claim_deliveries("b", ["slack"], lease_seconds=30) == []
    clock.advance(31)  # "a" died holding it
    [taken] = store.outbox.claim_deliveries("b", ["slack"], lease_seconds=30)
    assert (taken.id, taken.claimed_by, taken.attempts) == (mine.id, "b", 2)
    assert not store.outbox.settle_delivery(mine.id, "a")  # the old holder lost it
    assert store.outbox.settle_delivery(mine.id, "b")
    assert not store.outbox.settle_delivery(mine.id, "b")  # once
    assert store.outbox.undelivered() == []
    assert store.outbox.claim_deliveries("c", ["slack"], lease_seconds=30) == []


def test_only_the_claimers_platforms_are_claimed(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.RUNNING, platform="discord")
    _finish(store, run.id)
    assert store.outbox.claim_deliveries("a", ["slack", "console"], lease_seconds=30) == []
    assert store.outbox.claim_deliveries("a", [], lease_seconds=30) == []
    assert [r.run_id for r in store.outbox.claim_deliveries("a", ["discord"], lease_seconds=30)] == [run.id]


def test_a_deferred_row_waits_for_its_backoff(store: Store, make_run: MakeRun, clock: Clock) -> None:
    run = make_run(RunStatus.RUNNING)
    _finish(store, run.id)
    [row] = store.outbox.claim_deliveries("a", ["slack"], lease_seconds=30)
    assert store.outbox.defer_delivery(row.id, "a", due_at=clock.now + 8, error="503 Service Unavailable")
    assert not store.outbox.defer_delivery(row.id, "a", due_at=clock.now, error="again")  # claim given up
    assert store.outbox.claim_deliveries("a", ["slack"], lease_seconds=30) == []
    clock.advance(7)
    assert store.outbox.claim_deliveries("b", ["slack"], lease_seconds=30) == []
    clock.advance(2)
    [again] = store.outbox.claim_deliveries("b", ["slack"], lease_seconds=30)
    assert (again.attempts, again.last_error) == (2, "503 Service Unavailable")


def test_a_runs_rows_are_claimed_in_order(store: Store, make_run: MakeRun, clock: Clock) -> None:
    first, other = make_run(RunStatus.RUNNING), make_run(RunStatus.RUNNING)
    _finish(store, first.id, RunStatus.PAUSED)
    store.runs.transition(Transition(first.id, RunStatus.RUNNING, actor="u", lease_owner="engine"))
    _finish(store, first.id)
    _finish(store, other.id)
    claimed = store.outbox.claim_deliveries("a", ["slack"], lease_seconds=30)
    assert [(r.run_id, r.payload["status"]) for r in claimed] == [
        (first.id, "paused"), (other.id, "completed")
    ]
    store.outbox.defer_delivery(claimed[0].id, "a", due_at=clock.now + 5, error="x")
    clock.advance(1)
    assert store.outbox.claim_deliveries("a", ["slack"], lease_seconds=30) == []  # the later one waits
    clock.advance(5)
    [paused] = store.outbox.claim_deliveries("a", ["slack"], lease_seconds=30)
    assert paused.payload["status"] == "paused"
    store.outbox.settle_delivery(paused.id, "a")
    [completed] = store.outbox.claim_deliveries("a", ["slack"], lease_seconds=30)
    assert (completed.run_id, completed.payload["status"]) == (first.id, "completed")


def test_the_rows_one_unit_adds_keep_the_units_order(store: Store, make_run: MakeRun) -> None:
    """Two replies written by one unit (a gate's timeout line, then the run's final reply) are
    delivered in the order the unit wrote them, as are its audit rows. On PostgreSQL a unit is
    one statement whose inserts, unread, ran at its end in reverse order."""
    run = make_run(RunStatus.PAUSED)
    with store.transaction() as tx:
        tx.transition(Transition(run.id, RunStatus.CANCELLED, actor="baton", allowed_from=[RunStatus.PAUSED]))
        tx.audit(actor="baton", action="timeout", run_id=run.id)
        tx.enqueue_delivery(run.id, "gate_timed_out", {"node": "review"})
        tx.audit(actor="baton", action="reject", run_id=run.id)
        tx.enqueue_delivery(run.id, "run_finished", {"status": "cancelled"})
    assert [r.kind for r in store.outbox.deliveries(run.id)] == ["gate_timed_out", "run_finished"]
    assert [a.action for a in store.events.audit_log(run.id)][-2:] == ["timeout", "reject"]
    [first] = store.outbox.claim_deliveries("a", ["slack"], lease_seconds=30)
    assert first.kind == "gate_timed_out"


def test_released_claims_are_claimed_at_once(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.RUNNING)
    _finish(store, run.id)
    store.outbox.claim_deliveries("a", ["slack"], lease_seconds=300)
    assert store.outbox.release_deliveries("a") == 1
    assert [r.claimed_by for r in store.outbox.claim_deliveries("b", ["slack"], lease_seconds=30)] == ["b"]


def test_a_renewed_claim_is_kept_and_a_silent_one_lapses(
    store: Store, make_run: MakeRun, clock: Clock
) -> None:
    """A sender renews its claim while a send takes long (its heartbeat); a claim nobody
    renews lapses after its short lease and a peer takes it."""
    one, two = make_run(RunStatus.RUNNING), make_run(RunStatus.RUNNING)
    _finish(store, one.id)
    _finish(store, two.id)
    [kept, silent] = store.outbox.claim_deliveries("a:1:x", ["slack"], lease_seconds=10)
    for _ in range(3):
        clock.advance(4)
        assert store.outbox.renew_delivery(kept.id, "a:1:x", 10)
    assert [r.id for r in store.outbox.claim_deliveries("b", ["slack"], lease_seconds=10)] == [silent.id]
    assert not store.outbox.renew_delivery(silent.id, "a:1:x", 10)  # lost: the sender stops there
    assert store.outbox.settle_delivery(kept.id, "a:1:x")
    assert not store.outbox.renew_delivery(kept.id, "a:1:x", 10)  # delivered: nothing to renew


def test_the_claimants_of_a_replica_are_listed_for_its_restart(
    store: Store, make_run: MakeRun, clock: Clock
) -> None:
    runs = [make_run(RunStatus.RUNNING) for _ in range(4)]
    for run in runs:
        _finish(store, run.id)
    store.outbox.claim_deliveries("web_1:10:aa", ["slack"], lease_seconds=30, run_id=runs[0].id)
    store.outbox.claim_deliveries("web_1:11:bb", ["slack"], lease_seconds=30, run_id=runs[1].id)
    store.outbox.claim_deliveries("web%1:12:cc", ["slack"], lease_seconds=30, run_id=runs[2].id)
    store.outbox.claim_deliveries("web_10:13:dd", ["slack"], lease_seconds=5, run_id=runs[3].id)
    assert store.outbox.delivery_claimants("web_1:") == ["web_1:10:aa", "web_1:11:bb"]  # no LIKE wildcards
    assert store.outbox.delivery_claimants("web_10:") == ["web_10:13:dd"]
    clock.advance(6)
    assert store.outbox.delivery_claimants("web_10:") == []  # lapsed: anyone takes it anyway
    assert store.outbox.release_deliveries("web_1:10:aa") == 1
    assert store.outbox.delivery_claimants("web_1:") == ["web_1:11:bb"]


def test_delivered_rows_are_pruned_after_their_retention(
    store: Store, make_run: MakeRun, clock: Clock
) -> None:
    done, pending = make_run(RunStatus.RUNNING), make_run(RunStatus.RUNNING)
    _finish(store, done.id)
    [row] = store.outbox.claim_deliveries("a", ["slack"], lease_seconds=30)
    store.outbox.settle_delivery(row.id, "a")
    _finish(store, pending.id)
    clock.advance(100)
    assert store.outbox.forget_deliveries(clock.now - 200) == 0
    assert store.outbox.forget_deliveries(clock.now) == 1
    assert store.outbox.deliveries(done.id) == []
    assert [r.run_id for r in store.outbox.undelivered()] == [pending.id]  # never an undelivered one


def _race(workers: list[Callable[[], list[Delivery]]]) -> list[list[Delivery]]:
    barrier = threading.Barrier(len(workers))
    results: list[list[Delivery]] = [[] for _ in workers]

    def go(i: int) -> None:
        barrier.wait()
        results[i] = workers[i]()

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


def test_two_claimers_at_once_get_each_row_once(store: Store, make_run: MakeRun) -> None:
    runs = [make_run(RunStatus.RUNNING) for _ in range(6)]
    for run in runs:
        _finish(store, run.id)
    a, b = _race([
        lambda: store.outbox.claim_deliveries("a", ["slack"], lease_seconds=30),
        lambda: store.outbox.claim_deliveries("b", ["slack"], lease_seconds=30),
    ])
    ids = [r.id for r in a + b]
    assert sorted(ids) == sorted(r.id for r in store.outbox.undelivered()) and len(set(ids)) == 6


def test_two_replicas_claiming_at_once_get_each_row_once(database_url: str, make_sql_run: MakeRun) -> None:
    with SqlStore(database_url) as a, SqlStore(database_url) as b:
        for _round in range(5):
            runs = [make_sql_run(RunStatus.RUNNING) for _ in range(4)]
            for run in runs:
                _finish(a, run.id)
            got_a, got_b = _race([
                lambda: a.outbox.claim_deliveries("replica-a", ["slack"], lease_seconds=30),
                lambda: b.outbox.claim_deliveries("replica-b", ["slack"], lease_seconds=30),
            ])
            ids = [r.id for r in got_a + got_b]
            assert len(ids) == len(set(ids)) == 4
            for row in got_a:
                assert a.outbox.settle_delivery(
                    row.id, "replica-a"
                ) and not b.outbox.settle_delivery(row.id, "replica-b")
            for row in got_b:
                assert b.outbox.settle_delivery(row.id, "replica-b")


def test_a_claim_may_name_one_run(store: Store, make_run: MakeRun) -> None:
    first, second = make_run(RunStatus.RUNNING), make_run(RunStatus.RUNNING)
    _finish(store, first.id)
    _finish(store, second.id)
    [row] = store.outbox.claim_deliveries("a", ["slack"], lease_seconds=30, run_id=second.id)
    assert row.run_id == second.id
    assert store.outbox.claim_deliveries("a", ["slack"], lease_seconds=30, run_id=second.id) == []
    assert [r.run_id for r in store.outbox.claim_deliveries("a", ["slack"], lease_seconds=30)] == [first.id]
