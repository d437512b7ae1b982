"""A tool call checked against its input schema (pure): JSON types read strictly, one line."""

from __future__ import annotations

import math

import pytest

from adapters.mcp.arguments import describe, mistake

SCHEMAS = {
    "wait_run": {"type": "object", "required": ["run"], "properties": {
        "run": {"type": "string", "description": "The run's id."},
        "timeout_s": {"type": "number", "minimum": 0, "maximum": 600, "description": "Seconds."}}},
    "run_workflow": {"type": "object", "required": ["workflow"], "properties": {
        "workflow": {"type": "string"}, "force": {"type": "boolean"},
        "args": {"anyOf": [{"type": "object"}, {"type": "null"}]}}},
}


@pytest.mark.parametrize(("tool", "arguments", "error"), [
    ("wait_run", {}, "`run` is required by wait_run."),
    ("wait_run", {"run": 1}, "`run` must be text (a JSON string), not the number 1."),
    ("wait_run", {"run": "x", "timeout_s": math.nan}, "`timeout_s` must be a number from 0 to 600, not NaN."),
    ("wait_run", {"run": "x", "timeout_s": True}, "`timeout_s` must be a number from 0 to 600, not true."),
    ("wait_run", {"run": "x", "wait": 1}, "`wait` is not an argument of wait_run."),
    ("run_workflow", {"workflow": "w", "force": "yes"},
     '`force` must be true or false, not the string "yes".'),
    ("run_workflow", {"workflow": "w", "args": [1]}, "`args` must be a JSON object, not an array."),
    ("wait_ruhn", {}, "There is no tool `wait_ruhn`; did you mean `wait_run`?"),
    ("run_workflow", [1], "The arguments of run_workflow must be a JSON object, not an array."),
])  # fmt: skip
def test_a_mistake_is_one_line_naming_the_argument_with_a_hint(
    tool: str, arguments: object, error: str
) -> None:
    found = mistake(tool, SCHEMAS, arguments)
    assert found is not None and found.error == error and found.hint


def test_a_well_formed_call_passes_and_null_is_an_optional_arguments_absence() -> None:
    assert mistake("wait_run", SCHEMAS, {"run": "x", "timeout_s": 600}) is None
    assert mistake("run_workflow", SCHEMAS, {"workflow": "w", "args": None, "force": False}) is None


def test_values_are_described_by_their_json_type() -> None:
    assert [describe(v) for v in (None, False, 3, "a", {}, [])] == [
        "null", "false", "the number 3", 'the string "a"', "an object", "an array"]
