"""`workflow:` steps through the real `baton say`, as a user would: a child run with a gate
decided from the parent (`approve <parent>`), a failed child resumed (never started again) by
resuming the parent, `map:` over a sub-workflow, cascade cancel, and recursion refused.

Steps append a line to `ran.log` in their run's directory; the tests count those lines, so
"ran" means the step's command really ran (and an unsafe one never twice).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.store.records import RunStatus
from tests.e2e.console.cli import BatonCli, final_status

CHILD = """\
name: ship
inputs:
  service: {type: string, required: true}
nodes:
  - id: build
    bash: |
      echo "build {{ inputs.service }}" >> ran.log
      echo "built {{ inputs.service }}"
  - id: review
    depends_on: [build]
    approval: "Ship {{ inputs.service }}?"
  - id: push
    depends_on: [review, build]
    bash: |
      echo "push {{ inputs.service }}" >> ran.log
      if [ -e "$BATON_WORKFLOW_DIR/broken.txt" ]; then echo "registry down" >&2; exit 1; fi
      echo "pushed {{ nodes.build.output }}"
"""

PARENT = """\
name: release
nodes:
  - id: api
    workflow: ship
    with: {service: api}
  - id: announce
    depends_on: [api]
    bash: 'echo "released: {{ nodes.api.output.outputs.push }}"'
    replay: pure
"""


def _ran(baton: BatonCli) -> list[str]:
    lines: list[str] = []
    for log in sorted((baton.home / ".baton" / "runs").glob("*/ran.log")):
        lines += log.read_text().splitlines()
    return sorted(lines)


def _last(replies: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [r for r in replies if r["kind"] == kind]
    assert found, f"no {kind} reply in {[r['kind'] for r in replies]}"
    return found[-1]


def _runs(baton: BatonCli) -> dict[str, Any]:
    """The latest run of each workflow."""
    latest: dict[str, Any] = {}
    for run in baton.runs():  # newest first
        latest.setdefault(run.workflow, run)
    return latest


def test_a_gate_in_the_child_is_decided_from_the_parent_and_both_complete(baton: BatonCli) -> None:
    (baton.workflows / "ship.yaml").write_text(CHILD)
    (baton.workflows / "release.yaml").write_text(PARENT)
    replies = baton.say("run release")
    runs = _runs(baton)
    parent, child = runs["release"], runs["ship"]
    assert parent.status is RunStatus.PAUSED and child.status is RunStatus.PAUSED
    assert child.parent_run == parent.id and child.started_by == f"parent:{parent.id}"
    assert child.requester == parent.requester and child.conversation == parent.conversation
    assert parent.reason == f"waiting on child {child.id} at `review`"
    assert child.thread == parent.thread
    gate = _last(replies, "gate_waiting")
    assert gate["run_id"] == child.id  # the child's gate is asked where the parent runs
    waiting = _last(replies, "child_waiting")  # and the parent says what it waits on
    assert waiting["run_id"] == parent.id
    assert f"release run {parent.id} is paused at step api, waiting on child {child.id}" in waiting["text"]
    baton.say(f"approve {parent.id}")  # the parent's id decides the child's gate
    runs = _runs(baton)
    assert runs["ship"].status is RunStatus.COMPLETED
    assert runs["release"].status is RunStatus.COMPLETED, runs["release"].reason
    assert _ran(baton) == ["build api", "push api"]
    [status] = baton.say(f"status {parent.id}")
    assert child.id in status["text"]  # the parent's table links its child


def test_a_failed_child_is_resumed_by_resuming_the_parent_and_nothing_runs_twice(baton: BatonCli) -> None:
    (baton.workflows / "ship.yaml").write_text(CHILD)
    (baton.workflows / "release.yaml").write_text(PARENT)
    (baton.workflows / "broken.txt").write_text("yes")
    baton.say("run release")
    child = _runs(baton)["ship"]
    baton.say(f"approve {child.id}")  # in the child itself, as its gate message offers
    runs = _runs(baton)
    assert runs["ship"].status is RunStatus.FAILED
    parent = runs["release"]
    assert parent.status is RunStatus.FAILED
    assert parent.reason is not None and f"child run {child.id} of `ship` failed" in parent.reason
    assert parent.reason.endswith("stderr ends with: registry down")  # the cause, not an empty colon
    (baton.workflows / "broken.txt").unlink()  # the fix
    resumed = baton.say(f"resume {parent.id}")
    runs = _runs(baton)
    assert runs["release"].status is RunStatus.COMPLETED, runs["release"].reason
    assert runs["ship"].id == child.id and runs["ship"].status is RunStatus.COMPLETED  # resumed, not new
    assert _ran(baton) == ["build api", "push api", "push api"]  # build once; push again after the fix
    assert "released: pushed built api" in _last(resumed, "run_completed")["text"]


def test_abandoning_the_parent_cancels_its_child(baton: BatonCli) -> None:
    (baton.workflows / "ship.yaml").write_text(CHILD)
    (baton.workflows / "release.yaml").write_text(PARENT)
    baton.say("run release")
    parent = _runs(baton)["release"]
    baton.say(f"abandon {parent.id}")
    runs = _runs(baton)
    assert runs["release"].status is RunStatus.CANCELLED
    assert runs["ship"].status is RunStatus.CANCELLED
    assert f"parent {parent.id}" in (runs["ship"].reason or "")


def test_map_over_a_sub_workflow_starts_one_child_per_item(baton: BatonCli) -> None:
    (baton.workflows / "ship.yaml").write_text(CHILD.replace('    approval: "Ship {{ inputs.service }}?"\n',
                                                            '    bash: echo ok\n    replay: pure\n'))
    (baton.workflows / "train.yaml").write_text("""\
