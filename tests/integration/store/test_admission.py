"""Admission (the store contract): a keyed run is admitted or queued in the unit that creates
or resumes it, and the unit that brings an active run to rest admits the oldest queued one.
Runs on the memory store, SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from core.errors import ConcurrencyLimitReached
from core.store.admission import ADMITTED_OWNER
from core.store.port import NewRun, Store, Transition
from core.store.records import Concurrency, OnLimit, Run, RunStatus
from tests.integration.store.conftest import Clock

OWNER = "local:1:test"


def keyed(key: str = "deploy-prod", **policy: Any) -> Concurrency:
    return Concurrency(key=key, **policy)


def start(
    store: Store, policy: Concurrency | None, *, who: str = "slack:U1", workflow: str = "deploy"
) -> Run:
    """A new run asked `running` with this policy (as `Engine.start_run` asks), read back."""
    digest = store.blobs.put_blob(b"{}")
    with store.transaction() as tx:
        run = tx.create_run(NewRun(workflow=workflow, platform="slack", conversation="C1", thread=None,
                                   requester=who, args_digest=digest, status=RunStatus.RUNNING,
                                   lease_owner=OWNER,
                                   lease_seconds=15.0, concurrency=policy))  # fmt: skip
    return store.runs.get_run(run.id)


def rest(store: Store, run: Run, to: RunStatus = RunStatus.COMPLETED) -> Run:
    return store.runs.transition(Transition(run.id, to, actor="baton", allowed_from=[run.status]))


def statuses(store: Store, *runs: Run) -> list[str]:
    return [store.runs.get_run(r.id).status.value for r in runs]


def actions(store: Store, run: Run) -> list[str]:
    return [e.action for e in store.events.audit_log(run.id)]


def test_limit_admits_up_to_the_limit_and_queues_the_rest(store: Store) -> None:
    runs = [start(store, keyed(limit=2)) for _ in range(4)]
    assert [r.status.value for r in runs] == ["running", "running", "queued", "queued"]
    assert runs[0].lease_owner == OWNER  # the caller executes what it was admitted
    assert runs[2].lease_owner is None and runs[2].queued_at is not None
    assert runs[2].concurrency == keyed(limit=2)
    assert "queued" in actions(store, runs[3])


def test_rest_admits_the_oldest_queued_in_the_same_unit(store: Store) -> None:
    first, second, third = (start(store, keyed()) for _ in range(3))
    assert statuses(store, first, second, third) == ["running", "queued", "queued"]
    rest(store, first, RunStatus.FAILED)  # a failed run holds no slot
    assert statuses(store, first, second, third) == ["failed", "running", "queued"]
    admitted = store.runs.get_run(second.id)
    # admitted for whoever takes it first: its lease has lapsed, recovery starts it
    assert admitted.lease_owner == ADMITTED_OWNER
    assert admitted in store.leases.lapsed_runs(admitted.lease_expires_at + 1)  # type: ignore[operator]
    assert "admitted" in actions(store, second)
    rest(store, admitted)
    assert statuses(store, second, third) == ["completed", "running"]


def test_unkeyed_and_other_keys_are_not_limited(store: Store) -> None:
    start(store, keyed("a"))
    assert start(store, keyed("b")).status is RunStatus.RUNNING
    assert start(store, None).status is RunStatus.RUNNING
    assert start(store, keyed("a")).status is RunStatus.QUEUED


def test_key_shared_across_workflows(store: Store) -> None:
    one = start(store, keyed("deploy-prod"), workflow="deploy")
    other = start(store, keyed("deploy-prod"), workflow="migrate")
    assert other.status is RunStatus.QUEUED
    rest(store, one)
    assert store.runs.get_run(other.id).status is RunStatus.RUNNING


def test_max_queued_refuses_past_it(store: Store) -> None:
    policy = keyed(max_queued=1)
    holder = start(store, policy)
    start(store, policy)
    with pytest.raises(ConcurrencyLimitReached) as refused:
        start(store, policy)
    assert refused.value.why == "max_queued" and refused.value.active == ((holder.id, "running"),)
    assert len([r for r in store.runs.recent_runs(limit=10)]) == 2  # the refused run was never written


def test_cancel_new_refuses_naming_the_active_run(store: Store) -> None:
    policy = keyed(on_limit=OnLimit.CANCEL_NEW)
    holder = start(store, policy)
    with pytest.raises(ConcurrencyLimitReached) as refused:
        start(store, policy)
    assert refused.value.why == "cancel_new" and refused.value.run_id == holder.id
    rest(store, holder)
    assert start(store, policy).status is RunStatus.RUNNING


def test_cancel_running_cancels_the_active_run_and_starts_the_new(store: Store) -> None:
    policy = keyed(on_limit=OnLimit.CANCEL_RUNNING)
    old = start(store, policy)
    new = start(store, policy)
    assert new.status is RunStatus.RUNNING and new.lease_owner == OWNER
    gone = store.runs.get_run(old.id)
    assert gone.status is RunStatus.CANCELLED and new.id in (gone.reason or "")
    assert "cancelled_by_limit" in actions(store, old)
    told = [d for d in store.outbox.deliveries(old.id) if d.kind == "run_finished"]
    assert told and told[0].payload["status"] == "cancelled"


def test_cancel_running_starts_the_new_run_before_those_already_queued(store: Store) -> None:
    """"cancels the oldest active run and starts now": not behind the runs queued by another
    workflow of the key (which, with its own `queue` policy, keep their places)."""
    holder = start(store, keyed(), workflow="ship")
    queued = start(store, keyed(), workflow="deploy")
    new = start(store, keyed(on_limit=OnLimit.CANCEL_RUNNING), workflow="ship")
    assert statuses(store, holder, queued, new) == ["cancelled", "queued", "running"]
    assert new.lease_owner == OWNER


def test_cancel_running_and_replace_queued_spare_other_workflows_runs_of_other_people(store: Store) -> None:
    """A key is a template over inputs: running `grief` with the key of another team's deploy
    must not cancel it. Their runs stay; the new run waits its turn as `queue` would."""
    theirs = start(store, keyed("deploy-staging"), who="slack:ROOT", workflow="deploy")
    griefer = start(store, keyed("deploy-staging", on_limit=OnLimit.CANCEL_RUNNING), who="slack:BOB",
                    workflow="grief")
    assert statuses(store, theirs, griefer) == ["running", "queued"]
    assert "cancelled_by_limit" not in actions(store, theirs)
    own = start(store, keyed("deploy-staging"), who="slack:BOB", workflow="deploy")  # queued behind
    replacer = start(store, keyed("deploy-staging", on_limit=OnLimit.REPLACE_QUEUED), who="slack:BOB",
                     workflow="other")
    # bob's own queued runs go (his, of any workflow); another person's deploy run is never touched
    assert statuses(store, theirs, griefer, own, replacer) == ["running", "cancelled", "cancelled", "queued"]
    mine_too = start(store, keyed("deploy-staging", on_limit=OnLimit.CANCEL_RUNNING), who="slack:ROOT",
                     workflow="deploy")  # the same workflow's policy takes the same workflow's run
    assert statuses(store, theirs, mine_too) == ["cancelled", "running"]


def test_replace_queued_keeps_only_the_newest_queued(store: Store) -> None:
    policy = keyed(on_limit=OnLimit.REPLACE_QUEUED)
    holder = start(store, policy)
    a, b, c = (start(store, policy) for _ in range(3))
    assert statuses(store, holder, a, b, c) == ["running", "cancelled", "cancelled", "queued"]
    rest(store, holder)
    assert store.runs.get_run(c.id).status is RunStatus.RUNNING


def test_paused_holds_its_slot_unless_hold_while_paused_is_false(store: Store) -> None:
    holding = keyed("k1")
    paused = rest(store, start(store, holding), RunStatus.PAUSED)
    waiting = start(store, holding)
    assert waiting.status is RunStatus.QUEUED
    releasing = keyed("k2", hold_while_paused=False)
    gives_back = start(store, releasing)
    behind = start(store, releasing)
    assert behind.status is RunStatus.QUEUED
    gave = rest(store, gives_back, RunStatus.PAUSED)  # waiting at a gate: its slot goes
    assert gave.status is RunStatus.PAUSED and store.runs.get_run(behind.id).status is RunStatus.RUNNING
    # approving it asks a slot again: it queues behind the run now holding it
    back = store.runs.transition(Transition(gave.id, RunStatus.RUNNING, actor="slack:U2",
                                            allowed_from=[RunStatus.PAUSED],
                                            lease_owner=OWNER, lease_seconds=15.0))  # fmt: skip
    assert back.status is RunStatus.QUEUED
    rest(store, store.runs.get_run(behind.id))
    assert store.runs.get_run(gave.id).status is RunStatus.RUNNING
    # the held slot: resuming the paused run of k1 needs no admission
    resumed = store.runs.transition(Transition(paused.id, RunStatus.RUNNING, actor="slack:U1",
                                               allowed_from=[RunStatus.PAUSED], lease_owner=OWNER,
                                               lease_seconds=15.0))
    assert resumed.status is RunStatus.RUNNING and resumed.lease_owner == OWNER


def test_resume_of_a_failed_run_goes_through_admission(store: Store) -> None:
    policy = keyed()
    failed = rest(store, start(store, policy), RunStatus.FAILED)
    holder = start(store, policy)
    again = store.runs.transition(Transition(failed.id, RunStatus.RUNNING, actor="slack:U1",
                                             allowed_from=[RunStatus.FAILED],
                                             lease_owner=OWNER, lease_seconds=15.0))  # fmt: skip
    assert again.status is RunStatus.QUEUED
    rest(store, holder)
    assert store.runs.get_run(failed.id).status is RunStatus.RUNNING


def test_needs_attention_holds_its_slot(store: Store) -> None:
    policy = keyed()
    stuck = rest(store, start(store, policy), RunStatus.NEEDS_ATTENTION)
    assert start(store, policy).status is RunStatus.QUEUED
    rest(store, stuck, RunStatus.CANCELLED)


def test_cancelling_a_queued_run_takes_it_out_of_the_queue(store: Store) -> None:
    policy = keyed()
    holder = start(store, policy)
    a, b = start(store, policy), start(store, policy)
    store.runs.transition(
        Transition(a.id, RunStatus.CANCELLED, actor="slack:U1", allowed_from=[RunStatus.QUEUED])
    )
    rest(store, holder)
    assert statuses(store, a, b) == ["cancelled", "running"]


def test_order_held_over_many_runs(store: Store, clock: Clock) -> None:
    policy = keyed(limit=2)
    runs = []
    for _ in range(8):
        clock.advance(1)
        runs.append(start(store, policy))
    started: list[str] = [r.id for r in runs[:2]]
    active = list(started)
    while active:
        clock.advance(1)
        rest(store, store.runs.get_run(active.pop(0)))
        now_running = [r.id for r in runs if store.runs.get_run(r.id).status is RunStatus.RUNNING]
        for run_id in now_running:
            if run_id not in started:
                started.append(run_id)
                active.append(run_id)
    assert started == [r.id for r in runs]


def test_key_runs_lists_holders_then_the_queue_in_order(store: Store, clock: Clock) -> None:
    policy = keyed(limit=1)
    holder = start(store, policy)
    clock.advance(1)
    a = start(store, policy)
    clock.advance(1)
    b = start(store, policy)
    start(store, keyed("other"))
    rest(store, start(store, keyed("k-done")))
    assert [r.id for r in store.views.key_runs(key="deploy-prod")] == [holder.id, a.id, b.id]
    assert {r.concurrency.key for r in store.views.key_runs() if r.concurrency} == {"deploy-prod", "other"}
    assert [r.id for r in store.views.key_runs(workflow="nope")] == []


def test_queued_runs_reads_those_queued_long_enough_in_order_from_a_place(store: Store, clock: Clock) -> None:
    """What the `queued_long` watch reads: runs still queued that joined at most `up_to`, by
    (queued_at, id) past `after`; an admitted run is no longer among them."""
    holder = start(store, keyed())
    early = start(store, keyed())
    clock.advance(10)
    late = start(store, keyed())
    other = start(store, keyed("deploy-staging"))  # admitted: its key is free
    assert [r.status.value for r in (early, late, other)] == ["queued", "queued", "running"]
    assert [r.id for r in store.views.queued_runs(after=None, up_to=clock.now - 5)] == [early.id]
    both = store.views.queued_runs(after=None, up_to=clock.now + 1)
    assert [r.id for r in both] == [early.id, late.id]
    place = (float(early.queued_at or 0), early.id)
    assert [r.id for r in store.views.queued_runs(after=place, up_to=clock.now + 1)] == [late.id]
    assert [r.id for r in store.views.queued_runs(after=None, up_to=clock.now + 1, limit=1)] == [early.id]
    rest(store, holder)  # the head of the queue is admitted
    assert [r.id for r in store.views.queued_runs(after=None, up_to=clock.now + 1)] == [late.id]
