from __future__ import annotations

import pytest

from core.engine.contracts import OFFENDING_CHARS, check_output, compile_schema
from core.errors import OutputContractViolation
from core.workflows.model import OutputContract

TITLE_AND_BODY = OutputContract(format="json", schema={"type": "object", "required": ["title", "body"]})


def test_text_format_returns_the_text_unchanged() -> None:
    assert check_output("n", "  any {text\n", OutputContract()) == "  any {text\n"


def test_json_format_returns_the_parsed_value() -> None:
    assert check_output("n", '{"title": "T", "body": "B"}\n', TITLE_AND_BODY) == {"title": "T", "body": "B"}
    assert check_output("n", "[1, 2]", OutputContract(format="json")) == [1, 2]


def test_invalid_json_names_node_rule_and_output() -> None:
    with pytest.raises(OutputContractViolation) as caught:
        check_output("draft", "Sure! Here are the notes", TITLE_AND_BODY)
    error = caught.value
    assert error.node_id == "draft"
    assert error.rule == "output is not valid JSON: Expecting value at line 1 column 1"
    assert error.offending == "Sure! Here are the notes"
    assert str(error) == (
        "step `draft` broke its output contract: output is not valid JSON: "
        "Expecting value at line 1 column 1; output was: Sure! Here are the notes"
    )
    assert error.hint.startswith("Fix the step")


def test_json_error_position_points_into_the_output() -> None:
    with pytest.raises(OutputContractViolation) as caught:
        check_output("n", '{"a": 1,\n "b": }', OutputContract(format="json"))
    assert caught.value.rule == "output is not valid JSON: Expecting value at line 2 column 7"


def test_missing_required_property_is_named_with_its_path() -> None:
    with pytest.raises(OutputContractViolation) as caught:
        check_output("draft", '{"body": "B"}', TITLE_AND_BODY)
    assert caught.value.rule == "output.schema: 'title' is a required property at $"
    assert "step `draft`" in str(caught.value)


def test_nested_violation_names_the_json_path() -> None:
    contract = OutputContract(
        format="json",
        schema={"type": "object", "properties": {"items": {"type": "array", "items": {"type": "integer"}}}},
    )
    with pytest.raises(OutputContractViolation) as caught:
        check_output("n", '{"items": [1, "two"]}', contract)
    assert caught.value.rule == "output.schema: 'two' is not of type 'integer' at $.items[1]"


def test_offending_text_is_cut_at_200_characters_with_an_ellipsis() -> None:
    output = "x" * 500
    with pytest.raises(OutputContractViolation) as caught:
        check_output("n", output, OutputContract(format="json"))
    assert caught.value.offending == "x" * OFFENDING_CHARS + "…"
    assert str(caught.value).endswith("x" * OFFENDING_CHARS + "…")


def test_newlines_in_the_offending_text_keep_the_message_on_one_line() -> None:
    with pytest.raises(OutputContractViolation) as caught:
        check_output("n", "line one\nline two", OutputContract(format="json"))
    assert "\n" not in str(caught.value)
    assert caught.value.offending == "line one\nline two"


def test_empty_output_is_reported_as_empty() -> None:
    with pytest.raises(OutputContractViolation) as caught:
        check_output("n", "", OutputContract(format="json"))
    assert str(caught.value).endswith("output was: (empty)")


def test_an_invalid_schema_fails_the_step_with_its_own_rule() -> None:
    contract = OutputContract(format="json", schema={"type": "no-such-type"})
    with pytest.raises(OutputContractViolation) as caught:
        check_output("n", "{}", contract)
    assert caught.value.rule.startswith("output.schema is not a valid JSON Schema:")


def test_validators_are_compiled_once_per_schema_whatever_the_key_order() -> None:
    first = compile_schema({"type": "object", "required": ["a"]})
    second = compile_schema({"required": ["a"], "type": "object"})
    assert first is second
    assert compile_schema({"type": "object", "required": ["b"]}) is not first
