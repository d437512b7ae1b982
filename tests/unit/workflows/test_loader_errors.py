"""Every load error names the file, the line and the fix (one test per case)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import yaml

from core.errors import WorkflowDefinitionError
from core.workflows import yaml_source

LoadError = Callable[[str], WorkflowDefinitionError]


def test_yaml_syntax_error_names_line(load_error: LoadError) -> None:
    error = load_error(
        """
        name: broken
        nodes:
          - id: a
            bash: echo: this needs quotes
        """
    )
    assert error.line == 4
    assert "YAML syntax error: mapping values are not allowed" in error.message
    assert error.message.startswith(f"{error.file}:4: ")
    assert "quotes" in error.hint


@pytest.mark.parametrize("loader", ["libyaml", "pure-python"])
@pytest.mark.parametrize("levels", [100, 990, 5000])
def test_a_file_nested_too_deeply_is_an_error_not_a_crash(
    load_error: LoadError, monkeypatch: pytest.MonkeyPatch, loader: str, levels: int
) -> None:
    if loader == "pure-python":  # as on a machine without libyaml, whose parser recurses per level
        monkeypatch.setattr(yaml_source, "_Loader", yaml.SafeLoader)
    error = load_error("nodes: " + "[" * levels + "]" * levels + "\n")
    assert error.line == 1
    assert error.message.endswith(":1: the file is nested too deeply")
    assert error.hint.startswith("Flatten the YAML")


def test_tab_indentation_hint(load_error: LoadError) -> None:
    error = load_error("name: t\nnodes:\n\t- id: a\n")
    assert error.line == 3
    assert error.hint == "Replace the tab characters on line 3 with spaces."


def test_unclosed_quote_says_where_it_opened(load_error: LoadError) -> None:
    error = load_error('name: q\nnodes:\n  - id: a\n    bash: "echo\n')
    assert "YAML syntax error" in error.message
    assert "(opened at line 4)" in error.message


def test_duplicate_yaml_key(load_error: LoadError) -> None:
    error = load_error(
        """
        name: dup
        nodes:
          - id: a
            bash: echo 1
            bash: echo 2
        """
    )
    assert error.line == 5
    assert "duplicate key `bash` (first at line 4)" in error.message


def test_not_a_mapping(load_error: LoadError) -> None:
    error = load_error("- just\n- a list\n")
    assert error.line == 1
    assert "must be a YAML mapping" in error.message
    assert "name:" in error.hint


def test_unknown_key_with_did_you_mean(load_error: LoadError) -> None:
    error = load_error(
        """
        name: typo
        nodes:
          - id: a
            bash: echo a
          - id: b
            dependson: [a]
            bash: echo b
        """
    )
    assert error.line == 6
    assert "unknown key `dependson` in node `b`" in error.message
    assert error.hint == "Did you mean `depends_on`?"


def test_unknown_top_level_key_lists_allowed_keys_without_a_close_match(load_error: LoadError) -> None:
    error = load_error(
        """
        name: typo
        zzz: 1
        nodes:
          - {id: a, bash: echo}
        """
    )
    assert error.line == 2
    assert "unknown key `zzz` in the workflow" in error.message
    allowed = "name, description, inputs, defaults, nodes, network, env, secrets, schedules, concurrency, " \
        "notify"
    assert error.hint == f"Allowed keys: {allowed}."


def test_unknown_key_in_nested_model(load_error: LoadError) -> None:
    error = load_error(
        """
        name: nested
        nodes:
          - id: a
            prompt: hi
            output: {format: json, shema: {type: object}}
        """
    )
    assert error.line == 5
    assert "unknown key `shema` in `output` of node `a`" in error.message
    assert error.hint == "Did you mean `schema`?"


def test_source_key_is_not_part_of_the_format(load_error: LoadError) -> None:
    error = load_error("name: s\nsource: x\nnodes: [{id: a, bash: echo}]\n")
    assert error.line == 2
    assert "unknown key `source`" in error.message


def test_node_without_kind(load_error: LoadError) -> None:
    error = load_error(
        """
        name: nokind
        nodes:
          - id: a
            bash: echo
          - id: b
            depends_on: [a]
        """
    )
    assert error.line == 5
    assert error.message.endswith("node `b` has no kind")
    assert "exactly one of" in error.hint and "`approval:`" in error.hint


def test_node_with_two_kinds_points_at_the_second(load_error: LoadError) -> None:
    error = load_error(
        """
        name: twokinds
        nodes:
          - id: a
            bash: echo
            prompt: summarize
        """
    )
    assert error.line == 5
    assert "node `a` has 2 kinds (bash and prompt)" in error.message
    assert "own node" in error.hint


def test_duplicate_node_ids(load_error: LoadError) -> None:
    error = load_error(
        """
        name: dupids
        nodes:
          - id: a
            bash: echo 1
          - id: a
            bash: echo 2
        """
    )
    assert error.line == 5
    assert "duplicate node id `a` (also node #1)" in error.message
    assert "unique" in error.hint


def test_unknown_depends_on_with_did_you_mean(load_error: LoadError) -> None:
    error = load_error(
        """
        name: deps
        nodes:
          - id: collect
            bash: echo
          - id: draft
            depends_on:
              - colect
            prompt: x
        """
    )
    assert error.line == 7
    assert "node `draft` depends on unknown node `colect`" in error.message
    assert error.hint == "Did you mean `collect`?"


def test_cycle_is_printed(load_error: LoadError) -> None:
    error = load_error(
        """
        name: cycle
        nodes:
          - id: a
            depends_on: [c]
            bash: echo a
          - id: b
            depends_on: [a]
            bash: echo b
          - id: c
            depends_on: [b]
            bash: echo c
        """
    )
    assert error.line == 4
    assert "`depends_on` forms a cycle: a -> c -> b -> a" in error.message
    assert "Remove one of these dependencies" in error.hint


def test_self_dependency_is_a_cycle(load_error: LoadError) -> None:
    error = load_error("name: self\nnodes:\n  - {id: a, depends_on: [a], bash: echo}\n")
    assert "cycle: a -> a" in error.message


def test_template_reference_outside_depends_on(load_error: LoadError) -> None:
    error = load_error(
        """
        name: refs
        nodes:
          - id: collect
            bash: echo
          - id: other
            bash: echo
          - id: draft
            depends_on: [other]
            prompt: "Summarize {{ nodes.collect.output }}"
        """
    )
    assert error.line == 9
    assert "node `draft` uses `nodes.collect` in `prompt` but `collect` is not in its `depends_on`" in (
        error.message
    )
    assert error.hint == "Add `collect` to `depends_on` of `draft`."


def test_template_reference_inside_with(load_error: LoadError) -> None:
    error = load_error(
        """
        name: refs
        nodes:
          - id: collect
            bash: echo
          - id: post
            tool: post
            with:
              body:
                text: "{{ nodes['collect'].output }}"
        """
    )
    assert error.line == 9
    assert "`nodes.collect` in `with.body.text`" in error.message


def test_template_that_does_not_compile_points_inside_block_scalar(load_error: LoadError) -> None:
    error = load_error(
        """
        name: jinja
        nodes:
          - id: a
            bash: |
              echo one
              echo {{ inputs.message
        """
    )
    assert error.line == 6
    assert "template in `bash` of `a` does not compile" in error.message
    assert "jinja2 syntax" in error.hint


def test_unknown_filter(load_error: LoadError) -> None:
    error = load_error("name: f\nnodes:\n  - {id: a, bash: 'echo {{ inputs.message | uper }}'}\n")
    assert error.line == 3
    assert "unknown filter `uper`" in error.message
    assert error.hint == "Did you mean `upper`?"


def test_unknown_template_variable(load_error: LoadError) -> None:
    error = load_error("name: v\nnodes:\n  - {id: a, bash: 'echo {{ input.version }}'}\n")
    assert "uses unknown variable `input`" in error.message
    assert error.hint == "Did you mean `inputs`?"


def test_nodes_without_literal_id(load_error: LoadError) -> None:
    error = load_error("name: v\nnodes:\n  - {id: a, prompt: '{{ nodes | tojson }}'}\n")
    assert "uses `nodes` without a literal node id" in error.message


def test_retry_on_unsafe_node(load_error: LoadError) -> None:
    error = load_error(
        """
        name: retry
        nodes:
          - id: send
            bash: ./send-mail.sh
            retry: {attempts: 3}
        """
    )
    assert error.line == 5
    assert "node `send` is `unsafe` and cannot `retry` automatically" in error.message
    assert "replay: idempotent" in error.hint


def test_retry_on_unsafe_by_workflow_default(load_error: LoadError) -> None:
    error = load_error(
        """
        name: retry
        defaults: {replay: unsafe}
        nodes:
          - id: think
            prompt: hi
            retry: {attempts: 2}
        """
    )
    assert "`think` is `unsafe`" in error.message


def test_invalid_json_schema(load_error: LoadError) -> None:
    error = load_error(
        """
        name: schema
        nodes:
          - id: draft
            prompt: hi
            output:
              format: json
              schema:
                type: object
                required: title
        """
    )
    assert error.line == 9
    assert "invalid JSON Schema in `output.schema` of `draft` at required" in error.message
    assert "'title' is not of type 'array'" in error.message
    assert "Fix the schema" in error.hint


def test_schema_needs_json_format(load_error: LoadError) -> None:
    error = load_error("name: s\nnodes:\n  - id: a\n    prompt: hi\n    output: {schema: {type: object}}\n")
    assert error.line == 5
    assert "declares an output `schema` but its format is `text`" in error.message
    assert error.hint == "Add `format: json` to `output:` (schemas check JSON output)."


@pytest.mark.parametrize(
    ("declaration", "line", "expected", "hint"),
    [
        ("v: {type: str}", 3, "input `v` has unknown type `str`", "Did you mean `string`?"),
        (
            "v: {type: integer, default: 'x'}",
            3,
            "input `v` default 'x' is not of type integer",
            "Give a default of type integer, or change `type:`.",
        ),
        (
            "v:\n    type: string\n    required: true\n    default: a",
            6,
            "input `v` is required and also has a default",
            "Remove `default:` or `required: true`: an input with a default is never missing.",
        ),
        (
            "v: {type: string, enum: [a, 1]}",
            3,
            "input `v` enum value 1 is not of type string",
            "Make every `enum` value of type string.",
        ),
        (
            "v: {type: string, enum: [a, b], default: c}",
            3,
            "input `v` default 'c' is not one of its enum values",
            "Pick a default from ['a', 'b'].",
        ),
        ("v: {type: integer, defualt: 3}", 3, "unknown key `defualt` in input `v`", "Did you mean"),
        ("my-input: {type: string}", 3, "input name `my-input` is not a plain identifier", "Use letters"),
        ("message: {type: integer}", 3, "input `message` must be of type string", "Remove `type:`"),
        ("v: {type: boolean, default: 1}", 3, "default 1 is not of type boolean", "Give a default"),
    ],
)
def test_bad_inputs_declarations(
    load_error: LoadError, declaration: str, line: int, expected: str, hint: str
) -> None:
    error = load_error(f"name: inputs\ninputs:\n  {declaration}\nnodes: [{{id: a, bash: echo}}]\n")
    assert expected in error.message
    assert error.line == line
    assert error.hint.startswith(hint)


def test_missing_script_file(load_error: LoadError) -> None:
    error = load_error("name: s\nnodes:\n  - id: a\n    script: scripts/missing.py\n")
    assert error.line == 4
    assert "script `scripts/missing.py` of node `a` does not exist" in error.message
    assert "relative to the workflow file" in error.hint


def test_inline_script_syntax_error_points_at_its_line(load_error: LoadError) -> None:
    error = load_error(
        """
        name: s
        nodes:
          - id: a
            script: |
              import sys
              print(sys.argv
        """
    )
    assert error.line in (6, 7)  # Python reports the unclosed bracket's line
    assert "inline script of `a` has a Python syntax error" in error.message


def test_script_file_syntax_error(write_workflow: Callable[..., object], load_error: LoadError) -> None:
    write_workflow("def broken(:\n    pass\n", name="bad.py")
    error = load_error("name: s\nnodes:\n  - id: a\n    script: bad.py\n")
    assert error.line == 4
    assert "script `bad.py` of node `a` has a Python syntax error at its line 1" in error.message


def test_missing_declared_file(write_workflow: Callable[..., object], load_error: LoadError) -> None:
    write_workflow("all:\n", name="Makefile")
    error = load_error(
        """
        name: f
        nodes:
          - id: a
            bash: make
            files:
              - Makefile
              - scripts/none.sh
        """
    )
    assert error.line == 7
    assert "file `scripts/none.sh` declared by node `a` does not exist" in error.message
    assert "remove it from `files:`" in error.hint


def test_kind_specific_key_on_wrong_kind(load_error: LoadError) -> None:
    error = load_error("name: w\nnodes:\n  - id: a\n    bash: echo\n    with: {x: 1}\n")
    assert error.line == 5
    assert "`with:` only applies to tool and workflow nodes, and `a` is a bash node" in error.message


@pytest.mark.parametrize(
    ("text", "line", "expected", "hint"),
    [
        ("name: bad name\nnodes: [{id: a, bash: x}]\n", 1, "workflow name `bad name` is not valid", "Use"),
        ("name: n\nnodes: [{id: 'a b', bash: x}]\n", 2, "node id `a b` is not valid", "Use"),
        ("name: n\n", 1, "the workflow has no `nodes:`", "List its steps"),
        ("name: n\nnodes: {a: 1}\n", 2, "`nodes:` must be a list of steps", "Write each node"),
        ("name: n\nnodes: [{id: a, bash: x, replay: pur}]\n", 2, "`replay` of node `a` is `pur`", "Did you"),
        ("name: n\nnodes: [{id: a, bash: x, timeout: -1}]\n", 2, "`timeout` of node `a`", "Give `timeout:`"),
        ("name: n\nnodes: [{id: a, bash: x, depends_on: b}]\n", 2, "`depends_on` of node `a`", "Write"),
        ("nodes: [{id: a, bash: x}]\n", 1, "the workflow is missing `name`", "Add `name:`."),
        ("name: n\nnodes:\n  - bash: x\n", 3, "node #1 is missing `id`", "Add `id:`."),
    ],
)
def test_shape_errors(load_error: LoadError, text: str, line: int, expected: str, hint: str) -> None:
    error = load_error(text)
    assert expected in error.message
    assert error.line == line
    assert error.hint.startswith(hint)


def test_the_first_error_in_the_file_is_reported(load_error: LoadError) -> None:
    error = load_error(
        """
        name: order
        nodes:
          - id: a
            bahs: echo
          - id: b
            bash: echo
            timeout: 0
        """
    )
    assert error.line == 4


def test_unreadable_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from core.workflows.loader import load_workflow_file

    with pytest.raises(WorkflowDefinitionError) as info:
        load_workflow_file(tmp_path / "absent.yaml")
    assert "cannot read the file" in info.value.message
    assert "exists" in info.value.hint
