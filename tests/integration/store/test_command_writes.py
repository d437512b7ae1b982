"""Units of work: what a chat command writes together (the run and its args and audit row,
an approval, a rejection, a message's audit row with its event) commits all or nothing, with
the same compare-and-swap outcomes as the single calls, on every store."""

from __future__ import annotations

import hashlib

import pytest
import sqlalchemy as sa

from core.errors import GateAlreadyDecided, InvalidTransition, RunNotFound, RunNotResumable
from core.store.port import NewRun, Store, Transition
from core.store.records import GateStatus, NodeStatus, Run, RunStatus
from core.store.tables import RUNS
from tests.integration.store.conftest import Clock, MakeRun


def _approve(store: Store, run: Run, node: str, *, by: str, comment: str | None = None) -> Run:
    """What `Engine.approve` writes: gate CAS, run CAS (paused -> running at `run.version`), audit."""
    with store.transaction() as tx:
        tx.decide_gate(run.id, node, approved=True, by=by, comment=comment)
        resumed = tx.transition(Transition(
            run.id, RunStatus.RUNNING, actor=by, expected_version=run.version,
            allowed_from=[RunStatus.PAUSED], lease_owner="engine:2", lease_seconds=30,
        ))  # fmt: skip
        tx.audit(actor=by, action="approve", run_id=run.id, details={"node": node, "comment": comment})
    return resumed.value


def test_a_new_run_travels_with_its_args_and_start_row(store: Store) -> None:
    args = b'{"message":"hi"}'
    with store.transaction() as tx:
        digest = tx.put_blob(args)
        run = tx.create_run(NewRun(
            workflow="w", platform="slack", conversation="C1", thread="T1", requester="slack:U1",
            args_digest=digest, status=RunStatus.RUNNING, lease_owner="engine:1", lease_seconds=30,
            origin_event="slack:Ev1",
        ))  # fmt: skip
        tx.audit(actor="slack:U1", action="start", run_id=run.id, details={"workflow": "w", "args": "args:x"})
    assert digest == hashlib.sha256(args).hexdigest()
    assert store.blobs.get_blob(digest) == args
    assert store.runs.get_run(run.id) == run
    assert (run.status, run.version, run.lease_owner, run.status_by) == (
        RunStatus.RUNNING, 1, "engine:1", "slack:U1",
    )  # fmt: skip
    assert store.views.command_runs("slack:Ev1", "w", "slack", "C1") == (run, [])
    [entry] = store.events.audit_log(run.id)
    assert (entry.actor, entry.action) == ("slack:U1", "start")
    assert entry.details == {"workflow": "w", "args": "args:x"}
    with store.transaction() as tx:  # the same args: the blob is shared, the run is new
        again = tx.create_run(NewRun(
            workflow="w", platform="slack", conversation="C1", thread=None, requester="slack:U1",
            args_digest=tx.put_blob(args),
        ))  # fmt: skip
    assert again.id != run.id and again.args_digest == run.args_digest


def test_nothing_is_written_when_the_block_raises(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.PAUSED)
    store.gates.open_gate(run.id, "review", "ship?")
    with pytest.raises(ValueError), store.transaction() as tx:
        tx.decide_gate(run.id, "review", approved=True, by="slack:U2", comment=None)
        tx.audit(actor="slack:U2", action="approve", run_id=run.id)
        raise ValueError("changed my mind")
    assert store.gates.get_gate(run.id, "review").status is GateStatus.WAITING
    assert store.events.audit_log(run.id) == []


def test_results_exist_once_the_unit_committed(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.FAILED)
    with store.transaction() as tx:
        moved = tx.transition(Transition(run.id, RunStatus.CANCELLED, actor="slack:U1"))
        with pytest.raises(RuntimeError, match="once its `with` block has ended"):
            _ = moved.value
    assert moved.value == store.runs.get_run(run.id)
    assert moved.value.status is RunStatus.CANCELLED


def test_command_runs_is_the_redelivered_run_and_the_unfinished_ones(
    store: Store, make_run: MakeRun
) -> None:
    first = make_run(RunStatus.PAUSED, origin_event="slack:Ev1")
    make_run(RunStatus.RUNNING, origin_event="slack:Ev1")  # a later one from the same event
    failed = make_run(RunStatus.FAILED)
    make_run(RunStatus.COMPLETED)
    make_run(RunStatus.FAILED, workflow="other")
    make_run(RunStatus.FAILED, conversation="C2")
    assert store.views.command_runs("slack:Ev1", "release-notes", "slack", "C1") == (first, [failed, first])
    assert store.views.command_runs("slack:Ev2", "release-notes", "slack", "C1") == (None, [failed, first])
    assert store.views.command_runs("slack:Ev1", "other", "discord", "C1") == (first, [])


