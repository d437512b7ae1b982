"""DAG queries: stable topological order, downstream sets, cycles."""

from __future__ import annotations

import pytest

from core.errors import WorkflowDefinitionError
from core.workflows.model import Workflow
from core.workflows.validation import downstream, find_cycle, problems, topological_order, validate


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
