"""The combined writes of chat commands (issue 8): each does what two or three single calls
did, all or nothing, with the same compare-and-swap outcomes, on SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib

import pytest
import sqlalchemy as sa

from core.errors import GateAlreadyDecided, RunNotResumable
from core.store.records import GateStatus, RunStatus
from core.store.repository import SqlStore
from core.store.tables import RUNS
from tests.integration.store.conftest import Clock, MakeRun


def test_create_run_audited_stores_args_run_and_start_row(store: SqlStore) -> None:
    args = b'{"message":"hi"}'
    run = store.create_run_audited(
        args=args, audit_details={"workflow": "w", "args": "args:x"}, workflow="w", platform="slack",
        conversation="C1", thread="T1", requester="slack:U1", status=RunStatus.RUNNING,
        lease_owner="engine:1", lease_seconds=30, origin_event="slack:Ev1",
    )  # fmt: skip
    assert run.args_digest == hashlib.sha256(args).hexdigest()
    assert store.get_blob(run.args_digest) == args
    assert store.get_run(run.id) == run
    assert (run.status, run.version, run.lease_owner, run.status_by) == (
        RunStatus.RUNNING, 1, "engine:1", "slack:U1",
    )  # fmt: skip
    assert store.run_for_event("slack:Ev1") == run
    [entry] = store.audit_log(run.id)
    assert (entry.actor, entry.action) == ("slack:U1", "start")
    assert entry.details == {"workflow": "w", "args": "args:x"}
    again = store.create_run_audited(  # the same args: the blob is shared, the run is new
        args=args, audit_details={}, workflow="w", platform="slack", conversation="C1", thread=None,
        requester="slack:U1",
    )  # fmt: skip
    assert again.id != run.id and again.args_digest == run.args_digest


def test_command_runs_is_run_for_event_and_unfinished_runs(store: SqlStore, make_run: MakeRun) -> None:
    first = make_run(RunStatus.PAUSED, origin_event="slack:Ev1")
    make_run(RunStatus.RUNNING, origin_event="slack:Ev1")  # a later one from the same event
    failed = make_run(RunStatus.FAILED)
    make_run(RunStatus.COMPLETED)
    make_run(RunStatus.FAILED, workflow="other")
    make_run(RunStatus.FAILED, conversation="C2")
    for event in ("slack:Ev1", "slack:Ev2"):
        started, unfinished = store.command_runs(event, "release-notes", "slack", "C1")
        assert started == store.run_for_event(event)
        assert unfinished == store.unfinished_runs("release-notes", "slack", "C1")
    assert store.command_runs("slack:Ev1", "release-notes", "slack", "C1") == (first, [failed, first])


def test_approve_gate_decides_resumes_and_audits(store: SqlStore, make_run: MakeRun) -> None:
    run = make_run(RunStatus.PAUSED)
    store.open_gate(run.id, "review", "ship?")
    gate, running = store.approve_gate(
        run, "review", by="slack:U2", comment="lgtm", lease_owner="engine:2", lease_seconds=30
    )
    assert (gate.status, gate.decided_by, gate.comment) == (GateStatus.APPROVED, "slack:U2", "lgtm")
    assert gate == store.get_gate(run.id, "review")
    assert (running.status, running.version, running.status_by, running.lease_owner) == (
        RunStatus.RUNNING, run.version + 1, "slack:U2", "engine:2",
    )  # fmt: skip
    assert running == store.get_run(run.id)
    assert [(a.actor, a.action, a.details) for a in store.audit_log(run.id)] == [
        ("slack:U2", "approve", {"node": "review", "comment": "lgtm"})
    ]
    with pytest.raises(GateAlreadyDecided, match="already approved by slack:U2") as lost:
        store.approve_gate(run, "review", by="slack:U3", comment=None, lease_owner="e", lease_seconds=30)
    assert lost.value.by == "slack:U2"
    assert store.get_run(run.id) == running and len(store.audit_log(run.id)) == 1


def test_approve_gate_of_a_run_that_moved_leaves_the_gate_waiting(store: SqlStore, make_run: MakeRun) -> None:
    run = make_run(RunStatus.PAUSED)
    store.open_gate(run.id, "review", "ship?")
    cancelled = store.transition(run.id, RunStatus.CANCELLED, actor="slack:U9", reason="dropped")
    with pytest.raises(RunNotResumable, match=r"cancelled \(cancelled by slack:U9\) and cannot be resumed"):
        store.approve_gate(run, "review", by="slack:U2", comment=None, lease_owner="e", lease_seconds=30)
    gate = store.get_gate(run.id, "review")
    assert (gate.status, gate.decided_by, gate.decided_at) == (GateStatus.WAITING, None, None)
    assert store.get_run(run.id) == cancelled and store.audit_log(run.id) == []


def test_approve_gate_with_a_stale_run_loses_the_cas(store: SqlStore, make_run: MakeRun) -> None:
    run = make_run(RunStatus.PAUSED)
    store.open_gate(run.id, "review", "ship?")
    stale = run.evolve(version=run.version - 1)
    with pytest.raises(RunNotResumable, match="changed while you acted on it"):
        store.approve_gate(stale, "review", by="slack:U2", comment=None, lease_owner="e", lease_seconds=30)
    assert store.get_gate(run.id, "review").status is GateStatus.WAITING
    assert store.get_run(run.id) == run and store.audit_log(run.id) == []


def test_finish_event_audited_marks_done_and_audits_once(store: SqlStore, make_run: MakeRun) -> None:
    run = make_run()
    assert store.claim_event("slack", "Ev1") is True
    store.finish_event_audited(
        "slack", "Ev1", actor="slack:U1", action="command", run_id=run.id, details={"command": "status"}
    )
    assert store.claim_event("slack", "Ev1", stale_after=0) is False  # handled: a duplicate now
    assert [(a.actor, a.action, a.details) for a in store.audit_log(run.id)] == [
        ("slack:U1", "command", {"command": "status"})
    ]


def test_the_redelivery_check_uses_the_origin_event_index(store: SqlStore, make_run: MakeRun) -> None:
    """Most runs have no origin event; after ANALYZE a full index on it looked useless to
    SQLite's planner, which then scanned every run for each `run` command (revision 0005)."""
    run = make_run()
    same = {f: getattr(run, f) for f in ("workflow", "platform", "conversation", "requester", "args_digest")}
    rows = [
        {**same, "id": f"h{i:011x}", "status": "completed", "version": 3, "created_at": i, "updated_at": i}
        for i in range(3000)
    ]
    make_run(origin_event="slack:Ev1")
    with store._engine.begin() as conn:
        conn.execute(sa.insert(RUNS), rows)
        conn.execute(sa.text("ANALYZE"))
    query = "SELECT * FROM runs WHERE origin_event = 'slack:Ev1' ORDER BY created_at LIMIT 1"
    explain = "EXPLAIN QUERY PLAN " if store.dialect == "sqlite" else "EXPLAIN "
    with store._engine.connect() as conn:
        plan = " ".join(str(row) for row in conn.execute(sa.text(explain + query)))
    assert "ix_runs_origin_event" in plan, plan


