"""Approval gates: pause, approve (CAS, then continue), reject (run cancelled with the reason)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.commands.hints import hint
from core.engine.events import EventKind, NodeState
from core.errors import GateAlreadyDecided, RunNotResumable
from core.store.records import GateStatus, RunStatus
from tests.factories import decide_gate
from tests.integration.engine.harness import Harness

GATED = """
name: gated
nodes:
  - id: draft
    bash: echo "v{{ inputs.version }}"
    replay: pure
  - id: review
    depends_on: [draft]
    approval: "Publish {{ nodes.draft.output }}?"
  - id: publish
    depends_on: [review]
    bash: echo "published by {{ nodes.review.output.by }}"
    replay: pure
  - id: independent
    bash: echo meanwhile
    replay: pure
"""


async def test_approval_pauses_then_approve_continues_the_run(db_harness: Harness) -> None:
    h = db_harness
    h.write("gated.yaml", GATED)
    paused = await h.run("gated", {"version": "2"})

    assert paused.status is RunStatus.PAUSED
    gate = h.store.gates.get_gate(paused.id, "review")
    assert gate.status is GateStatus.WAITING and gate.prompt == "Publish v2\n?"
    assert h.kinds(paused.id, EventKind.NODE_WAITING) == ["review"]
    states = {n.node_id: n.state for n in h.engine.summary(paused.id).nodes}
    assert states == {
        "draft": NodeState.DONE,
        "review": NodeState.WAITING,
        "publish": NodeState.WAITING,  # not skipped: it runs once the gate is approved
        "independent": NodeState.DONE,  # branches that do not wait for the gate still ran
    }
    publish = next(n for n in h.engine.summary(paused.id).nodes if n.node_id == "publish")
    assert publish.reason == "waits for `review`"
    with pytest.raises(RunNotResumable) as refused:
        await h.engine.resume(paused.id, actor="console:bo")
    assert "waits for approval at `review`" in refused.value.message
    assert f"/workflow approve {paused.id}" in hint(refused.value)

    running = await h.engine.approve(paused.id, actor="console:bo", comment="ship it")
    assert running.status is RunStatus.RUNNING
    done = await h.engine.wait(paused.id, timeout=30)

    assert done.status is RunStatus.COMPLETED
    output = json.loads(h.output(paused.id, "review"))
    at = h.store.gates.get_gate(paused.id, "review").decided_at
    assert output == {
        "decision": "approve",  # a gate's output (DESIGN.md "Approvals"), and the fields it had before
        "values": {},
        "approvers": [{"user": "console:bo", "at": at, "comment": "ship it"}],
        "approved": True,
        "by": "console:bo",
        "comment": "ship it",
    }
    assert h.output(paused.id, "publish").strip() == "published by console:bo"
    assert h.executed(paused.id, "draft") == 1  # nothing ran twice
    with pytest.raises(GateAlreadyDecided) as again:
        await h.engine.approve(paused.id, actor="console:cy")
    assert again.value.by == "console:bo"
    assert [a.action for a in h.store.events.audit_log(paused.id)] == ["start", "approve"]


async def test_two_approvers_one_wins(harness: Harness) -> None:
    h = harness
    h.write("gated.yaml", GATED)
    paused = await h.run("gated", {"version": "3"})
    decide_gate(h.store, paused.id, "review", approved=True, by="console:first", comment=None)

    with pytest.raises(GateAlreadyDecided) as lost:
        await h.engine.approve(paused.id, actor="console:second")
    assert lost.value.by == "console:first"


async def test_reject_cancels_the_run_with_the_reason(db_harness: Harness) -> None:
    h = db_harness
    h.write("gated.yaml", GATED)
    paused = await h.run("gated", {"version": "4"})

    cancelled = await h.engine.reject(paused.id, actor="console:bo", reason="too risky")

    assert cancelled.status is RunStatus.CANCELLED
    assert cancelled.reason == "rejected at `review` by console:bo: too risky"
    assert h.store.gates.get_gate(paused.id, "review").status is GateStatus.REJECTED
    assert h.entries(paused.id, "publish") == []
    summary = h.engine.summary(paused.id)
    review = next(n for n in summary.nodes if n.node_id == "review")
    assert review.state is NodeState.REJECTED and review.reason == "rejected by console:bo: too risky"
    publish = next(n for n in summary.nodes if n.node_id == "publish")
    assert publish.state is NodeState.SKIPPED and publish.reason == "skipped: `review` rejected"
    with pytest.raises(RunNotResumable) as refused:
        await h.engine.resume(paused.id, actor="console:bo")
    assert f"--resume-from {paused.id}" in hint(refused.value)


async def test_abandon_a_paused_run_closes_its_gate(harness: Harness) -> None:
    h = harness
    h.write("gated.yaml", GATED)
    paused = await h.run("gated", {"version": "5"})

    abandoned = await h.engine.abandon(paused.id, actor="console:ana")

    assert abandoned.status is RunStatus.CANCELLED
    assert h.store.gates.waiting_gates(platform="console", conversation="c1") == []
    with pytest.raises(RunNotResumable) as refused:
        await h.engine.abandon(paused.id, actor="console:ana")
    assert "already cancelled" in refused.value.message


async def test_a_run_resumed_from_an_approved_run_asks_its_own_gate(harness: Harness) -> None:
    """Steps are re-used across the lineage, decisions are not: a new run must be approved again."""
    h = harness
    h.write("gated.yaml", GATED)
    first = await h.run("gated", {"version": "6"})
    await h.engine.approve(first.id, actor="console:bo")
    assert (await h.engine.wait(first.id, timeout=30)).status is RunStatus.COMPLETED

    second = await h.run("gated", {"version": "6"}, resume_from=first.id)

    assert second.status is RunStatus.PAUSED
    assert h.store.gates.get_gate(second.id, "review").status is GateStatus.WAITING
    assert h.executed(second.id, "draft") == 0  # the step itself still came from the cache



CHANGING = """
name: changing
nodes:
  - id: draft
    bash: cat {{{{ inputs.draft }}}}
    replay: pure
  - id: review
    depends_on: [draft]
    approval: "{question} {{{{ nodes.draft.output }}}}?"
  - id: publish
    depends_on: [review]
    bash: test -e {{{{ inputs.flag }}}} && echo "published by {{{{ nodes.review.output.by }}}}"
    replay: pure
