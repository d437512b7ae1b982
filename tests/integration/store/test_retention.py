"""Retention on every store (the contract): what may be pruned (over, unpinned, no run resumed
from it, older than the cut-off), what a prune deletes in one transaction and what it keeps (the
audit trail, blobs something else still references), tombstones that answer for a pruned id,
the blob sweep's grace period, and pins."""

from __future__ import annotations

import pytest

from core.errors import RunNotFound, RunPruned
from core.store.port import StepEntry, Store
from core.store.records import GateVote, NodeStatus, PruneCounts, RunStatus
from tests.integration.store.conftest import Clock, MakeRun

DAY = 86_400.0


def _history(store: Store, run_id: str, output: bytes, artifact: bytes) -> tuple[str, str]:
    """A step with an output and an artifact, a decided gate with a vote and a deadline, and an
    outbox row: everything a prune must take with the run."""
    entry = store.steps.journal_start(StepEntry(
        run_id=run_id,
        node_id="build",
        cache_key="k-" + run_id,
        components={},
        attempt=1,
        idempotency_key=None,
    ))
    out, art = store.blobs.put_blob(output), store.blobs.put_blob(artifact)
    store.steps.journal_finish(
        entry, status=NodeStatus.COMPLETED, output_digest=out, artifacts={"dist/a.whl": art}
    )
    gate = store.gates.open_gate(run_id, "review", "ok?")
    store.ballots.cast_vote(
        GateVote(run_id, "review", gate.created_at, "slack:U1", "approve", gate.created_at + 1)
    )
    store.ballots.plan_deadlines(run_id, "review", gate.created_at, [("timeout", gate.created_at + 60)])
    with store.transaction() as tx:
        tx.enqueue_delivery(run_id, "run_finished", {"status": "completed"})
    store.events.audit(actor="slack:U1", action="approve", run_id=run_id)
    return out, art


def test_only_old_runs_at_rest_and_over_are_prunable(store: Store, make_run: MakeRun, clock: Clock) -> None:
    over = {s: make_run(s) for s in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)}
    kept = [
        make_run(s)
        for s in (RunStatus.PAUSED, RunStatus.RUNNING, RunStatus.NEEDS_ATTENTION, RunStatus.PENDING)
    ]
    cut = clock.now + 1
    clock.advance(10)
    young = make_run(RunStatus.COMPLETED)
    found = store.retention.prunable_runs(cut)
    assert set(found) == {r.id for r in over.values()}
    assert young.id not in found and not {r.id for r in kept} & set(found)
    assert store.retention.prunable_runs(cut, limit=2) == found[:2]  # oldest first, bounded


def test_a_pinned_run_and_a_run_something_was_resumed_from_stay(
    store: Store, make_run: MakeRun, clock: Clock
) -> None:
    pinned = make_run(RunStatus.COMPLETED)
    parent = make_run(RunStatus.FAILED)
    child = make_run(RunStatus.COMPLETED, resumed_from=parent.id)
    assert store.retention.pin_run(
        pinned.id, "slack:U1"
    ) and not store.retention.pin_run(pinned.id, "slack:U2")
    assert store.retention.is_pinned(pinned.id)
    clock.advance(10)
    assert store.retention.prunable_runs(clock.now) == [child.id]  # the parent waits for its child
    assert store.retention.prune_runs([pinned.id, parent.id, child.id]).runs == 1  # decided again inside
    assert store.retention.prunable_runs(clock.now) == [parent.id]
    assert store.retention.unpin_run(pinned.id) and not store.retention.unpin_run(pinned.id)
    assert set(store.retention.prunable_runs(clock.now)) == {parent.id, pinned.id}


def test_a_child_run_stays_while_the_run_whose_step_started_it_exists(
    store: Store, make_run: MakeRun, clock: Clock
) -> None:
    """A paused parent finds its completed child again on resume; the parent goes first."""
    waiting = make_run(RunStatus.PAUSED)
    finished = make_run(RunStatus.COMPLETED)
    kept = make_run(RunStatus.COMPLETED, parent_run=waiting.id, parent_node="each[0]")
    later = make_run(RunStatus.COMPLETED, parent_run=finished.id, parent_node="call")
    clock.advance(10)
    assert set(store.retention.prunable_runs(clock.now)) == {finished.id}
    assert store.retention.prune_runs([kept.id, finished.id, later.id]).runs == 1  # decided again inside
    assert set(store.retention.prunable_runs(clock.now)) == {later.id}  # its parent is gone now
    assert store.retention.prune_runs([later.id]).runs == 1
    assert store.retention.prunable_runs(clock.now) == []


