"""`RunExecutor` on `MemoryStore` with the `LocalStepRunner`: ordering, templates, the cache
within a run and across its lineage, retries, replay rules at recovery, approvals and the
journal it leaves. No database, no subprocess."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.engine.journal_writer import INTERRUPTED
from core.store.port import StepEntry
from core.store.records import NodeStatus, RunStatus
from tests.unit.engine.memory_rig import Rig

CHAIN = """
    name: chain
    nodes:
      - id: a
        tool: first
      - id: b
        depends_on: [a]
        tool: second
        with: {text: "{{ nodes.a.output }}"}
      - id: c
        depends_on: [b]
        tool: third
        with: {text: "{{ nodes.b.output }}"}
"""


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    rig = Rig(tmp_path)
    for name in ("first", "second", "third"):
        rig.counted(name)
    return rig


async def test_a_chain_runs_in_order_each_step_reading_the_last_output(rig: Rig) -> None:
    workflow = rig.workflow(CHAIN)
    run = rig.run(workflow)
    outcome = await rig.executor(workflow, run).execute()
    assert outcome.status is RunStatus.COMPLETED
    entries = rig.store.steps.journal([run.id])
    assert [(e.node_id, e.status) for e in entries] == [(n, NodeStatus.COMPLETED) for n in "abc"]
    assert rig.store.blobs.get_blob(entries[-1].output_digest or "") == b"third(second(first()))"
    assert [str(e.kind) for e in rig.events if e.node_id == "b"] == [
        "node_queued", "node_started", "node_completed",
    ]  # fmt: skip


async def test_a_second_execution_of_the_run_reuses_what_it_did(rig: Rig) -> None:
    workflow = rig.workflow(CHAIN)
    run = rig.run(workflow)
    await rig.executor(workflow, run).execute()
    again = await rig.executor(workflow, run).execute()
    assert again.status is RunStatus.COMPLETED
    assert rig.calls == {"first": 1, "second": 1, "third": 1}
    assert len(rig.store.steps.journal([run.id])) == 3  # nothing journaled twice


async def test_a_resumed_run_copies_its_lineages_results_and_runs_only_what_changed(rig: Rig) -> None:
    old_flow = rig.workflow(CHAIN)
    old = rig.run(old_flow)
    await rig.executor(old_flow, old).execute()
    edited = rig.workflow(CHAIN.replace('"{{ nodes.b.output }}"', '"edited {{ nodes.b.output }}"'))
    new = rig.run(edited, resumed_from=old.id)
    assert (await rig.executor(edited, new).execute()).status is RunStatus.COMPLETED
    assert rig.calls == {"first": 1, "second": 1, "third": 2}
    copied = {e.node_id: e for e in rig.store.steps.journal([new.id])}
    assert [copied[n].cached_from for n in "abc"] == [old.id, old.id, None]
    cached = [e.node_id for e in rig.events if str(e.kind) == "node_cached" and e.run_id == new.id]
    assert cached == ["a", "b"]


async def test_a_failing_step_is_retried_then_fails_the_run_with_its_first_line(rig: Rig) -> None:
    rig.counted("flaky", fail=5)
    workflow = rig.workflow("""
        name: flaky
        nodes:
          - id: f
            tool: flaky
            replay: pure
            retry: {attempts: 2, backoff: 0}
          - id: after
            depends_on: [f]
            tool: first
    """)
    run = rig.run(workflow)
    outcome = await rig.executor(workflow, run).execute()
    assert (outcome.status, outcome.node_id) == (RunStatus.FAILED, "f")
    assert outcome.reason == "tool `flaky` raised RuntimeError: flaky broke (call 2)"
    entries = rig.store.steps.journal([run.id])
    assert [(e.node_id, e.attempt, e.status) for e in entries] == [
        ("f", 1, NodeStatus.FAILED), ("f", 2, NodeStatus.FAILED),
    ]  # fmt: skip
    assert rig.calls["first"] == 0  # nothing after a failed step starts
    retrying = [e.detail.get("retrying") for e in rig.events if str(e.kind) == "node_failed"]
    assert retrying == [True, None]


async def test_a_retried_step_that_recovers_completes_the_run(rig: Rig) -> None:
    rig.counted("flaky", fail=1)
    workflow = rig.workflow("""
        name: flaky
        nodes:
          - id: f
            tool: flaky
            replay: pure
            retry: {attempts: 3, backoff: 0}
    """)
    run = rig.run(workflow)
    assert (await rig.executor(workflow, run).execute()).status is RunStatus.COMPLETED
    assert [(e.attempt, e.status) for e in rig.store.steps.journal([run.id])] == [
        (1, NodeStatus.FAILED), (2, NodeStatus.COMPLETED),
    ]  # fmt: skip


def _orphan(rig: Rig, run_id: str, node_id: str, key: str = "k-old") -> int:
    """A `started` entry left by a process that stopped."""
    entry = StepEntry(
        run_id=run_id, node_id=node_id, cache_key=key, components={}, attempt=1, idempotency_key=None
    )
    return rig.store.steps.journal_start(entry)


async def test_an_unsafe_step_left_started_is_not_run_again_the_run_needs_attention(rig: Rig) -> None:
    rig.counted("send", replay="unsafe")
    workflow = rig.workflow("""
        name: mail
        nodes:
          - id: send
            tool: send
    """)
    run = rig.run(workflow)
    entry_id = _orphan(rig, run.id, "send")
    outcome = await rig.executor(workflow, run).execute()
    assert (outcome.status, outcome.node_id) == (RunStatus.NEEDS_ATTENTION, "send")
    assert "`send` may have run" in (outcome.reason or "")
    assert rig.calls["send"] == 0
    [entry] = rig.store.steps.journal([run.id])
    assert (entry.id, entry.status) == (entry_id, NodeStatus.STARTED)  # left for a person to resolve
    assert rig.kinds("send") == ["node_attention"]


async def test_a_pure_step_left_started_is_marked_interrupted_and_run_again(rig: Rig) -> None:
    workflow = rig.workflow(CHAIN)
    run = rig.run(workflow)
    _orphan(rig, run.id, "a")
    assert (await rig.executor(workflow, run).execute()).status is RunStatus.COMPLETED
    assert rig.calls["first"] == 1
    first, *_ = rig.store.steps.journal([run.id])
    assert (first.node_id, first.status) == ("a", NodeStatus.FAILED)
    assert first.error == INTERRUPTED.format(cls="pure")


async def test_pure_results_wait_for_their_group_commit_and_are_all_journaled_at_the_end(rig: Rig) -> None:
    workflow = rig.workflow(CHAIN)
    run = rig.run(workflow)
    executor = rig.executor(workflow, run, group_commit=60.0)  # the window never closes by itself
    assert (await executor.execute()).status is RunStatus.COMPLETED
    assert len(executor.x.journal) == 0
    assert [e.status for e in rig.store.steps.journal([run.id])] == [NodeStatus.COMPLETED] * 3


async def test_an_approval_opens_its_gate_and_an_approved_one_completes_with_the_decision(rig: Rig) -> None:
    workflow = rig.workflow("""
        name: gated
        nodes:
          - id: a
            tool: first
          - id: ok
            depends_on: [a]
            approval: "Ship {{ nodes.a.output }}?"
          - id: ship
            depends_on: [ok]
            tool: second
            with: {text: "{{ nodes.ok.output.by }}"}
    """)
    run = rig.run(workflow)
    waiting = await rig.executor(workflow, run).execute()
    assert (waiting.status, waiting.node_id, waiting.reason) == (
        RunStatus.PAUSED, "ok", "waiting for approval at `ok`",
    )  # fmt: skip
    gate = rig.store.gates.get_gate(run.id, "ok")
    assert gate.prompt == "Ship first()?"
    with rig.store.transaction() as tx:
        tx.decide_gate(run.id, "ok", approved=True, by="console:bo", comment=None)
    done = await rig.executor(workflow, run).execute()
    assert done.status is RunStatus.COMPLETED
    assert rig.store.blobs.get_blob(
        rig.store.steps.journal([run.id])[-1].output_digest or ""
    ) == b"second(console:bo)"


async def test_a_person_cancelling_settles_the_running_step_with_their_note(rig: Rig) -> None:
    started = asyncio.Event()

    @rig.tools.tool("wait", replay="unsafe")
    async def wait() -> str:
        started.set()
        await asyncio.sleep(60)
        return "never"

    workflow = rig.workflow("""
        name: slow
        nodes:
          - id: w
            tool: wait
    """)
    run = rig.run(workflow)
    executor = rig.executor(workflow, run)
    task = asyncio.create_task(executor.execute())
    await started.wait()
    executor.cancel_note = "cancelled by console:bo"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [entry] = rig.store.steps.journal([run.id])
    assert (entry.status, entry.error) == (NodeStatus.FAILED, "cancelled by console:bo")


async def test_an_engine_stop_leaves_the_running_step_open_for_recovery(rig: Rig) -> None:
    started = asyncio.Event()

    @rig.tools.tool("wait", replay="unsafe")
    async def wait() -> str:
        started.set()
        await asyncio.sleep(60)
        return "never"

    workflow = rig.workflow("""
        name: slow
        nodes:
          - id: w
            tool: wait
    """)
    run = rig.run(workflow)
    task = asyncio.create_task(rig.executor(workflow, run).execute())
    await started.wait()
    task.cancel()  # no note: the process is stopping
    with pytest.raises(asyncio.CancelledError):
        await task
    [entry] = rig.store.steps.journal([run.id])
    assert entry.status is NodeStatus.STARTED