"""


async def _approved_then_failed(h: Harness) -> tuple[str, Path]:
    """A run whose gate was approved and whose next step then failed (its flag file was missing)."""
    draft, flag = h.root / "draft.txt", h.root / "ok.flag"
    draft.write_text("v1")
    h.write("changing.yaml", CHANGING.format(question="Publish"))
    paused = await h.run("changing", {"draft": str(draft), "flag": str(flag)})
    assert paused.status is RunStatus.PAUSED
    await h.engine.approve(paused.id, actor="console:bo", comment="v1 is fine")
    failed = await h.engine.wait(paused.id, timeout=30)
    assert failed.status is RunStatus.FAILED, failed.reason
    flag.write_text("")
    return paused.id, draft


@pytest.mark.parametrize("change", ["question", "upstream"])
async def test_a_changed_gate_asks_again_on_resume(db_harness: Harness, change: str) -> None:
    """A decision answers one question: if the gate's text or what it shows changed, resume asks again."""
    h = db_harness
    run_id, draft = await _approved_then_failed(h)
    if change == "question":
        h.write("changing.yaml", CHANGING.format(question="Really publish"))
        expected = "Really publish v1?"
    else:
        draft.write_text("v2")
        h.engine.invalidate(run_id, "draft", downstream=False, actor="console:ana")
        expected = "Publish v2?"

    await h.engine.resume(run_id, actor="console:ana")
    again = await h.engine.wait(run_id, timeout=30)

    assert again.status is RunStatus.PAUSED, again.reason
    gate = h.store.gates.get_gate(run_id, "review")
    assert (gate.status, gate.prompt, gate.decided_by) == (GateStatus.WAITING, expected, None)
    assert h.executed(run_id, "publish") == 1  # nothing ran past the gate
    (reopened,) = [e for e in h.store.events.audit_log(run_id) if e.action == "reopen_gate"]
    assert reopened.details["was"] == "approved" and reopened.details["by"] == "console:bo"
    reason = "definition changed" if change == "question" else "upstream `draft` output changed"
    assert reopened.details["why"] == reason

    await h.engine.approve(run_id, actor="console:cy")
    done = await h.engine.wait(run_id, timeout=30)
    assert done.status is RunStatus.COMPLETED
    assert h.output(run_id, "publish") == "published by console:cy\n"


async def test_an_unchanged_gate_keeps_its_decision_on_resume(db_harness: Harness) -> None:
    h = db_harness
    run_id, _ = await _approved_then_failed(h)

    await h.engine.resume(run_id, actor="console:ana")
    done = await h.engine.wait(run_id, timeout=30)

    assert done.status is RunStatus.COMPLETED
    assert h.output(run_id, "publish") == "published by console:bo\n"
    assert [e for e in h.store.events.audit_log(run_id) if e.action == "reopen_gate"] == []
