"""`workflow:` steps on `MemoryStore` through the engine: a child run with `with:` as its
args, its result the step's output; a gate in the child pauses the parent and deciding it
continues both; a failed child is resumed (not started again) by resuming the parent; the
parent's cancel reaches its children; an edited child busts the step; `map:` gives one child
per item; recursion is refused at load."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path

import pytest

from core.engine.engine import Engine
from core.engine.events import EngineEvent, EventKind
from core.store.records import NodeStatus, Run, RunStatus
from core.workflows.catalog import Catalog
from tests.unit.engine.memory_rig import Rig

CHILD = """
    name: child
    inputs:
      message: {type: string}
    nodes:
      - id: first
        tool: once
        with: {text: "{{ inputs.message }}"}
      - id: second
        depends_on: [first]
        tool: flaky
        with: {text: "{{ nodes.first.output }}"}
"""

PARENT = """
    name: parent
    nodes:
      - id: notes
        workflow: child
        with: {message: "v1.2"}
      - id: after
        depends_on: [notes]
        tool: once
        with: {text: "{{ nodes.notes.output.outputs.second }}"}
"""

GATED = """
    name: gated
    nodes:
      - id: review
        approval: "Publish?"
      - id: publish
        depends_on: [review]
        tool: once
        with: {text: published}
"""

CALLS_GATED = """
    name: caller
    nodes:
      - id: sub
        workflow: gated
"""


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    rig = Rig(tmp_path)
    rig.counted("once")
    rig.broken = {"flaky": True}  # type: ignore[attr-defined]

    @rig.tools.tool("flaky", replay="pure", inline=True)
    def flaky(text: str = "") -> str:
        rig.calls["flaky"] += 1
        if rig.broken["flaky"]:  # type: ignore[attr-defined]
            raise RuntimeError("flaky is down")
        return f"flaky({text})"

    return rig


async def _start(engine: Engine, workflow: str, **args: object) -> Run:
    run = await engine.start_run(workflow=workflow, args=args, platform="console", conversation="c1",
                                 thread="t1", requester="console:ana")  # fmt: skip
    return await engine.wait(run.id, timeout=10)


def _children(rig: Rig, run: Run) -> list[Run]:
    return rig.store.runs.child_runs([run.id])


async def test_a_child_run_gets_the_args_and_its_result_is_the_steps_output(rig: Rig) -> None:
    rig.broken["flaky"] = False  # type: ignore[attr-defined]
    engine = rig.engine(child=CHILD, parent=PARENT)
    parent = await _start(engine, "parent")
    assert parent.status is RunStatus.COMPLETED, parent.reason
    (child,) = _children(rig, parent)
    assert child.status is RunStatus.COMPLETED
    assert child.started_by == f"parent:{parent.id}" and child.parent_node == "notes"
    assert (child.requester, child.conversation, child.thread) == ("console:ana", "c1", "t1")
    assert json.loads(rig.store.blobs.get_blob(child.args_digest)) == {"message": "v1.2"}
    latest = {e.node_id: e for e in rig.store.steps.journal([parent.id])}
    output = json.loads(rig.store.blobs.get_blob(latest["notes"].output_digest or ""))
    assert output == {"status": "completed", "workflow": "child",
                      "outputs": {"first": "once(v1.2)", "second": "flaky(once(v1.2))"}}  # fmt: skip
    assert rig.store.blobs.get_blob(latest["after"].output_digest or "") == b"once(flaky(once(v1.2)))"


async def test_a_failed_child_is_resumed_by_resuming_the_parent_not_started_again(rig: Rig) -> None:
    engine = rig.engine(child=CHILD, parent=PARENT)
    parent = await _start(engine, "parent")
    assert parent.status is RunStatus.FAILED
    (child,) = _children(rig, parent)
    assert child.status is RunStatus.FAILED
    assert parent.reason is not None and f"child run {child.id} of `child` failed" in parent.reason
    assert rig.calls["once"] == 1
    rig.broken["flaky"] = False  # type: ignore[attr-defined]
    await engine.resume(parent.id, actor="console:ana")
    parent = await engine.wait(parent.id, timeout=10)
    assert parent.status is RunStatus.COMPLETED, parent.reason
    (again,) = _children(rig, parent)  # the same child, resumed
    assert again.id == child.id and again.status is RunStatus.COMPLETED
    assert rig.calls["once"] == 2  # the child's `first` ran once; the parent's `after` once


async def test_a_gate_in_the_child_pauses_the_parent_and_deciding_it_continues_both(rig: Rig) -> None:
    engine = rig.engine(gated=GATED, caller=CALLS_GATED)
    parent = await _start(engine, "caller")
    (child,) = _children(rig, parent)
    assert child.status is RunStatus.PAUSED
    assert parent.status is RunStatus.PAUSED
    assert parent.reason == f"waiting on child {child.id} at `review`"
    done = asyncio.Event()

    async def watch(event: EngineEvent) -> None:
        if event.kind is EventKind.RUN_FINISHED and event.run_id == parent.id:
            done.set()

    engine.subscribe(watch)
    await engine.approve(child.id, actor="console:bob")  # the child's rest resumes the parent
    await asyncio.wait_for(done.wait(), timeout=10)
    parent = rig.store.runs.get_run(parent.id)
    assert parent.status is RunStatus.COMPLETED, parent.reason
    assert rig.store.runs.get_run(child.id).status is RunStatus.COMPLETED
    assert rig.calls["once"] == 1


async def test_a_parent_left_paused_by_a_process_killed_after_its_childs_rest_goes_on_at_the_next_start(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window between a child's rest (committed) and its parent's wake: a process killed
    there leaves the parent paused on a child that no longer waits. The next engine to start
    (any replica's recovery pass) wakes it; the child's step is not run again."""
    first = rig.engine(gated=GATED, caller=CALLS_GATED)
    parent = await _start(first, "caller")
    (child,) = _children(rig, parent)

    async def killed_before_waking(parent_id: str) -> None:  # the process dies right here
        return None

    monkeypatch.setattr(first.children, "settle", killed_before_waking)
    await first.approve(child.id, actor="console:bob")
    assert (await first.wait(child.id, timeout=10)).status is RunStatus.COMPLETED
    await asyncio.sleep(0.05)
    assert rig.store.runs.get_run(parent.id).status is RunStatus.PAUSED  # left waiting on nothing
    assert [p.id for p in rig.store.runs.paused_parents()] == [parent.id]
    await first.stop()

    restarted = rig.engine(gated=GATED, caller=CALLS_GATED)
    await restarted.start()
    try:
        parent = await restarted.wait(parent.id, timeout=10)
        assert parent.status is RunStatus.COMPLETED, parent.reason
        assert rig.calls["once"] == 1  # the child's `publish` ran once, before the kill
        assert rig.store.runs.paused_parents() == []
    finally:
        await restarted.stop()


