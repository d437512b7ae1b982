"""Subscriptions and notices on every store (the contract): a place subscribes to events of a
workflow (or `*`), unsubscribes in part or whole; a notice goes in the outbox once per key,
to its own place, and neither waits for the run's own replies nor holds them up."""

from __future__ import annotations

import pytest

from core.store.port import Store, Transition
from core.store.records import RunStatus
from tests.integration.store.conftest import Clock, MakeRun


def test_subscribe_lists_and_unsubscribes_in_part(store: Store) -> None:
    rows = store.subscribers.subscribe(
        "slack", "C0OPS", "deploy", ["failed", "needs_attention"], by="slack:U1"
    )
    assert [(r.workflow, r.event, r.created_by) for r in rows] == [
        ("deploy", "failed", "slack:U1"), ("deploy", "needs_attention", "slack:U1")]
    store.subscribers.subscribe("slack", "C0OPS", "*", ["completed"], by="slack:U2")
    store.subscribers.subscribe("discord", "42", "deploy", ["failed"], by="discord:7")
    assert len(store.subscribers.subscriptions(platform="slack", conversation="C0OPS")) == 3
    # a workflow's subscribers: its own rows and the `*` ones, every place
    mine = store.subscribers.subscriptions(workflow="deploy")
    assert {(s.platform, s.workflow, s.event) for s in mine} == {
        ("slack", "deploy", "failed"), ("slack", "deploy", "needs_attention"), ("slack", "*", "completed"),
        ("discord", "deploy", "failed")}
    assert store.subscribers.unsubscribe("slack", "C0OPS", "deploy", ["failed"]) == 1
    assert store.subscribers.unsubscribe("slack", "C0OPS") == 2
    assert store.subscribers.subscriptions(platform="slack") == []
    assert len(store.subscribers.subscriptions()) == 1


def test_subscribing_again_keeps_the_row_and_its_creator_becomes_the_latest(store: Store) -> None:
    [first] = store.subscribers.subscribe("slack", "C1", "deploy", ["failed"], by="slack:U1")
    [again] = store.subscribers.subscribe("slack", "C1", "deploy", ["failed"], by="slack:U2")
    assert again.created_at == first.created_at and again.created_by == "slack:U2"


def test_a_notice_is_written_once_per_key_to_its_own_place(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.FAILED, platform="slack", conversation="CDEV")
    for _ in range(2):
        with store.transaction() as tx:
            tx.enqueue_notice(run.id, "notice", platform="discord", conversation="42",
                              payload={"event": "failed"}, dedupe=f"{run.id}:failed:discord:42")
    [row] = store.outbox.deliveries(run.id)
    assert (row.kind, row.platform, row.conversation, row.thread) == ("notice", "discord", "42", None)
    assert row.payload == {"event": "failed"} and row.dedupe == f"{run.id}:failed:discord:42"


def test_a_notice_due_later_is_not_claimed_before(store: Store, make_run: MakeRun, clock: Clock) -> None:
    run = make_run(RunStatus.FAILED)
    with store.transaction() as tx:
        tx.enqueue_notice(run.id, "notice_digest", platform="slack", conversation="C2", payload={},
                          dedupe="digest:1", due_at=clock.now + 600)
    assert store.outbox.claim_deliveries("a", ["slack"], lease_seconds=30) == []
    clock.advance(601)
    [row] = store.outbox.claim_deliveries("a", ["slack"], lease_seconds=30)
    assert row.kind == "notice_digest"


def test_a_notice_neither_waits_for_the_runs_replies_nor_holds_them_up(
    store: Store, make_run: MakeRun
) -> None:
    run = make_run(RunStatus.RUNNING, platform="slack", conversation="CDEV")
    with store.transaction() as tx:
        tx.transition(Transition(run.id, RunStatus.FAILED, actor="engine", allowed_from=[RunStatus.RUNNING]))
        tx.enqueue_delivery(run.id, "run_finished", {"status": "failed"})
        tx.enqueue_notice(run.id, "notice", platform="slack", conversation="C0OPS", payload={}, dedupe="n1")
    claimed = store.outbox.claim_deliveries("a", ["slack"], lease_seconds=30)
    assert {(r.kind, r.conversation) for r in claimed} == {("run_finished", "CDEV"), ("notice", "C0OPS")}


def test_a_notice_is_undone_with_its_unit(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.FAILED)
    with pytest.raises(RuntimeError), store.transaction() as tx:
        tx.enqueue_notice(run.id, "notice", platform="slack", conversation="C", payload={}, dedupe="k")
        raise RuntimeError("boom")
    assert store.outbox.deliveries(run.id) == []
