"""Run-level actions through `Engine` on `MemoryStore`: each refusal carries the run, its
status and what is allowed next; each change is audited with its actor; resolve and
invalidate leave the journal the next execution reads. No database, no subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.engine.engine import Engine
from core.errors import Next, RunNotResumable, RunStateError, UsageError
from core.store.port import StepEntry, Transition
from core.store.records import GateStatus, NodeStatus, RunStatus
from tests.factories import create_run
from tests.unit.engine.memory_rig import Rig

FLOW = """
    name: flow
    nodes:
      - id: a
        tool: first
      - id: b
        depends_on: [a]
        tool: second
        with: {text: "{{ nodes.a.output }}"}
"""
SHAKY = """
    name: shaky
    nodes:
      - id: a
        tool: first
      - id: b
        depends_on: [a]
        tool: flaky
        with: {text: "{{ nodes.a.output }}"}
"""
GATED = """
    name: gated
    nodes:
      - id: ok
        approval: "Ship?"
      - id: ship
        depends_on: [ok]
        tool: first
"""
MAIL = """
    name: mail
    nodes:
      - id: send
        tool: send
        output: {format: json}
      - id: after
        depends_on: [send]
        tool: second
        with: {text: "{{ nodes.send.output.id }}"}
"""


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    rig = Rig(tmp_path)
    rig.counted("first")
    rig.counted("second")
    rig.counted("send", replay="unsafe", value='{"id": 7}')
    rig.counted("flaky", fail=1)
    return rig


@pytest.fixture
async def engine(rig: Rig) -> Engine:
    return rig.engine(flow=FLOW, gated=GATED, mail=MAIL, shaky=SHAKY)


async def _start(engine: Engine, workflow: str) -> str:
    run = await engine.start_run(workflow=workflow, args={}, platform="console", conversation="c1",
                                 thread=None, requester="console:ana")  # fmt: skip
    await engine.wait(run.id, timeout=10)
    return run.id


async def _attention(rig: Rig, engine: Engine) -> str:
    """A `mail` run that failed while its unsafe `send` was in flight (the process died), resumed."""
    earlier = await _start(engine, "mail")  # the step's key and components, as an execution writes them
    sent = next(e for e in rig.store.steps.journal([earlier]) if e.node_id == "send")
    run = create_run(rig.store, workflow="mail", platform="console", conversation="c1", thread=None,
                     requester="console:ana", args_digest=rig.store.blobs.put_blob(
                         b"{}"
                     ), status=RunStatus.RUNNING)
    rig.store.steps.journal_start(StepEntry(run_id=run.id, node_id="send", cache_key=sent.cache_key,
                                  components=sent.components, attempt=1, idempotency_key=None))  # fmt: skip
    rig.store.runs.transition(Transition(run.id, RunStatus.FAILED, actor="baton", reason="the process died"))
    await engine.resume(run.id, actor="console:ana")
    stopped = await engine.wait(run.id, timeout=10)
    assert (stopped.status, stopped.reason) == (
        RunStatus.NEEDS_ATTENTION,
        "step `send` may have run (started, attempt 1, no result recorded);"
        " Baton will not run it again blindly",
    )  # fmt: skip
    return run.id


async def test_resuming_a_completed_run_points_to_a_new_run_from_it(engine: Engine) -> None:
    run_id = await _start(engine, "flow")
    with pytest.raises(RunNotResumable) as refused:
        await engine.resume(run_id, actor="console:bo")
    error = refused.value
    assert (error.run_id, error.status, error.workflow, error.next_step) == (
        run_id, "completed", "flow", Next.REUSE,
    )  # fmt: skip
    assert "/workflow" not in error.message + error.hint


async def test_resuming_a_paused_run_says_decide_its_gate(rig: Rig, engine: Engine) -> None:
    run_id = await _start(engine, "gated")
    with pytest.raises(RunNotResumable) as refused:
        await engine.resume(run_id, actor="console:bo")
    assert (refused.value.status, refused.value.next_step) == ("paused", Next.DECIDE)
    assert "waits for approval at `ok`" in refused.value.message


async def test_cancelling_a_run_at_rest_says_abandon_it(engine: Engine) -> None:
    run_id = await _start(engine, "gated")
    with pytest.raises(RunNotResumable) as refused:
        await engine.cancel(run_id, actor="console:bo")
    assert (refused.value.status, refused.value.next_step) == ("paused", Next.ABANDON)


async def test_abandoning_a_paused_run_closes_its_gate_and_audits_who(rig: Rig, engine: Engine) -> None:
    run_id = await _start(engine, "gated")
    ended = await engine.abandon(run_id, actor="console:bo", reason="not needed")
    assert (ended.status, ended.status_by, ended.reason) == (RunStatus.CANCELLED, "console:bo", "not needed")
    gate = rig.store.gates.get_gate(run_id, "ok")
    assert (gate.status, gate.decided_by) == (GateStatus.REJECTED, "console:bo")
    assert rig.store.events.audit_log(run_id)[-1].action == "abandon"
    assert [e.detail["how"] for e in rig.events if str(e.kind) == "gate_decided"] == ["abandon"]
    with pytest.raises(RunNotResumable) as again:
        await engine.abandon(run_id, actor="console:cy")
    assert (again.value.next_step, again.value.workflow) == (Next.RUN_AGAIN, "gated")


async def test_approving_resumes_the_run_to_completion(rig: Rig, engine: Engine) -> None:
    run_id = await _start(engine, "gated")
    await engine.approve(run_id, actor="console:bo", comment="go")
    done = await engine.wait(run_id, timeout=10)
    assert done.status is RunStatus.COMPLETED
    assert rig.calls["first"] == 1
    assert [a.action for a in rig.store.events.audit_log(run_id)] == ["start", "approve"]


async def test_a_step_resolved_done_gives_its_output_and_the_run_goes_on(rig: Rig, engine: Engine) -> None:
    run_id = await _attention(rig, engine)
    with pytest.raises(UsageError) as bad:
        await engine.resolve(run_id, "send", "done", actor="console:bo")  # json output needs --output
    assert bad.value.command == "resolve"
    await engine.resolve(run_id, "send", "done", actor="console:bo", output='{"id": 9}')
    done = await engine.wait(run_id, timeout=10)
    assert done.status is RunStatus.COMPLETED
    assert rig.calls["send"] == 1  # the earlier run's: never sent again for this one
    last = rig.store.steps.journal([run_id])[-1]
    assert (last.node_id, rig.store.blobs.get_blob(last.output_digest or "")) == ("after", b"second(9)")


async def test_a_step_resolved_failed_fails_the_run(rig: Rig, engine: Engine) -> None:
    run_id = await _attention(rig, engine)
    with pytest.raises(UsageError) as bad:
        await engine.resolve(run_id, "send", "maybe", actor="console:bo")
    assert bad.value.command == "resolve"
    failed = await engine.resolve(run_id, "send", "fail", actor="console:bo")
    assert (failed.status, failed.reason) == (RunStatus.FAILED, "step `send` marked failed by console:bo")
    with pytest.raises(RunStateError) as settled:
        await engine.resolve(run_id, "send", "retry", actor="console:bo")
    assert (settled.value.status, settled.value.next_step) == ("failed", Next.SEE)


async def test_invalidating_a_step_makes_the_next_resume_run_it_and_its_dependents(
    rig: Rig, engine: Engine
) -> None:
    run_id = await _start(engine, "shaky")
    assert rig.store.runs.get_run(run_id).status is RunStatus.FAILED  # `flaky` fails its first call
    with pytest.raises(UsageError) as unknown:
        engine.invalidate(run_id, "bb", downstream=False, actor="console:bo")
    assert unknown.value.command == "invalidate" and "did you mean `b`?" in unknown.value.message
    assert engine.invalidate(run_id, "a", downstream=True, actor="console:bo") == ["a", "b"]
    await engine.resume(run_id, actor="console:bo")
    assert (await engine.wait(run_id, timeout=10)).status is RunStatus.COMPLETED
    assert (rig.calls["first"], rig.calls["flaky"]) == (2, 2)  # `a` ran again, not served
    markers = [
        e for e in rig.store.steps.journal([run_id]) if e.cache_key == "" and e.status is NodeStatus.FAILED
    ]
    assert [m.node_id for m in markers] == ["a", "b"]
