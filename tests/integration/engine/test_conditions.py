"""`when:` through the real engine: a false condition skips the node (shown, explained and
journaled as a skip), its dependents are skipped unless they say otherwise, and a skip is part
of the cache key of what follows."""

from __future__ import annotations

from core.engine.events import EventKind, NodeState
from core.store.records import RunStatus
from tests.integration.engine.harness import Harness

BRANCHY = """
name: branchy
inputs:
  mode: {type: string, default: normal}
nodes:
  - id: build
    bash: echo built
    replay: pure
  - id: hotfix
    depends_on: [build]
    when: "{{ inputs.mode == 'hotfix' }}"
    bash: echo hotfix
    replay: pure
  - id: notify
    depends_on: [hotfix]
    bash: echo notified
    replay: pure
  - id: report
    depends_on: [hotfix]
    when: "{{ nodes.hotfix.skipped }}"
    bash: echo "no hotfix"
    replay: pure
  - id: summary
    depends_on: [hotfix]
    bash: echo "hotfix said [{{ nodes.hotfix.output }}]"
    replay: pure
"""


async def test_a_false_condition_skips_the_node_and_its_dependents_unless_they_say_otherwise(
    db_harness: Harness,
) -> None:
    h = db_harness
    h.write("branchy.yaml", BRANCHY)
    run = await h.run("branchy", {"mode": "normal"})
    assert run.status is RunStatus.COMPLETED
    nodes = {n.node_id: n for n in h.engine.summary(run.id).nodes}
    assert {k: n.state for k, n in nodes.items()} == {
        "build": NodeState.DONE,
        "hotfix": NodeState.SKIPPED,
        "notify": NodeState.SKIPPED,
        "report": NodeState.DONE,
        "summary": NodeState.SKIPPED,
    }
    assert nodes["hotfix"].reason == "skipped: `when: {{ inputs.mode == 'hotfix' }}` is false"
    assert nodes["notify"].reason == "skipped: `hotfix` was skipped"
    assert h.output(run.id, "report").strip() == "no hotfix"
    started = h.kinds(run.id, EventKind.NODE_STARTED)
    assert "hotfix" not in started and "notify" not in started and "summary" not in started
    assert sorted(n for n in h.kinds(run.id, EventKind.NODE_SKIPPED) if n) == ["hotfix", "notify", "summary"]


async def test_the_branch_taken_runs_and_a_skip_is_part_of_the_key_of_what_follows(
    db_harness: Harness,
) -> None:
    h = db_harness
    h.write("branchy.yaml", BRANCHY)
    skipped = await h.run("branchy", {"mode": "normal"})
    taken = await h.run("branchy", {"mode": "hotfix"}, resume_from=skipped.id)
    assert taken.status is RunStatus.COMPLETED
    states = {n.node_id: n.state for n in h.engine.summary(taken.id).nodes}
    assert states["build"] is NodeState.CACHED
    assert states["hotfix"] is NodeState.DONE and states["notify"] is NodeState.DONE
    assert states["report"] is NodeState.SKIPPED  # its own condition is now false
    assert h.output(taken.id, "summary") == "hotfix said [hotfix\n]\n"
    # the dependents of a skip and of a real output have different keys: nothing served stale
    keys = {e.node_id: e.cache_key for e in h.entries(skipped.id)}
    keys_now = {e.node_id: e.cache_key for e in h.entries(taken.id)}
    assert keys["notify"] != keys_now["notify"] and keys["summary"] != keys_now["summary"]
    again = await h.run("branchy", {"mode": "normal"}, resume_from=taken.id)
    states = {n.node_id: n.state for n in h.engine.summary(again.id).nodes}
    assert states["hotfix"] is NodeState.SKIPPED and states["notify"] is NodeState.SKIPPED
    assert states["report"] is NodeState.DONE or states["report"] is NodeState.CACHED


async def test_a_condition_that_is_not_a_boolean_fails_the_step_with_one_line(harness: Harness) -> None:
    h = harness
    h.write(
        "odd.yaml",
        "name: odd\ninputs:\n  flag: {type: string, default: 'false'}\nnodes:\n"
        "  - id: a\n    when: '{{ inputs.flag }}'\n    bash: echo a\n    replay: pure\n",
    )
    run = await h.run("odd", {})
    assert run.status is RunStatus.FAILED
    assert run.reason is not None and 'gave "false" (str), not true or false' in run.reason
    assert "a" not in h.kinds(run.id, EventKind.NODE_STARTED)
