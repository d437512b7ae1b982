"""`map:`: each item's cache key (an item added or changed leaves the others cached), the
executor's item steps on `MemoryStore`, and the pure helpers of `core/engine/mapping.py`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from core.engine.cache_key import cache_key, components_of, explain, item_components
from core.engine.mapping import ItemCounts, ItemsError, items_of, only_items, split_item_id
from core.store.port import StepEntry, Transition
from core.store.records import KeyNotes, NodeStatus, RunStatus
from core.workflows.args import canonical_json
from tests.factories import create_run
from tests.unit.engine.memory_rig import Rig

MAP = """
    name: fan
    inputs:
      hosts: {type: array}
    nodes:
      - id: each
        map: {items: "{{ inputs.hosts }}", as: host, max_parallel: 2}
        tool: deploy
        with: {text: "{{ host }}"}
"""


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    rig = Rig(tmp_path)
    seen: list[str] = []
    rig.seen = seen  # type: ignore[attr-defined]

    @rig.tools.tool("deploy", replay="idempotent", inline=True)
    def deploy(text: str = "") -> str:
        seen.append(text)
        if text.startswith("bad"):
            raise RuntimeError(f"{text} is down")
        return f"deployed {text}"

    return rig


def _components(**upstream: str) -> dict[str, Any]:
    return components_of(
        node_id="each", kind="tool", definition="d", inputs={"hosts": "h1", "env": "e"}, upstream=upstream
    )


def test_an_items_key_is_its_value_not_its_position() -> None:
    node = _components(hosts="x")
    a = cache_key(item_components(node, "a"))
    assert a == cache_key(item_components(node, "a"))  # wherever "a" is in the list
    assert a != cache_key(item_components(node, "b"))
    assert a != cache_key(node)
    same = item_components(node, {"k": 1, "j": 2}), item_components(node, {"j": 2, "k": 1})
    assert cache_key(same[0]) == cache_key(same[1])
    assert explain(item_components(node, "a"), item_components(node, "b")) == "item changed"


def test_what_only_the_items_read_leaves_the_items_keys() -> None:
    before = item_components(_components(hosts="list-1"), "a", only_items=(frozenset({"hosts"}), frozenset()))
    after = item_components(_components(hosts="list-2"), "a", only_items=(frozenset({"hosts"}), frozenset()))
    assert cache_key(before) == cache_key(after)
    node = {**_components(), "inputs": {"hosts": "v2", "env": "e"}}
    kept = item_components(node, "a", only_items=(frozenset(), frozenset({"hosts"})))
    assert kept["inputs"] == {"env": "e"}
    changed_env = {**_components(), "inputs": {"hosts": "v2", "env": "f"}}
    scope = (frozenset[str](), frozenset({"hosts"}))
    assert cache_key(kept) != cache_key(item_components(changed_env, "a", only_items=scope))


def test_only_items_keeps_what_the_step_itself_reads(rig: Rig) -> None:
    workflow = rig.workflow("""
        name: m
        inputs: {env: {type: string}, hosts: {type: array}}
        nodes:
          - id: list
            bash: echo
          - id: each
            depends_on: [list]
            map: {items: "{{ nodes.list.output.hosts + inputs.hosts }}", as: h}
            bash: echo {{ h }} {{ nodes.list.output.tag }} {{ inputs.env }}
    """)
    assert only_items(workflow.node("each")) == (frozenset(), frozenset({"hosts"}))
    script = rig.workflow("""
        name: s
        inputs: {hosts: {type: array}}
        nodes:
          - id: each
            map: {items: "{{ inputs.hosts }}"}
            script: "print(1)"
    """)
    assert only_items(script.node("each")) == (frozenset(), frozenset())  # a script sees everything


async def test_an_added_or_changed_item_runs_alone_the_others_are_cached(rig: Rig) -> None:
    workflow = rig.workflow(MAP)
    first = rig.run(workflow)
    done = await rig.executor(workflow, first, args={"hosts": ["a", "b", "c"]}).execute()
    assert done.status is RunStatus.COMPLETED
    assert sorted(rig.seen) == ["a", "b", "c"]  # type: ignore[attr-defined]
    second = rig.run(workflow, resumed_from=first.id)
    again = await rig.executor(workflow, second, args={"hosts": ["a", "B", "c", "new"]}).execute()
    assert again.status is RunStatus.COMPLETED
    assert sorted(rig.seen) == ["B", "a", "b", "c", "new"]  # type: ignore[attr-defined]
    latest = {e.node_id: e for e in rig.store.steps.journal([second.id])}
    assert sorted(latest) == ["each", "each[0]", "each[1]", "each[2]", "each[3]"]
    assert json.loads(rig.store.blobs.get_blob(latest["each"].output_digest or "")) == [
        "deployed a", "deployed B", "deployed c", "deployed new",
    ]  # fmt: skip
    assert latest["each[0]"].cached_from == first.id and latest["each[2]"].cached_from == first.id
    assert latest["each[1]"].cached_from is None and latest["each[3]"].cached_from is None

    third = rig.run(workflow, resumed_from=second.id)  # an item added first: the others shift
    hosts = ["z", "a", "B", "c", "new"]
    outcome = await rig.executor(workflow, third, args={"hosts": hosts}).execute()
    assert outcome.status is RunStatus.COMPLETED
    assert sorted(rig.seen) == ["B", "a", "b", "c", "new", "z"]  # type: ignore[attr-defined]
    shifted = {e.node_id: e for e in rig.store.steps.journal([third.id])}
    keys = {e.node_id: e.idempotency_key for e in rig.store.steps.journal([first.id])}
    assert shifted["each[1]"].idempotency_key == keys["each[0]"]  # the item's, wherever it stands


async def test_failed_items_stand_in_the_output_and_fail_the_node_after_all_ran(rig: Rig) -> None:
    workflow = rig.workflow(MAP)
    run = rig.run(workflow)
    outcome = await rig.executor(workflow, run, args={"hosts": ["a", "bad1", "c", "bad2"]}).execute()
    assert outcome.status is RunStatus.FAILED and outcome.node_id == "each"
    assert outcome.reason is not None and outcome.reason.startswith(
        "2 of 4 items of `each` failed: `each[1]`, `each[3]`"
    )
    assert sorted(rig.seen) == ["a", "bad1", "bad2", "c"]  # type: ignore[attr-defined]
    node = [e for e in rig.store.steps.journal([run.id]) if e.node_id == "each"][-1]
    output = json.loads(rig.store.blobs.get_blob(node.output_digest or ""))
    assert output[0] == "deployed a" and output[2] == "deployed c"
    assert output[1]["failed"] is True and "bad1 is down" in output[1]["error"]
    summary = rig.engine(fan=MAP).summary(run.id)  # one row for the map node, none per item
    assert [(n.node_id, n.state, n.mapped) for n in summary.nodes] == [("each", "failed", "4/4 · 2 failed")]


def test_items_must_be_a_list_within_max_items() -> None:
    assert items_of("each", ("a", "b"), 2) == ["a", "b"]
    with pytest.raises(ItemsError, match="gave str, not a list"):
        items_of("each", "a,b", 5)
    with pytest.raises(ItemsError, match="gave 3 items, more than max_items 2"):
        items_of("each", [1, 2, 3], 2)


def test_item_ids_and_counts() -> None:
    assert split_item_id("deploy[3]") == ("deploy", 3)
    assert split_item_id("deploy") is None and split_item_id("a[b]") is None
    assert ItemCounts(total=50, ok=35, failed=2, running=4).text() == "37/50 · 2 failed · 4 running"
    assert ItemCounts(total=3, ok=3).text() == "3/3"


SEND = """
    name: send
    inputs:
      to: {type: array}
    nodes:
      - id: each
        map: {items: "{{ inputs.to }}", as: who}
        tool: deploy
        with: {text: "{{ who }}"}
        replay: unsafe