name: train
nodes:
  - id: each
    map: {items: [api, web, db], as: service, max_parallel: 2}
    workflow: ship
    with: {service: "{{ service }}"}
  - id: report
    depends_on: [each]
    bash: echo "{{ nodes.each.ok_count }} shipped"
    replay: pure
""")
    replies = baton.say("run train")
    assert final_status(replies) == "completed"
    assert "3 shipped" in _last(replies, "run_completed")["text"]
    kids = [r for r in baton.runs() if r.workflow == "ship"]
    assert sorted(k.parent_node or "" for k in kids) == ["each[0]", "each[1]", "each[2]"]
    said = [r["kind"] for r in replies if r["run_id"] in {k.id for k in kids}]
    assert said == []  # a map item's child posts nothing of its own: the parent's map line counts it
    assert _ran(baton) == sorted(f"{what} {s}" for s in ("api", "web", "db") for what in ("build", "push"))


def test_a_workflow_that_calls_itself_is_refused_at_load(baton: BatonCli) -> None:
    (baton.workflows / "loop-a.yaml").write_text("name: loop-a\nnodes:\n  - id: call\n    workflow: loop-b\n")
    (baton.workflows / "loop-b.yaml").write_text("name: loop-b\nnodes:\n  - id: back\n    workflow: loop-a\n")
    [refused] = baton.say("run loop-a", wait=False)
    assert "loop-a -> loop-b -> loop-a" in refused["text"]
    assert "loop-a.yaml:4" in refused["text"]
    assert not (Path(baton.home) / ".baton" / "runs").exists() or _ran(baton) == []


def test_a_child_runs_only_if_the_parents_requester_may_run_its_workflow(baton: BatonCli) -> None:
    (baton.workflows / "ship.yaml").write_text(CHILD)
    (baton.workflows / "release.yaml").write_text(PARENT)
    baton.env_extra["BATON_ACCESS"] = '{"run": {"release": ["console:ana"], "ship": ["console:bob"]}}'
    replies = baton.say("run release", user="ana")
    assert final_status(replies) == "failed"
    text = _last(replies, "run_failed")["text"]
    assert "console:ana may not run `ship`" in text
    assert [r.workflow for r in baton.runs()] == ["release"]  # no child started
    assert _ran(baton) == []


def test_approving_a_parent_whose_children_all_wait_asks_which_gate(baton: BatonCli) -> None:
    (baton.workflows / "ship.yaml").write_text(CHILD)
    (baton.workflows / "train.yaml").write_text("""\