async def test_cancelling_the_parent_cancels_its_child(rig: Rig) -> None:
    engine = rig.engine(gated=GATED, caller=CALLS_GATED)
    parent = await _start(engine, "caller")
    (child,) = _children(rig, parent)
    assert child.status is RunStatus.PAUSED
    await engine.abandon(parent.id, actor="console:ana")
    child = rig.store.runs.get_run(child.id)
    assert child.status is RunStatus.CANCELLED
    assert child.reason is not None and f"parent {parent.id}" in child.reason


async def test_an_edited_child_busts_the_step_and_reuses_its_unchanged_steps(
    rig: Rig, tmp_path: Path
) -> None:
    rig.broken["flaky"] = False  # type: ignore[attr-defined]
    engine = rig.engine(child=CHILD, parent=PARENT)
    first = await _start(engine, "parent")
    assert first.status is RunStatus.COMPLETED
    assert (rig.calls["once"], rig.calls["flaky"]) == (2, 1)
    edited = CHILD.replace('{text: "{{ nodes.first.output }}"}', '{text: "{{ nodes.first.output }}!"}')
    (tmp_path / "workflows" / "child.yaml").write_text(textwrap.dedent(edited))
    again = await engine.start_run(workflow="parent", args={}, platform="console", conversation="c1",
                                   thread="t1", requester="console:ana", resume_from=first.id)  # fmt: skip
    again = await engine.wait(again.id, timeout=10)
    assert again.status is RunStatus.COMPLETED, again.reason
    (old,) = _children(rig, first)
    (new,) = _children(rig, again)
    assert new.id != old.id and new.resumed_from == old.id  # the new child re-uses the old one's cache
    assert rig.calls["flaky"] == 2 and rig.calls["once"] == 3  # `first` cached; `second`, `after` ran
    notes = [e for e in rig.store.steps.journal([again.id]) if e.node_id == "notes"][-1]
    assert notes.status is NodeStatus.COMPLETED and notes.cached_from is None
    third = await engine.start_run(workflow="parent", args={}, platform="console", conversation="c1",
                                   thread="t1", requester="console:ana", resume_from=again.id)  # fmt: skip
    third = await engine.wait(third.id, timeout=10)
    assert third.status is RunStatus.COMPLETED and _children(rig, third) == []  # the step was cached
    assert rig.calls["flaky"] == 2