"""


async def test_an_unsafe_item_left_started_needs_attention_alone_and_is_resolved_alone(rig: Rig) -> None:
    engine = rig.engine(send=SEND)
    args = {"to": ["a", "b", "c"]}
    first = await engine.start_run(workflow="send", args=args, platform="console", conversation="c1",
                                   thread=None, requester="console:ana")  # fmt: skip
    assert (await engine.wait(first.id, timeout=10)).status is RunStatus.COMPLETED
    sent = next(e for e in rig.store.steps.journal([first.id]) if e.node_id == "each[1]")
    run = create_run(rig.store, workflow="send", platform="console", conversation="c1", thread=None,
                     requester="console:ana", args_digest=rig.store.blobs.put_blob(canonical_json(args)),
                     status=RunStatus.RUNNING)  # fmt: skip
    rig.store.steps.journal_start(StepEntry(run_id=run.id, node_id="each[1]", cache_key=sent.cache_key,
                                  components=sent.components, attempt=1, idempotency_key=None))  # fmt: skip
    rig.store.runs.transition(Transition(run.id, RunStatus.FAILED, actor="baton", reason="the process died"))
    rig.seen.clear()  # type: ignore[attr-defined]
    await engine.resume(run.id, actor="console:ana")
    stopped = await engine.wait(run.id, timeout=10)
    assert stopped.status is RunStatus.NEEDS_ATTENTION
    assert stopped.reason is not None and stopped.reason.startswith("step `each[1]` may have run")
    assert sorted(rig.seen) == ["a", "c"]  # type: ignore[attr-defined]  # the others ran; `b` did not
    [row] = [n for n in engine.summary(run.id).nodes]
    assert (row.node_id, row.state, row.mapped) == ("each", "needs_attention", "2/3 · 1 may have run")

    await engine.resolve(run.id, "each[1]", "done", actor="console:bo", output="deployed b by hand")
    done = await engine.wait(run.id, timeout=10)
    assert done.status is RunStatus.COMPLETED
    assert sorted(rig.seen) == ["a", "c"]  # type: ignore[attr-defined]  # never sent again
    node = [e for e in rig.store.steps.journal([run.id]) if e.node_id == "each"][-1]
    assert json.loads(rig.store.blobs.get_blob(node.output_digest or "")) == [
        "deployed a", "deployed b by hand", "deployed c",
    ]  # fmt: skip


async def test_a_running_map_is_one_row_counting_its_items(rig: Rig) -> None:
    engine = rig.engine(fan=MAP)
    run = create_run(rig.store, workflow="fan", platform="console", conversation="c1", thread=None,
                     requester="console:ana", args_digest=rig.store.blobs.put_blob(b"{}"),
                     status=RunStatus.RUNNING)  # fmt: skip
    ok = rig.store.blobs.put_blob(b"ok")
    for i in range(41):  # 35 done, 2 failed, 4 running, of 50
        started = StepEntry(run_id=run.id, node_id=f"each[{i}]", cache_key=f"k{i}", components={}, attempt=1,
                            idempotency_key=None, notes=KeyNotes(items=50))  # fmt: skip
        entry_id = rig.store.steps.journal_start(started)
        if i < 35:
            rig.store.steps.journal_finish(entry_id, status=NodeStatus.COMPLETED, output_digest=ok)
        elif i < 37:
            rig.store.steps.journal_finish(entry_id, status=NodeStatus.FAILED, error="down")
    [row] = engine.summary(run.id).nodes
    assert (row.node_id, row.state, row.mapped) == ("each", "running", "37/50 · 2 failed · 4 running")


async def test_the_run_page_lists_the_items_with_state_output_and_verdict(rig: Rig) -> None:
    engine = rig.engine(fan=MAP)
    first = await engine.start_run(workflow="fan", args={"hosts": ["a", "bad", "c"]}, platform="console",
                                   conversation="c1", thread=None, requester="console:ana")  # fmt: skip
    failed = await engine.wait(first.id, timeout=10)
    assert failed.status is RunStatus.FAILED
    detail = engine.inspect(failed)
    rows = [(n.node_id, str(n.state)) for n in detail.nodes]
    assert rows == [("each", "failed"), ("each[0]", "done"), ("each[1]", "failed"), ("each[2]", "done")]
    item = detail.nodes[2]
    assert "bad is down" in item.error and item.reason == "no earlier result"
    assert rig.store.blobs.get_blob(detail.nodes[1].output_digest or "") == b"deployed a"
    assert [n.item_of for n in detail.nodes] == [None, "each", "each", "each"]
    plans = {n.node_id: n.plan_action for n in detail.nodes}
    assert plans["each"] == "runs"


async def test_a_script_step_reads_its_item_from_stdin(rig: Rig) -> None:
    workflow = rig.workflow("""
        name: scripted
        nodes:
          - id: each
            map: {items: [{"n": 2}, {"n": 5}], as: job}
            script: |
              import json, sys
              print(json.load(sys.stdin)["job"]["n"] * 10)
            replay: pure
    """)
    run = rig.run(workflow)
    assert (await rig.executor(workflow, run).execute()).status is RunStatus.COMPLETED
    node = [e for e in rig.store.steps.journal([run.id]) if e.node_id == "each"][-1]
    assert [
        out.strip() for out in json.loads(rig.store.blobs.get_blob(node.output_digest or ""))
    ] == ["20", "50"]


async def test_a_prompt_step_asks_once_per_item(rig: Rig) -> None:
    workflow = rig.workflow("""
        name: reviewed
        nodes:
          - id: review
            map: {items: ["a.py", "b.py"], as: file}
            prompt: "Review {{ file }}"
    """)
    run = rig.run(workflow)
    assert (await rig.executor(workflow, run).execute()).status is RunStatus.COMPLETED
    node = [e for e in rig.store.steps.journal([run.id]) if e.node_id == "review"][-1]
    answers = json.loads(rig.store.blobs.get_blob(node.output_digest or ""))
    assert [a.split(": ", 1)[1] for a in answers] == ["Review a.py", "Review b.py"]


async def test_an_item_is_retried_alone_per_retry(rig: Rig) -> None:
    rig.counted("flaky", replay="idempotent", fail=1)  # its first call fails, the next ones pass
    workflow = rig.workflow("""
        name: retried
        nodes:
          - id: each
            map: {items: ["x", "y"], max_parallel: 1}
            tool: flaky
            with: {text: "{{ item }}"}
            replay: idempotent
            retry: {attempts: 2, backoff: 0}
    """)
    run = rig.run(workflow)
    assert (await rig.executor(workflow, run).execute()).status is RunStatus.COMPLETED
    assert rig.calls["flaky"] == 3  # x twice (failed, then retried), y once
    attempts = [
        (e.node_id, e.attempt, e.status) for e in rig.store.steps.journal([run.id]) if "[" in e.node_id
    ]
    assert attempts == [("each[0]", 1, NodeStatus.FAILED), ("each[0]", 2, NodeStatus.COMPLETED),
                        ("each[1]", 1, NodeStatus.COMPLETED)]  # fmt: skip


async def test_items_of_all_maps_stay_within_the_runs_max_parallel(rig: Rig) -> None:
    running, peak = 0, 0

    @rig.tools.tool("slow", replay="pure")
    async def slow(text: str = "") -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return text

    workflow = rig.workflow("""
        name: wide
        nodes:
          - id: one
            map: {items: [1, 2, 3, 4, 5, 6], max_parallel: 8}
            tool: slow
          - id: two
            map: {items: [1, 2, 3, 4, 5, 6], max_parallel: 8}
            tool: slow
    """)
    run = rig.run(workflow)
    executor = rig.executor(workflow, run)
    assert executor.s.max_parallel == 4
    assert (await executor.execute()).status is RunStatus.COMPLETED
    assert peak == 4  # two maps of eight each, within the run's four