def test_an_approval_decides_resumes_and_audits(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.PAUSED)
    store.gates.open_gate(run.id, "review", "ship?")
    running = _approve(store, run, "review", by="slack:U2", comment="lgtm")
    gate = store.gates.get_gate(run.id, "review")
    assert (gate.status, gate.decided_by, gate.comment) == (GateStatus.APPROVED, "slack:U2", "lgtm")
    assert (running.status, running.version, running.status_by, running.lease_owner) == (
        RunStatus.RUNNING, run.version + 1, "slack:U2", "engine:2",
    )  # fmt: skip
    assert running == store.runs.get_run(run.id)
    assert [(a.actor, a.action, a.details) for a in store.events.audit_log(run.id)] == [
        ("slack:U2", "approve", {"node": "review", "comment": "lgtm"})
    ]
    with pytest.raises(GateAlreadyDecided, match="already approved by slack:U2") as lost:
        _approve(store, run, "review", by="slack:U3")
    assert (lost.value.run_id, lost.value.node_id, lost.value.decision, lost.value.by) == (
        run.id, "review", "approved", "slack:U2",
    )  # fmt: skip
    assert store.runs.get_run(run.id) == running and len(store.events.audit_log(run.id)) == 1


def test_an_approval_of_a_run_that_moved_leaves_the_gate_waiting(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.PAUSED)
    store.gates.open_gate(run.id, "review", "ship?")
    cancelled = store.runs.transition(
        Transition(run.id, RunStatus.CANCELLED, actor="slack:U9", reason="dropped")
    )
    with pytest.raises(RunNotResumable, match=r"cancelled \(cancelled by slack:U9\) and cannot be resumed"):
        _approve(store, run, "review", by="slack:U2")
    gate = store.gates.get_gate(run.id, "review")
    assert (gate.status, gate.decided_by, gate.decided_at) == (GateStatus.WAITING, None, None)
    assert store.runs.get_run(run.id) == cancelled and store.events.audit_log(run.id) == []


def test_an_approval_with_a_stale_run_loses_the_cas(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.PAUSED)
    store.gates.open_gate(run.id, "review", "ship?")
    stale = run.evolve(version=run.version - 1)
    with pytest.raises(RunNotResumable, match="changed while you acted on it"):
        _approve(store, stale, "review", by="slack:U2")
    assert store.gates.get_gate(run.id, "review").status is GateStatus.WAITING
    assert store.runs.get_run(run.id) == run and store.events.audit_log(run.id) == []


def test_a_lost_approval_keeps_a_comment_as_plain_text(store: Store, make_run: MakeRun, clock: Clock) -> None:
    """Values are bound, so a comment with quotes or % is just text, won or lost."""
    run = make_run(RunStatus.PAUSED)
    store.gates.open_gate(run.id, "review", "ship?")
    store.runs.transition(Transition(run.id, RunStatus.CANCELLED, actor="slack:U9", reason="dropped"))
    comment = "it's 100% fine'); DROP TABLE gates; --"
    with pytest.raises(RunNotResumable):
        _approve(store, run, "review", by="slack:U2", comment=comment)
    gate = store.gates.get_gate(run.id, "review")
    assert (gate.status, gate.decided_by, gate.comment, gate.decided_at) == (
        GateStatus.WAITING, None, None, None,
    )  # fmt: skip
    other = make_run(RunStatus.PAUSED)
    store.gates.open_gate(other.id, "review", "ship?")
    clock.advance(1)
    _approve(store, other, "review", by="slack:U2", comment=comment)
    assert store.gates.get_gate(other.id, "review").comment == comment


def test_a_rejection_decides_cancels_notes_and_audits_together(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.PAUSED)
    store.gates.open_gate(run.id, "review", "ship?")

    def reject(by: str) -> Run:
        with store.transaction() as tx:
            tx.decide_gate(run.id, "review", approved=False, by=by, comment="no")
            ended = tx.transition(Transition(run.id, RunStatus.CANCELLED, actor=by, reason="rejected",
                                             allowed_from=[RunStatus.PAUSED]))  # fmt: skip
            tx.journal_note(run_id=run.id, node_id="review", cache_key="", components={"m": 1}, error="no")
            tx.audit(actor=by, action="reject", run_id=run.id, details={"node": "review"})
        return ended.value

    cancelled = reject("slack:U2")
    assert (cancelled.status, cancelled.reason, cancelled.status_by) == (
        RunStatus.CANCELLED, "rejected", "slack:U2",
    )  # fmt: skip
    assert store.gates.get_gate(run.id, "review").status is GateStatus.REJECTED
    [note] = store.steps.journal([run.id])
    assert (note.node_id, note.status, note.error, note.attempt, note.cache_key, note.components) == (
        "review", NodeStatus.FAILED, "no", 0, "", {"m": 1},
    )  # fmt: skip
    assert note.finished_at == note.started_at
    with pytest.raises(GateAlreadyDecided) as lost:  # the second rejection writes nothing
        reject("slack:U3")
    assert (lost.value.decision, lost.value.by) == ("rejected", "slack:U2")
    assert len(store.steps.journal([run.id])) == 1 and len(store.events.audit_log(run.id)) == 1