def test_approve_gate_that_loses_the_run_cas_undoes_its_own_decision_only(
    store: SqlStore, make_run: MakeRun, clock: Clock
) -> None:
    """The undo of a lost approval is a CAS on this very decision, comment included (bound
    values, so a comment with quotes or % is just text)."""
    run = make_run(RunStatus.PAUSED)
    store.open_gate(run.id, "review", "ship?")
    store.transition(run.id, RunStatus.CANCELLED, actor="slack:U9", reason="dropped")
    comment = "it's 100% fine'); DROP TABLE gates; --"
    with pytest.raises(RunNotResumable):
        store.approve_gate(run, "review", by="slack:U2", comment=comment, lease_owner="e", lease_seconds=30)
    gate = store.get_gate(run.id, "review")
    assert (gate.status, gate.decided_by, gate.comment, gate.decided_at) == (
        GateStatus.WAITING,
        None,
        None,
        None,
    )
    other = make_run(RunStatus.PAUSED)
    store.open_gate(other.id, "review", "ship?")
    clock.advance(1)
    gate, _ = store.approve_gate(
        other, "review", by="slack:U2", comment=comment, lease_owner="e", lease_seconds=30
    )
    assert gate.comment == comment and store.get_gate(other.id, "review") == gate


def test_waiting_gates_and_args_reads_an_approval_in_one_query(
    store: SqlStore, make_run: MakeRun, clock: Clock
) -> None:
    args = b'{"message":"ship it"}'
    run = store.create_run_audited(
        args=args, audit_details={}, workflow="w", platform="slack", conversation="C1", thread=None,
        requester="slack:U1", status=RunStatus.RUNNING, lease_owner="e", lease_seconds=30,
    )  # fmt: skip
    run = store.transition(run.id, RunStatus.PAUSED, actor="e")
    assert store.waiting_gates_and_args(run) == ([], args)
    first = store.open_gate(run.id, "first", "one?")
    clock.advance(1)
    second = store.open_gate(run.id, "second", "two?")
    clock.advance(1)
    decided = store.open_gate(run.id, "third", "three?")
    store.decide_gate(run.id, decided.node_id, approved=False, by="slack:U3", comment=None)
    neighbour = make_run(RunStatus.PAUSED)  # a gate waiting in the same conversation
    store.open_gate(neighbour.id, "first", "one?")
    assert store.waiting_gates_and_args(run) == ([second, first], args)
    gates = [g for r, g in store.waiting_gates(platform="slack", conversation="C1") if r.id == run.id]
    assert gates == [second, first]  # what the chat layer read before, newest first
    with pytest.raises(KeyError):
        store.waiting_gates_and_args(run.evolve(args_digest="0" * 64))
