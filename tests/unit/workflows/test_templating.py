"""Sandboxed rendering, shell quoting, reference analysis and undefined-variable errors."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from core.errors import TemplateRenderError
from core.workflows.bash_template import render_bash
from core.workflows.model import Node, Workflow
from core.workflows.templating import (
    References,
    compile_template,
    references,
    render_template,
    render_value,
)

HOSTILE = 'it\'s $(touch pwned) `id` ; rm -rf / && echo "x" \\ ünï\n2nd line'


def test_plain_render_uses_inputs_nodes_and_run() -> None:
    context = {"inputs": {"v": "1.2"}, "nodes": {"a": {"output": "done"}}, "run": {"id": "r1"}}
    assert render_template("{{ inputs.v }}/{{ nodes.a.output }}/{{ run.id }}", context) == "1.2/done/r1"


def test_bash_render_passes_hostile_text_as_one_literal_argument(tmp_path: Path) -> None:
    context = {"inputs": {"message": HOSTILE}}
    command = render_bash("printf '%s' {{ inputs.message }}", context)
    result = subprocess.run(
        ["bash", "-c", command.text],
        cwd=tmp_path,
        env={**os.environ, **command.variables},
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    )
    assert result.stdout == HOSTILE
    assert not (tmp_path / "pwned").exists()


def test_bash_render_puts_references_in_the_text_and_values_in_variables() -> None:
    command = render_bash("echo {{ a }} && echo {{ b }}", {"a": "x y", "b": "plain"})
    assert command.text == 'echo "$BATON_ARG_1" && echo "$BATON_ARG_2"'
    assert command.variables == {"BATON_ARG_1": "x y", "BATON_ARG_2": "plain"}


def test_containers_render_as_canonical_json_and_scalars_plainly() -> None:
    context = {"d": {"b": [1, 2], "a": "é"}, "t": True, "n": None, "f": 1.5}
    assert render_template("{{ d }}|{{ t }}|{{ n }}|{{ f }}", context) == '{"a":"é","b":[1,2]}|true||1.5'
    assert render_bash("echo {{ d }}", context).variables == {"BATON_ARG_1": '{"a":"é","b":[1,2]}'}


def test_compiled_templates_are_cached() -> None:
    assert compile_template("{{ x }}-cached") is compile_template("{{ x }}-cached")


def test_render_value_keeps_types_of_single_expressions_and_renders_nested_strings() -> None:
    context = {"inputs": {"n": 5, "v": "1.0"}, "nodes": {"d": {"output": {"title": "T", "tags": ["a"]}}}}
    value = {
        "whole": "{{ nodes.d.output }}",
        "count": "{{ inputs.n }}",
        "nested": ["v{{ inputs.v }}", {"deep": " {{ nodes.d.output.title }} "}],
        "literal": 3,
    }
    assert render_value(value, context) == {
        "whole": {"title": "T", "tags": ["a"]},
        "count": 5,
        "nested": ["v1.0", {"deep": "T"}],
        "literal": 3,
    }


@pytest.mark.parametrize(
    ("source", "context", "expected", "hint"),
    [
        (
            "{{ inputs.version }}",
            {"inputs": {}},
            "template uses `inputs.version`, but `inputs` has no `version`",
            "Pass it with `--set version=…`",
        ),
        (
            "x {{ nodes.draft.output.title }}",
            {"nodes": {"draft": {"output": {"body": ""}}}},
            "template uses `nodes.draft.output.title`, but `nodes.draft.output` has no `title`",
            "Check the step's output",
        ),
        ("{{ run.id }}", {}, "template uses `run.id`, which is undefined", "Templates can use"),
        ("{{ inputs['x'] | upper }}", {"inputs": {"y": 1}}, "template uses `inputs.x`", "Pass it"),
    ],
)
def test_undefined_values_name_the_variable(
    source: str, context: dict[str, object], expected: str, hint: str
) -> None:
    with pytest.raises(TemplateRenderError) as info:
        render_template(source, context)
    assert expected in info.value.message
    assert info.value.hint.startswith(hint)


def test_undefined_in_render_value_names_the_variable() -> None:
    with pytest.raises(TemplateRenderError, match=r"`inputs\.missing`"):
        render_value({"a": "{{ inputs.missing }}"}, {"inputs": {}})


def test_sandbox_refuses_unsafe_attribute_access() -> None:
    with pytest.raises(TemplateRenderError, match="not allowed"):
        render_template("{{ inputs.__class__.__mro__ }}", {"inputs": {}})


def _node(**fields: object) -> Node:
    return Workflow.model_validate({"name": "w", "nodes": [{"id": "n", **fields}]}).nodes[0]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"bash": "echo {{ inputs.version }} {{ nodes.collect.output }}"},
            References(frozenset({"version"}), frozenset({"collect"})),
        ),
        (
            {"prompt": "{{ nodes['my-step'].output.title }} {{ inputs['who'] }}"},
            References(frozenset({"who"}), frozenset({"my-step"})),
        ),
        ({"approval": "Ship {{ inputs | tojson }}?"}, References(whole_inputs=True)),
        ({"prompt": "{% for k, v in inputs.items() %}{{ k }}{% endfor %}"}, References(whole_inputs=True)),
        (
            {"tool": "t", "with": {"a": ["{{ inputs.a }}", {"b": "{{ nodes.x.output }}"}], "c": 1}},
            References(frozenset({"a"}), frozenset({"x"})),
        ),
        ({"bash": "echo {% for i in range(3) %}{{ i }}{% endfor %} {{ run.id }}"}, References()),
        ({"script": "print({{ inputs.not_a_template }})"}, References()),  # scripts are not templated
    ],
)
def test_references(fields: dict[str, object], expected: References) -> None:
    refs = references(_node(**fields))
    assert (refs.inputs, refs.nodes, refs.whole_inputs) == (
        expected.inputs,
        expected.nodes,
        expected.whole_inputs,
    )


def test_references_of_a_loaded_workflow(load_yaml: Callable[[str], Workflow]) -> None:
    workflow = load_yaml(
        """
        name: refs
        nodes:
          - id: collect
            bash: echo {{ inputs.since }}
          - id: draft
            depends_on: [collect]
            prompt: "{{ inputs.version }}: {{ nodes.collect.output }}"
        """
    )
    assert references(workflow.node("draft")).nodes == {"collect"}
    assert references(workflow.node("draft")).inputs == {"version"}
    assert references(workflow.node("collect")).inputs == {"since"}