def test_a_prune_deletes_the_runs_history_keeps_the_audit_and_leaves_a_tombstone(
    store: Store, make_run: MakeRun, clock: Clock
) -> None:
    run = make_run(RunStatus.COMPLETED)
    other = make_run(RunStatus.COMPLETED)
    _history(store, run.id, b"out-1", b"wheel-1")
    _history(store, other.id, b"out-2", b"wheel-2")
    expected = PruneCounts(runs=1, journal=1, gates=1, votes=1, deadlines=1, outbox=1)
    assert store.retention.prune_counts([run.id]) == expected  # the dry run
    assert store.runs.get_run(run.id) == run  # … deleted nothing
    assert store.retention.prune_runs([run.id]) == expected
    with pytest.raises(RunPruned) as pruned:
        store.runs.get_run(run.id)
    assert "pruned on" in pruned.value.message and run.workflow in pruned.value.message
    with pytest.raises(RunPruned):
        store.runs.find_run(run.id[:6])
    assert isinstance(pruned.value, RunNotFound)  # old callers still see "no such run"
    assert store.steps.journal(
        [run.id]
    ) == [] and store.gates.run_gates(run.id) == [] and store.outbox.deliveries(run.id) == []
    assert [e.action for e in store.events.audit_log(run.id)][-1] == "approve"  # audit has its own retention
    # the other run is untouched
    assert len(store.steps.journal([other.id])) == 1 and len(store.outbox.deliveries(other.id)) == 1
    assert store.retention.prune_runs([run.id]) == PruneCounts()  # twice: nothing more
    assert store.retention.pruned_among([run.id, other.id, "no-such-run"]) == {run.id}  # its tombstone
    assert store.retention.pruned_among([]) == set()


def test_the_blob_sweep_keeps_shared_blobs_and_waits_out_its_grace(
    store: Store, make_run: MakeRun, clock: Clock
) -> None:
    shared_args = store.blobs.put_blob(b'{"message":"shared"}')
    run = make_run(RunStatus.COMPLETED, args_digest=shared_args)
    keeper = make_run(RunStatus.COMPLETED, args_digest=shared_args)  # same args: the blob is shared
    out, art = _history(store, run.id, b"only-mine", b"my-wheel")
    shared_out, _ = _history(store, keeper.id, b"shared-output", b"other-wheel")
    entry = store.steps.journal_start(StepEntry(
        run_id=run.id, node_id="x", cache_key="kx", components={}, attempt=1, idempotency_key=None
    ))
    store.steps.journal_finish(entry, status=NodeStatus.COMPLETED, output_digest=shared_out)
    button = store.blobs.put_blob(b"approve abc123 --a-long-button-command")  # referenced by no table
    store.retention.prune_runs([run.id])
    marked = clock.now
    assert store.retention.sweep_blobs(marked - 1) == 0  # inside the grace period: nothing goes
    clock.advance(3600)
    assert store.retention.sweep_blobs(clock.now) == 2  # its own output and artifact
    for gone in (out, art):
        with pytest.raises(KeyError):
            store.blobs.get_blob(gone)
    for kept in (shared_args, shared_out, button):
        assert store.blobs.get_blob(kept)
    assert store.retention.sweep_blobs(clock.now) == 0  # candidates are unmarked once swept


def test_a_blob_referenced_again_before_the_sweep_stays(
    store: Store, make_run: MakeRun, clock: Clock
) -> None:
    args = store.blobs.put_blob(b'{"message":"again"}')
    run = make_run(RunStatus.COMPLETED, args_digest=args)
    store.retention.prune_runs([run.id])
    make_run(RunStatus.PENDING, args_digest=args)  # a new run with the same args, after the prune
    clock.advance(3600)
    assert store.retention.sweep_blobs(clock.now) == 0
    assert store.blobs.get_blob(args)


def test_pinning_an_unknown_or_pruned_run_is_refused(store: Store, make_run: MakeRun) -> None:
    with pytest.raises(RunNotFound):
        store.retention.pin_run("000000000000", "slack:U1")
    run = make_run(RunStatus.CANCELLED)
    store.retention.prune_runs([run.id])
    with pytest.raises(RunPruned):
        store.retention.pin_run(run.id, "slack:U1")


def test_old_audit_rows_are_forgotten_on_their_own_clock(
    store: Store, make_run: MakeRun, clock: Clock
) -> None:
    run = make_run(RunStatus.COMPLETED)
    store.events.audit(actor="a", action="old", run_id=run.id)
    clock.advance(40 * DAY)
    store.events.audit(actor="a", action="new", run_id=run.id)
    assert store.retention.count_audit(clock.now - 30 * DAY) == 1
    assert store.retention.forget_audit(clock.now - 30 * DAY) == 1
    assert store.retention.count_audit(clock.now - 30 * DAY) == 0
    assert [e.action for e in store.events.audit_log(run.id)] == ["new"]
    assert store.runs.get_run(run.id) == run
