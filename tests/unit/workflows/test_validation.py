"""DAG queries: stable topological order, downstream sets, cycles."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import WorkflowDefinitionError
from core.workflows.model import Workflow
from core.workflows.validation import (
    downstream,
    find_cycle,
    in_file_order,
    kahn_order,
    problems,
    topological_order,
    validate,
)


def _workflow(*nodes: tuple[str, list[str]]) -> Workflow:
    return Workflow.model_validate(
        {"name": "dag", "nodes": [{"id": i, "depends_on": deps, "bash": "true"} for i, deps in nodes]}
    )


def test_topological_order_keeps_file_order_among_ready_nodes() -> None:
    workflow = _workflow(("z", []), ("b", ["z"]), ("a", []), ("c", ["a", "b"]), ("d", []))
    assert topological_order(workflow) == ["z", "b", "a", "c", "d"]


def test_topological_order_puts_dependencies_first_even_when_listed_later() -> None:
    workflow = _workflow(("publish", ["draft"]), ("draft", ["collect"]), ("collect", []), ("x", []))
    assert topological_order(workflow) == ["collect", "draft", "publish", "x"]


def test_topological_order_of_a_diamond_is_stable_across_calls() -> None:
    workflow = _workflow(("a", []), ("c", ["a"]), ("b", ["a"]), ("d", ["b", "c"]))
    assert topological_order(workflow) == ["a", "c", "b", "d"]
    assert topological_order(workflow) == topological_order(workflow.model_copy())


def test_topological_order_refuses_a_cycle() -> None:
    with pytest.raises(WorkflowDefinitionError, match="cycle: a -> b -> a"):
        topological_order(_workflow(("a", ["b"]), ("b", ["a"])))


def test_downstream_is_transitive_and_excludes_the_node() -> None:
    workflow = _workflow(("a", []), ("b", ["a"]), ("c", ["b"]), ("d", []), ("e", ["d", "c"]))
    assert downstream(workflow, "a") == {"b", "c", "e"}
    assert downstream(workflow, "d") == {"e"}
    assert downstream(workflow, "e") == set()


def test_downstream_of_unknown_node() -> None:
    with pytest.raises(KeyError):
        downstream(_workflow(("a", [])), "nope")


def test_find_cycle_reports_only_the_cycle() -> None:
    workflow = _workflow(("start", []), ("x", ["start", "z"]), ("y", ["x"]), ("z", ["y"]))
    assert find_cycle(workflow) == ["x", "z", "y", "x"]
    assert find_cycle(_workflow(("a", []), ("b", ["a"]))) is None


def test_validate_a_programmatic_workflow() -> None:
    good = _workflow(("a", []), ("b", ["a"]))
    assert validate(good) is good
    assert problems(good) == []
    with pytest.raises(WorkflowDefinitionError, match="depends on unknown node `q`"):
        validate(_workflow(("a", ["q"])))


# -- the file-order fast path ----------------------------------------------------------------


@st.composite
def _graphs(draw: st.DrawFn) -> list[tuple[str, list[str]]]:
    """Node ids with dependencies on any node (cycles, self-loops and unknown ids included),
    often in an order where every dependency comes first."""
    count = draw(st.integers(1, 9))
    ids = [f"n{i}" for i in range(count)]
    earlier_only = draw(st.booleans())
    nodes = []
    for index, node_id in enumerate(ids):
        pool = ids[:index] if earlier_only else [*ids, "ghost"]
        deps = draw(st.lists(st.sampled_from(pool), max_size=3)) if pool else []
        nodes.append((node_id, deps))
    if draw(st.booleans()):
        nodes = draw(st.permutations(nodes))
    return nodes


@given(_graphs())
@settings(max_examples=300, deadline=None)
def test_file_order_fast_path_agrees_with_kahn_and_with_the_cycle_search(
    nodes: list[tuple[str, list[str]]],
) -> None:
    workflow = _workflow(*nodes)
    try:
        general: list[str] | None = kahn_order(workflow)
    except WorkflowDefinitionError:
        general = None
    if in_file_order(workflow):
        assert general == [node_id for node_id, _ in nodes]  # the fast path's answer
        assert find_cycle(workflow) is None
    if general is not None:
        assert topological_order(workflow) == general
    else:
        with pytest.raises(WorkflowDefinitionError):
            topological_order(workflow)
    known = {node_id for node_id, _ in nodes}
    if all(dep in known for _, deps in nodes for dep in deps):  # else the unknown id is reported
        cycles = [p for p in problems(workflow) if "cycle" in p.message]
        assert bool(cycles) == (find_cycle(workflow) is not None) == (general is None)


def test_a_duplicate_id_takes_the_general_path() -> None:
    workflow = _workflow(("a", []), ("a", []), ("b", ["a"]))
    assert not in_file_order(workflow)  # reported by `problems`; the order is Kahn's, as before
    with pytest.raises(WorkflowDefinitionError) as fast:
        topological_order(workflow)
    with pytest.raises(WorkflowDefinitionError) as general:
        kahn_order(workflow)
    assert str(fast.value) == str(general.value)
    assert any("duplicate node id" in p.message for p in problems(workflow))