def test_a_rejection_of_a_run_that_moved_decides_nothing(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.PAUSED)
    store.gates.open_gate(run.id, "review", "ship?")
    store.runs.transition(Transition(run.id, RunStatus.RUNNING, actor="slack:U9"))  # resumed meanwhile
    lost = pytest.raises(InvalidTransition, match=r"is running .* it cannot become cancelled")
    with lost, store.transaction() as tx:
        tx.decide_gate(run.id, "review", approved=False, by="slack:U2", comment=None)
        tx.transition(Transition(run.id, RunStatus.CANCELLED, actor="slack:U2",
                                 allowed_from=[RunStatus.PAUSED]))
        tx.journal_note(run_id=run.id, node_id="review", cache_key="", components={}, error="no")
    assert store.gates.get_gate(run.id, "review").status is GateStatus.WAITING
    assert store.steps.journal([run.id]) == []


def test_closing_a_runs_gates_rejects_only_its_waiting_ones(
    store: Store, make_run: MakeRun, clock: Clock
) -> None:
    run = make_run(RunStatus.PAUSED)
    neighbour = make_run(RunStatus.PAUSED)
    first = store.gates.open_gate(run.id, "first", "one?")
    clock.advance(1)
    store.gates.open_gate(run.id, "second", "two?")
    store.gates.open_gate(run.id, "decided", "three?")
    store.gates.open_gate(neighbour.id, "first", "one?")
    with store.transaction() as tx:
        tx.decide_gate(run.id, "decided", approved=True, by="slack:U1", comment=None)
    with store.transaction() as tx:
        closed = tx.close_gates(run.id, by="slack:U2", comment="dropped")
    assert [(g.node_id, g.status, g.decided_by, g.comment) for g in closed.value] == [
        ("first", GateStatus.REJECTED, "slack:U2", "dropped"),
        ("second", GateStatus.REJECTED, "slack:U2", "dropped"),
    ]
    assert closed.value[0].created_at == first.created_at
    assert store.gates.get_gate(run.id, "decided").status is GateStatus.APPROVED
    assert store.gates.waiting_gate(neighbour.id) is not None
    with store.transaction() as tx:
        again = tx.close_gates(run.id, by="slack:U3", comment=None)  # none waits: nothing, no error
    assert again.value == []


def test_a_unit_naming_an_unknown_run_or_gate_raises_run_not_found(store: Store, make_run: MakeRun) -> None:
    run = make_run(RunStatus.PAUSED)
    with pytest.raises(RunNotFound), store.transaction() as tx:
        tx.decide_gate(run.id, "review", approved=True, by="slack:U2", comment=None)
        tx.audit(actor="slack:U2", action="approve", run_id=run.id)
    with pytest.raises(RunNotFound), store.transaction() as tx:
        tx.transition(Transition("000000000000", RunStatus.CANCELLED, actor="a"))
    assert store.events.audit_log(run.id) == []


def test_a_message_audit_row_travels_with_its_event(store: Store, make_run: MakeRun) -> None:
    run = make_run()
    assert store.events.claim_event("slack", "Ev1") is True
    with store.transaction() as tx:
        tx.audit(actor="slack:U1", action="command", run_id=run.id, details={"command": "status"})
        tx.finish_event("slack", "Ev1")
    assert store.events.claim_event("slack", "Ev1", stale_after=0) is False  # handled: a duplicate now
    assert [(a.actor, a.action, a.details) for a in store.events.audit_log(run.id)] == [
        ("slack:U1", "command", {"command": "status"})
    ]


def test_the_redelivery_check_uses_the_origin_event_index(sql_store: Store, make_sql_run: MakeRun) -> None:
    """Most runs have no origin event; after ANALYZE a full index on it looked useless to
    SQLite's planner, which then scanned every run for each `run` command (revision 0005)."""
    store, make_run = sql_store, make_sql_run
    run = make_run()
    same = {f: getattr(run, f) for f in ("workflow", "platform", "conversation", "requester", "args_digest")}
    rows = [
        {**same, "id": f"h{i:011x}", "status": "completed", "version": 3, "created_at": i, "updated_at": i}
        for i in range(3000)
    ]
    make_run(origin_event="slack:Ev1")
    with store._engine.begin() as conn:  # type: ignore[attr-defined]
        conn.execute(sa.insert(RUNS), rows)
        conn.execute(sa.text("ANALYZE"))
    query = "SELECT * FROM runs WHERE origin_event = 'slack:Ev1' ORDER BY created_at LIMIT 1"
    explain = "EXPLAIN QUERY PLAN " if store.dialect == "sqlite" else "EXPLAIN "  # type: ignore[attr-defined]
    with store._engine.connect() as conn:  # type: ignore[attr-defined]
        plan = " ".join(str(row) for row in conn.execute(sa.text(explain + query)))
    assert "ix_runs_origin_event" in plan, plan
