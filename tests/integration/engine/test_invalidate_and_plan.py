"""`invalidate` (with and without --downstream) and the words `plan` uses."""

from __future__ import annotations

from core.store.records import RunStatus
from tests.integration.engine.harness import Harness

CHAIN = """
name: chain
inputs:
  version: {type: string, required: true}
nodes:
  - id: collect
    bash: echo "log of {{ inputs.version }}"
    replay: pure
  - id: draft
    depends_on: [collect]
    prompt: "Notes: {{ nodes.collect.output }}"
  - id: polish
    depends_on: [draft]
    bash: echo "polished {{ nodes.draft.output }}"
    replay: pure
  - id: side
    bash: echo unrelated
    replay: pure
"""


async def test_invalidate_with_downstream_re_runs_them_on_the_next_resume(db_harness: Harness) -> None:
    h = db_harness
    h.write("chain.yaml", CHAIN)
    run = await h.run("chain", {"version": "1.0"})
    child = await h.run("chain", {"version": "1.0"}, resume_from=run.id)
    assert all(e.cached_from == run.id for e in h.entries(child.id))

    dropped = h.engine.invalidate(child.id, "draft", downstream=True, actor="console:ana")

    assert dropped == ["draft", "polish"]
    plan = {n.node_id: (n.action, n.reason) for n in h.engine.plan(child.id).nodes}
    assert plan == {
        "collect": ("done", "completed in this run"),
        "draft": ("runs", "invalidated by console:ana"),
        "polish": ("runs", "invalidated by console:ana"),
        "side": ("done", "completed in this run"),
    }
    [audit] = [a for a in h.store.events.audit_log(child.id) if a.action == "invalidate"]
    assert audit.actor == "console:ana" and audit.details["nodes"] == ["draft", "polish"]

    # a completed run is not resumable: a new run from it honours the invalidation (lineage copies too)
    grandchild = await h.run("chain", {"version": "1.0"}, resume_from=child.id)
    assert grandchild.status is RunStatus.COMPLETED
    assert h.executed(grandchild.id, "draft") == 1
    assert h.executed(grandchild.id, "polish") == 1
    assert h.executed(grandchild.id, "collect") == 0
    # the parent of the invalidated run is untouched
    assert [e.status.value for e in h.entries(run.id, "draft")] == ["completed"]


async def test_invalidate_without_downstream_keeps_identical_dependents_cached(harness: Harness) -> None:
    h = harness
    h.write("chain.yaml", CHAIN)
    run = await h.run("chain", {"version": "1.0"})
    assert h.engine.invalidate(run.id, "collect", downstream=False, actor="console:bo") == ["collect"]

    again = await h.run("chain", {"version": "1.0"}, resume_from=run.id)

    assert h.executed(again.id, "collect") == 1  # re-ran, same bytes
    assert all(e.cached_from == run.id for e in h.entries(again.id) if e.node_id != "collect")


async def test_plan_explains_each_node_in_words(harness: Harness) -> None:
    h = harness
    h.write("chain.yaml", CHAIN)
    run = await h.run("chain", {"version": "1.0"})
    fresh = await h.start("chain", {"version": "2.0"}, resume_from=run.id)
    await h.engine.wait(fresh.id, timeout=30)
    h.write("chain.yaml", CHAIN.replace('bash: echo "log of', 'bash: echo "history of'))

    plan = {n.node_id: (n.action, n.reason) for n in h.engine.plan(fresh.id).nodes}

    assert plan["collect"] == ("runs", "definition changed")
    assert plan["draft"] == ("runs", "runs if upstream `collect` output changes")
    assert plan["polish"] == ("runs", "runs if upstream `draft` output changes")
    assert plan["side"] == ("done", "completed in this run")


async def test_plan_and_journal_name_changed_inputs_failures_and_new_steps(harness: Harness) -> None:
    h = harness
    h.write("chain.yaml", CHAIN)
    first = await h.run("chain", {"version": "1.0"})
    broken = CHAIN.replace('bash: echo "polished {{ nodes.draft.output }}"', "bash: exit 3")
    h.write("chain.yaml", broken)
    second = await h.run("chain", {"version": "2.0"}, resume_from=first.id)
    assert second.status is RunStatus.FAILED

    reasons = {e.node_id: e.notes.reason for e in h.entries(second.id)}
    assert reasons["collect"] == "input `inputs.version` changed"
    assert reasons["draft"] == "upstream `collect` output changed"
    assert [e.cached_from for e in h.entries(second.id, "side")] == [first.id]

    plan = {n.node_id: (n.action, n.reason) for n in h.engine.plan(second.id).nodes}
    assert plan["polish"] == ("runs", "earlier attempt failed")
    h.write("chain.yaml", CHAIN + "  - id: extra\n    bash: echo new\n    replay: pure\n")
    plan = {n.node_id: (n.action, n.reason) for n in h.engine.plan(second.id).nodes}
    assert plan == {
        "collect": ("done", "completed in this run"),
        "draft": ("done", "completed in this run"),
        "polish": ("runs", "definition changed"),
        "side": ("done", "completed in this run"),
        "extra": ("runs", "no earlier result"),
    }