async def test_map_over_a_workflow_step_starts_one_child_per_item(rig: Rig) -> None:
    rig.broken["flaky"] = False  # type: ignore[attr-defined]
    engine = rig.engine(child=CHILD, fan="""
        name: fan
        nodes:
          - id: each
            map: {items: [a, b, c], as: v, max_parallel: 2}
            workflow: child
            with: {message: "{{ v }}"}
    """)
    parent = await _start(engine, "fan")
    assert parent.status is RunStatus.COMPLETED, parent.reason
    children = sorted(_children(rig, parent), key=lambda r: r.parent_node or "")
    assert [c.parent_node for c in children] == ["each[0]", "each[1]", "each[2]"]
    latest = {e.node_id: e for e in rig.store.steps.journal([parent.id])}
    output = json.loads(rig.store.blobs.get_blob(latest["each"].output_digest or ""))
    assert [o["outputs"]["first"] for o in output] == ["once(a)", "once(b)", "once(c)"]


def test_recursion_is_refused_at_load_naming_the_cycle(tmp_path: Path) -> None:
    for name, text in {
        "a": "name: a\nnodes:\n  - id: call\n    workflow: b\n",
        "b": "name: b\nnodes:\n  - id: x\n    bash: echo\n"
             "  - id: back\n    depends_on: [x]\n    workflow: a\n",
        "self": "name: self\nnodes:\n  - id: me\n    workflow: self\n",
        "ok": "name: ok\nnodes:\n  - id: x\n    workflow: leaf\n",
        "leaf": "name: leaf\nnodes:\n  - id: x\n    bash: echo\n",
        "lost": "name: lost\nnodes:\n  - id: x\n    workflow: leaff\n",
        "broke": "name: broke\nnodes:\n  - id: x\n    bsh: echo\n",
        "uses": "name: uses\nnodes:\n  - id: call\n    workflow: broke\n",
    }.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    entries = {e.name: e for e in Catalog([tmp_path]).entries()}
    assert str(entries["a"].error).endswith(
        "a.yaml:4: workflow `a` calls itself through others (a -> b -> a, at node `call`); "
        "it would start child runs forever")
    assert "(b -> a -> b, at node `back`)" in str(entries["b"].error)
    assert "workflow `self` calls itself (self -> self, at node `me`)" in str(entries["self"].error)
    assert entries["ok"].ok and entries["leaf"].ok
    error = entries["lost"].error
    assert error is not None and "calls workflow `leaff`, which does not exist" in str(error)
    assert error.hint == "Did you mean `leaf`?"
    # a parent of a child that does not load could not run either: it says why, not the child
    uses = entries["uses"].error
    assert uses is not None and str(uses).endswith("uses.yaml:4: node `call` calls workflow `broke`, "
                                                   "whose file does not load")
    assert "unknown key `bsh`" in str(entries["broke"].error)


def test_a_chain_deeper_than_the_limit_is_refused(tmp_path: Path) -> None:
    from core.workflows.subworkflows import MAX_DEPTH

    for i in range(MAX_DEPTH + 1):
        body = f"    workflow: w{i + 1}\n" if i < MAX_DEPTH else "    bash: echo\n"
        (tmp_path / f"w{i}.yaml").write_text(f"name: w{i}\nnodes:\n  - id: x\n{body}")
    entries = {e.name: e for e in Catalog([tmp_path]).entries()}
    assert not entries["w0"].ok
    assert "nest 6 deep (w0 -> w1 -> w2 -> w3 -> w4 -> w5)" in str(entries["w0"].error)
    assert entries["w1"].ok