name: train
nodes:
  - id: each
    map: {items: [api, web], as: service}
    workflow: ship
    with: {service: "{{ service }}"}
""")
    baton.say("run train")
    parent = _runs(baton)["train"]
    kids = [r for r in baton.runs() if r.workflow == "ship"]
    assert parent.status is RunStatus.PAUSED and len(kids) == 2
    [which] = baton.say(f"approve {parent.id}", wait=False)
    assert which["kind"] == "which_gate"
    assert all(k.id in which["text"] for k in kids)
    assert all(baton.run_record(k.id).status is RunStatus.PAUSED for k in kids)  # nothing decided


#: a map over `ship` (whose `review` gate waits): two children at their gates
TWO_GATED_CHILDREN = """\
name: train
nodes:
  - id: each
    map: {items: [api, web], as: service, max_parallel: 2}
    workflow: ship
    with: {service: "{{ service }}"}
"""
REPORT = """\
  - id: report
    depends_on: [each]
    bash: echo done
    replay: pure
"""


def test_a_prune_keeps_a_completed_child_while_its_parent_may_still_resume(baton: BatonCli) -> None:
    """A paused parent finds its completed child again when it resumes: pruning that child
    would make it start a new one, and run the child's unsafe `push` twice."""
    (baton.workflows / "ship.yaml").write_text(CHILD)
    (baton.workflows / "train.yaml").write_text(TWO_GATED_CHILDREN)
    baton.say("run train")
    kids = {r.parent_node: r for r in baton.runs() if r.workflow == "ship"}
    assert sorted(kids) == ["each[0]", "each[1]"]
    baton.say(f"approve {kids['each[0]'].id}")  # api's child completes; the parent still waits on web's
    assert baton.run_record(kids["each[0]"].id).status is RunStatus.COMPLETED

    pruned = baton.run("prune", "--older-than", "0")
    assert pruned.returncode == 0, pruned.stderr
    assert kids["each[0]"].id in {r.id for r in baton.runs()}  # kept: its parent lives

    baton.say(f"approve {kids['each[1]'].id}")
    parent = _runs(baton)["train"]
    assert parent.status is RunStatus.COMPLETED, parent.reason
    assert sorted(r.id for r in baton.runs() if r.workflow == "ship") == sorted(k.id for k in kids.values())
    assert _ran(baton) == ["build api", "build web", "push api", "push web"]  # no child started twice

    assert baton.run("prune", "--older-than", "0").returncode == 0  # the parent first, then its children
    assert baton.runs() == []


def test_a_map_whose_children_wait_shows_waiting_on_one_child_not_skipped(baton: BatonCli) -> None:
    (baton.workflows / "ship.yaml").write_text(CHILD)
    (baton.workflows / "train.yaml").write_text(TWO_GATED_CHILDREN + REPORT)
    replies = baton.say("run train")
    waiting = _last(replies, "child_waiting")
    named = {k.id for k in baton.runs() if k.workflow == "ship" and k.id in waiting["text"]}
    assert len(named) == 1, waiting["text"]  # the step, the reason and the child name one child
    [status] = baton.say(f"status {_runs(baton)['train'].id}")
    assert "each waiting · waiting on child" in status["text"] and "skipped" not in status["text"]
    assert "report waiting · waits for `each`" in status["text"]

    kids = {r.parent_node: r for r in baton.runs() if r.workflow == "ship"}
    first = next(k for k in kids.values() if k.id in named)
    other = next(k for k in kids.values() if k.id not in named)
    baton.say(f"approve {first.id}")  # that child completes; the parent waits on the other
    [status] = baton.say(f"status {_runs(baton)['train'].id}")
    assert status["run_status"] == "paused"
    assert f"waiting on child {other.id}" in status["text"] and first.id not in status["text"]
