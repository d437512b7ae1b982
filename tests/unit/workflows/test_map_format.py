"""`map:` at load: what it accepts, and every error naming the line and the fix."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from core.errors import WorkflowDefinitionError
from core.workflows.loader import load_workflow_text

LoadError = Callable[[str], WorkflowDefinitionError]


def test_a_map_node_loads_with_its_defaults() -> None:
    workflow = load_workflow_text(
        "name: m\nnodes:\n  - id: each\n    map: {items: [1, 2]}\n    bash: echo {{ item }}\n"
    )
    spec = workflow.node("each").map
    assert spec is not None
    assert (spec.items, spec.as_, spec.max_parallel, spec.on_failure, spec.max_items) == (
        [1, 2], "item", 4, "continue", 1000,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("node", "line", "message", "hint"),
    [
        ("    map: {items: [1], as: n}\n    bash: echo {{ item }}\n", 5,
         "uses unknown variable `item`", "Did you mean"),
        ("    map: {items: [1], as: n}\n    when: '{{ n > 0 }}'\n    bash: echo {{ n }}\n", 5,
         "uses the item `n`, which exists only in the step each item runs", "Decide per item"),
        ("    map: {items: [1], as: inputs}\n    bash: echo hi\n", 4,
         "hides the template name `inputs`", "Name the item variable something else"),
        ("    map: {items: [1]}\n    approval: Ship?\n", 4,
         "`map:` does not apply to approval nodes", "ask once about all items"),
        ("    map: {items: '{{ nodes.list.output }}'}\n    bash: echo {{ item }}\n", 4,
         "uses `nodes.list` in `map.items` but `list` is not in its `depends_on`", "Add `list`"),
        ("    map: {items: [1], on_failure: sometimes}\n    bash: echo {{ item }}\n", 4,
         "on_failure", "continue"),
        ("    map: {items: [1], max_parallel: 0}\n    bash: echo {{ item }}\n", 4,
         "max_parallel", ""),
    ],
)
def test_map_errors_name_the_line_and_the_fix(
    load_error: LoadError, node: str, line: int, message: str, hint: str
) -> None:
    error = load_error("name: m\nnodes:\n  - id: each\n" + node)
    assert error.line == line, error.message
    assert message in error.message
    assert hint in (error.hint or "") + error.message
