"""The engine's every way into `running` goes through admission (a new run, `resume_from`, a
resume, an approval of a run that gave its slot back), a queued run starts by itself when a
slot frees, a caller may pass its own key (a schedule's), and cancelling a queued run takes it
out of the queue. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio

import pytest

from core.engine.engine import Created, RunStart, Starting
from core.engine.events import EventKind
from core.errors import ConcurrencyLimitReached, FireAlreadyRecorded, RunNotResumable, UnknownWorkflow
from core.store.records import Concurrency, Fire, FireOutcome, OnLimit, Run, RunStatus, Schedule
from core.store.repository import SqlStore
from core.store.unit_of_work import UnitOfWork
from tests.integration.engine.harness import Harness

GATED = """
name: {name}
concurrency:
  key: deploy-{{{{ inputs.env }}}}
  limit: 1
  hold_while_paused: {hold}
inputs:
  env: {{type: string, default: prod}}
nodes:
  - id: work
    bash: echo worked
    replay: pure
  - id: review
    depends_on: [work]
    approval: "ship?"
"""

FLAKY = """
name: flaky
concurrency: {{limit: 1}}
nodes:
  - id: once
    bash: "[ -f {flag} ] && echo fixed"
    replay: pure
"""


async def settled(h: Harness, run_id: str, status: RunStatus) -> None:
    for _ in range(300):
        if h.store.runs.get_run(run_id).status is status:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{run_id} is {h.store.runs.get_run(run_id).status}, not {status}")


@pytest.fixture
async def started(db_harness: Harness) -> Harness:
    await db_harness.engine.start()
    db_harness.write("ship.yaml", GATED.format(name="ship", hold="true"))
    db_harness.write("ship-loose.yaml", GATED.format(name="ship-loose", hold="false"))
    return db_harness


async def test_a_queued_run_starts_by_itself_when_the_holder_rests(started: Harness) -> None:
    h = started
    holder = await h.run("ship")
    assert holder.status is RunStatus.PAUSED  # holds the slot at its gate
    waiting = await h.start("ship", {"env": "prod"})
    other_key = await h.start("ship", {"env": "staging"})
    assert waiting.status is RunStatus.QUEUED and other_key.status is RunStatus.RUNNING
    assert h.kinds(waiting.id, EventKind.RUN_QUEUED) == [None]
    await h.engine.abandon(holder.id, actor="console:ana")
    await settled(h, waiting.id, RunStatus.PAUSED)  # admitted, started here, ran to its gate
    assert h.kinds(waiting.id, EventKind.RUN_STARTED) == [None]


async def test_approving_a_run_that_gave_its_slot_back_queues_it(started: Harness) -> None:
    h = started
    first = await h.run("ship-loose")
    second = await h.run("ship-loose")
    assert (first.status, second.status) == (RunStatus.PAUSED, RunStatus.PAUSED)  # neither holds it
    holder = await h.run("ship")  # the same key, and it keeps its slot at its gate
    assert holder.status is RunStatus.PAUSED
    approved = await h.engine.approve(first.id, actor="console:bob")
    assert approved.status is RunStatus.QUEUED  # approved, and waits its turn to continue
    assert h.store.gates.get_gate(first.id, "review").status.value == "approved"
    await h.engine.abandon(holder.id, actor="console:ana")
    await settled(h, first.id, RunStatus.COMPLETED)
    assert h.store.runs.get_run(second.id).status is RunStatus.PAUSED


async def test_resume_and_resume_from_go_through_admission(started: Harness) -> None:
    h = started
    flag = h.root / "fixed"
    h.write("flaky.yaml", FLAKY.format(flag=flag))
    failed = await h.run("flaky")
    assert failed.status is RunStatus.FAILED  # failed runs hold no slot
    h.write("hold.yaml", GATED.format(name="hold", hold="true").replace("deploy-{{ inputs.env }}", "flaky"))
    holder = await h.run("hold")
    assert holder.status is RunStatus.PAUSED
    flag.touch()
    resumed = await h.engine.resume(failed.id, actor="console:ana")
    assert resumed.status is RunStatus.QUEUED
    again = await h.start("flaky", resume_from=failed.id)
    assert again.status is RunStatus.QUEUED
    with pytest.raises(RunNotResumable):  # already waiting for its turn
        await h.engine.resume(failed.id, actor="console:ana")
    await h.engine.abandon(holder.id, actor="console:ana")
    await settled(h, failed.id, RunStatus.COMPLETED)
    await settled(h, again.id, RunStatus.COMPLETED)


async def test_an_explicit_key_and_cancelling_a_queued_run(started: Harness) -> None:
    h = started
    h.write("free.yaml", "name: free\nnodes:\n  - id: a\n    approval: ok?\n")
    mine = Concurrency(key="schedule:nightly", limit=1)
    first = await h.start("free", concurrency=mine)
    await settled(h, first.id, RunStatus.PAUSED)
    second = await h.start("free", concurrency=mine)
    assert second.status is RunStatus.QUEUED and second.concurrency == mine
    assert (await h.start("free")).status is RunStatus.RUNNING  # its own workflow has no limit
    cancelled = await h.engine.cancel(second.id, actor="console:ana")
    assert cancelled.status is RunStatus.CANCELLED
    refusing = Concurrency(key="schedule:nightly", limit=1, on_limit=OnLimit.CANCEL_NEW)
    with pytest.raises(ConcurrencyLimitReached) as refused:
        await h.start("free", concurrency=refusing)
    assert refused.value.run_id == first.id


async def test_runs_started_in_one_batch_run_only_when_their_unit_was_written(started: Harness) -> None:
    """`Engine.start_runs` (a tick's fires): each start its own unit in one commit. A start
    whose `alongside` write lost (a fire another replica recorded) creates nothing and runs
    nothing; one whose workflow is gone is refused alone; the rest are created (a keyed one
    admitted or queued in turn) and then run."""
    h = started
    h.write("free.yaml", "name: free\nnodes:\n  - id: a\n    bash: echo ran\n    replay: pure\n")
    h.store.schedules.add_schedule(SCHEDULE)
    assert h.store.schedules.record_fire(_fire(2.0, None))  # the other replica's

    def fire(due: float) -> Starting:
        def write(tx: UnitOfWork, run: Run) -> None:
            tx.record_fire(_fire(due, run.id))

        return write

    mine = Concurrency(key="schedule:nightly", limit=1)

    def start(workflow: str, due: float, key: Concurrency | None = None) -> RunStart:
        return RunStart(workflow=workflow, args={}, platform="console", conversation="ops", thread=None,
                        requester="console:ana", started_by="schedule:nightly", scheduled_for=due,
                        alongside=fire(due), concurrency=key)  # fmt: skip

    results = await h.engine.start_runs(
        [start("free", 1.0), start("free", 2.0), start("gone", 3.0), start("ship", 4.0, mine),
         start("ship", 5.0, mine)]
    )  # fmt: skip
    first, lost, gone, head, behind = results
    assert isinstance(lost, FireAlreadyRecorded) and isinstance(gone, UnknownWorkflow)
    assert isinstance(first, Run) and isinstance(head, Run) and isinstance(behind, Run)
    assert (head.status, behind.status) == (RunStatus.RUNNING, RunStatus.QUEUED)
    await settled(h, first.id, RunStatus.COMPLETED)
    await settled(h, head.id, RunStatus.PAUSED)
    assert h.store.runs.get_run(behind.id).status is RunStatus.QUEUED
    runs = {r.id for r in h.store.runs.recent_runs(limit=10)}
    assert runs == {first.id, head.id, behind.id}
    assert h.engine.executions.active_ids() <= runs  # nothing runs that was not created
    assert [e.run_id for e in h.events if e.kind is EventKind.RUN_STARTED] == [first.id, head.id]
    fires = {f.due_at: f.run_id for f in h.store.schedules.schedule_fires("nightly", 10)}
    assert fires == {1.0: first.id, 2.0: None, 4.0: head.id, 5.0: behind.id}


async def test_runs_a_batch_created_execute_only_once_each_begins(
    started: Harness, migrated_database_url: str
) -> None:
    """`Engine.create_runs`: the runs are committed (another connection sees them, running, ours)
    and none executes until `Engine.begin` starts it; `start_runs` is both."""
    h = started
    h.write("free.yaml", "name: free\nnodes:\n  - id: a\n    bash: echo ran\n    replay: pure\n")
    starts = [RunStart(workflow="free", args={}, platform="console", conversation="ops", thread=None,
                       requester="console:ana") for _ in range(3)]  # fmt: skip
    created = h.engine.create_runs(starts)
    assert all(isinstance(c, Created) for c in created)
    runs = [c.run for c in created if isinstance(c, Created)]
    with SqlStore(migrated_database_url) as other:
        assert {other.runs.get_run(r.id).status for r in runs} == {RunStatus.RUNNING}
        assert {other.runs.get_run(r.id).lease_owner for r in runs} == {h.engine.owner}
    await asyncio.sleep(0.2)
    assert h.engine.executions.active_ids() == set()
    assert not [e for e in h.events if e.kind is EventKind.RUN_STARTED]
    for c in created:
        assert isinstance(c, Created)
        await h.engine.begin(c)
    for run in runs:
        await settled(h, run.id, RunStatus.COMPLETED)
    assert [e.run_id for e in h.events if e.kind is EventKind.RUN_STARTED] == [r.id for r in runs]


SCHEDULE = Schedule(
    id="nightly", workflow="free", source="chat", cron=None, every=60.0, timezone="UTC", args={},
    overlap="queue", catchup="latest", catchup_window=3600.0, platform="console", conversation="ops",
    principal="console:ana", owner="console:ana", created_at=0.0, updated_at=0.0, evaluated_until=0.0,
)  # fmt: skip


def _fire(due: float, run_id: str | None) -> Fire:
    return Fire(schedule_id="nightly", due_at=due, outcome=FireOutcome.STARTED, at=due, by="r1",
                run_id=run_id, detail={})  # fmt: skip