def test_a_chain_cut_where_the_limit_was_passed_says_it_goes_on(tmp_path: Path) -> None:
    from core.workflows.subworkflows import MAX_DEPTH

    for i in range(MAX_DEPTH + 2):  # 7 deep: the check stops looking one past the limit
        body = f"    workflow: w{i + 1}\n" if i < MAX_DEPTH + 1 else "    bash: echo\n"
        (tmp_path / f"w{i}.yaml").write_text(f"name: w{i}\nnodes:\n  - id: x\n{body}")
    entries = {e.name: e for e in Catalog([tmp_path]).entries()}
    assert "nest at least 7 deep (w0 -> w1 -> w2 -> w3 -> w4 -> w5 -> …)" in str(entries["w0"].error)


async def test_a_map_of_gated_children_waits_for_each_and_completes_after_the_last(rig: Rig) -> None:
    engine = rig.engine(gated=GATED, train="""
        name: train
        nodes:
          - id: each
            map: {items: [a, b], as: v, max_parallel: 2}
            workflow: gated
    """)
    parent = await _start(engine, "train")
    assert parent.status is RunStatus.PAUSED
    children = sorted(_children(rig, parent), key=lambda r: r.parent_node or "")
    assert [c.status for c in children] == [RunStatus.PAUSED, RunStatus.PAUSED]
    assert parent.reason is not None and parent.reason.startswith("waiting on child ")
    finished = asyncio.Event()

    async def watch(event: EngineEvent) -> None:
        done = event.kind is EventKind.RUN_FINISHED and event.run_status == "completed"
        if done and event.run_id == parent.id:
            finished.set()

    engine.subscribe(watch)
    await engine.approve(children[0].id, actor="console:bob")
    await engine.wait(children[0].id, timeout=10)
    assert rig.store.runs.get_run(parent.id).status is RunStatus.PAUSED  # the other child still waits
    await engine.approve(children[1].id, actor="console:bob")
    await asyncio.wait_for(finished.wait(), timeout=10)
    assert rig.calls["once"] == 2  # each child published once, none twice
    assert len(_children(rig, parent)) == 2  # no child started again


async def test_a_parent_resumed_from_an_earlier_run_takes_over_its_waiting_child(rig: Rig) -> None:
    engine = rig.engine(gated=GATED, caller=CALLS_GATED)
    first = await _start(engine, "caller")
    (child,) = _children(rig, first)
    await engine.abandon(first.id, actor="console:ana")  # cancels the child too
    assert rig.store.runs.get_run(child.id).status is RunStatus.CANCELLED
    second = await engine.start_run(workflow="caller", args={}, platform="console", conversation="c1",
                                    thread="t1", requester="console:ana", resume_from=first.id)  # fmt: skip
    second = await engine.wait(second.id, timeout=10)
    assert second.status is RunStatus.PAUSED
    (new,) = _children(rig, second)
    assert new.id != child.id and new.resumed_from == child.id  # a cancelled child is not re-used


async def test_children_go_through_their_workflows_concurrency_queue(rig: Rig) -> None:
    rig.broken["flaky"] = False  # type: ignore[attr-defined]
    limited = CHILD.replace("name: child\n", "name: child\n    concurrency: {limit: 1}\n")
    engine = rig.engine(child=limited, fan="""
        name: fan
        nodes:
          - id: each
            map: {items: [a, b, c], as: v, max_parallel: 3}
            workflow: child
            with: {message: "{{ v }}"}
    """)
    queued: list[str] = []

    async def watch(event: EngineEvent) -> None:
        if event.kind is EventKind.RUN_QUEUED:
            queued.append(event.run_id)

    engine.subscribe(watch)
    await engine.start()  # admits queued runs as slots free (its recovery loop)
    try:
        parent = await _start(engine, "fan")
    finally:
        await engine.stop()
    assert parent.status is RunStatus.COMPLETED, parent.reason
    children = _children(rig, parent)
    assert len(children) == 3 and all(c.status is RunStatus.COMPLETED for c in children)
    assert len(queued) == 2 and set(queued) <= {c.id for c in children}  # one at a time: two waited
    audit = [e.action for c in children for e in rig.store.events.audit_log(c.id)]
    assert audit.count("queued") == 2
