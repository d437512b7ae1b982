"""Canonical args, digests, handles and input validation against `inputs:` declarations."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from typing import Any

import pytest

from core.errors import InputValidationError
from core.workflows.args import (
    args_digest,
    canonical_json,
    check_typed_keys,
    handle,
    near_miss,
    validate_inputs,
)
from core.workflows.model import Workflow


def test_canonical_json_is_sorted_compact_utf8() -> None:
    value = {"b": [1, {"z": 1, "a": "é"}], "a": True, "c": None}
    assert canonical_json(value) == '{"a":true,"b":[1,{"a":"é","z":1}],"c":null}'.encode()


def test_digest_is_sha256_of_canonical_json_and_handle_is_its_prefix() -> None:
    digest = args_digest({"x": 1})
    assert digest == hashlib.sha256(b'{"x":1}').hexdigest()
    assert handle(digest) == "args:" + digest[:8]
    assert args_digest({"x": 1, "y": 2}) == args_digest({"y": 2, "x": 1})


@pytest.mark.parametrize("bad", [math.nan, math.inf, {"a": [-math.inf]}])
def test_canonical_json_refuses_nan_and_infinity(bad: Any) -> None:
    with pytest.raises(InputValidationError, match="not valid JSON") as info:
        canonical_json(bad)
    assert "finite numbers" in info.value.hint


def test_canonical_json_refuses_non_json_values() -> None:
    with pytest.raises(InputValidationError, match="not JSON data"):
        canonical_json({"a": {1, 2}})


@pytest.fixture
def release(load_yaml: Callable[[str], Workflow]) -> Workflow:
    return load_yaml(
        """
        name: release
        inputs:
          version: {type: string, required: true}
          count: {type: integer, default: 3}
          ratio: {type: number}
          dry_run: {type: boolean, default: false}
          env: {type: string, enum: [staging, production], default: staging}
          extra: {type: object}
          tags: {type: array}
        nodes:
          - {id: a, bash: "echo {{ inputs.version }}"}
        """
    )


def test_defaults_applied_and_free_fields_kept(release: Workflow) -> None:
    result = validate_inputs(release, {"version": "1.0", "note": "free field"})
    assert result == {
        "version": "1.0",
        "count": 3,
        "ratio": None,
        "dry_run": False,
        "env": "staging",
        "extra": None,
        "tags": None,
        "note": "free field",
        "message": "",
    }


def test_message_is_always_allowed_and_must_be_text(release: Workflow) -> None:
    assert validate_inputs(release, {"version": "1", "message": "ship it"})["message"] == "ship it"
    with pytest.raises(InputValidationError, match="input `message` must be text, got integer 3"):
        validate_inputs(release, {"version": "1", "message": 3})


def test_required_input_missing_says_what_was_expected(release: Workflow) -> None:
    with pytest.raises(InputValidationError) as info:
        validate_inputs(release, {"count": 2})
    assert info.value.message == "input `version` is required (string): pass it with --set version=…"
    assert info.value.hint.startswith("Inputs of `release`: version (string, required); count (integer")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"count": "3"}, {"count": 3}),
        ({"count": "-12"}, {"count": -12}),
        ({"ratio": "2.5"}, {"ratio": 2.5}),
        ({"ratio": "2"}, {"ratio": 2}),
        ({"ratio": 7}, {"ratio": 7}),
        ({"dry_run": "true"}, {"dry_run": True}),
        ({"extra": '{"a": 1}'}, {"extra": {"a": 1}}),
        ({"tags": "[1, 2]"}, {"tags": [1, 2]}),
        ({"env": "production"}, {"env": "production"}),
    ],
)
def test_text_that_parses_exactly_is_coerced(
    release: Workflow, args: dict[str, Any], expected: dict[str, Any]
) -> None:
    result = validate_inputs(release, {"version": "1", **args})
    assert {k: result[k] for k in expected} == expected
    assert type(result[next(iter(expected))]) is type(next(iter(expected.values())))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"count": "3.0"}, 'input `count` must be an integer, got text "3.0"'),
        ({"count": "03"}, 'input `count` must be an integer, got text "03"'),
        ({"count": "three"}, 'input `count` must be an integer, got text "three"'),
        ({"count": 3.0}, "input `count` must be an integer, got number 3.0"),
        ({"count": True}, "input `count` must be an integer, got boolean true"),
        ({"ratio": False}, "input `ratio` must be a number, got boolean false"),
        ({"ratio": "nan"}, 'input `ratio` must be a number, got text "nan"'),
        ({"dry_run": 1}, "input `dry_run` must be a boolean, got integer 1"),
        ({"dry_run": "yes"}, 'input `dry_run` must be a boolean, got text "yes"'),
        ({"version": 1.2}, "input `version` must be a string, got number 1.2"),
        ({"extra": "[1]"}, "input `extra` must be an object, got an array"),
        ({"tags": {"a": 1}}, "input `tags` must be an array, got an object"),
        ({"env": "prod"}, 'input `env` must be one of "staging", "production", got "prod"'),
    ],
)
def test_type_errors_show_what_was_expected(release: Workflow, args: dict[str, Any], message: str) -> None:
    with pytest.raises(InputValidationError) as info:
        validate_inputs(release, {"version": "1", **args})
    assert info.value.message == message
    assert info.value.hint


def test_workflow_without_declarations_accepts_anything(load_yaml: Callable[[str], Workflow]) -> None:
    workflow = load_yaml("name: free\nnodes: [{id: a, bash: echo}]\n")
    assert validate_inputs(workflow, {"x": [1], "message": "hi"}) == {"x": [1], "message": "hi"}
    assert validate_inputs(workflow, {}) == {"message": ""}


@pytest.mark.parametrize(("typed", "meant"), [
    ("versoin", "version"), ("Version", "version"), ("ENV", "env"), ("environment", "env"),
    ("counts", "count"), ("dry-run", "dry_run"), ("dryrun", "dry_run"), ("ratios", "ratio"),
])  # fmt: skip
def test_a_typed_key_that_is_a_near_miss_of_an_input_not_given_is_refused(
    release: Workflow, typed: str, meant: str
) -> None:
    said = f"`{typed}` is not an input of `release`; did you mean `{meant}`"
    with pytest.raises(InputValidationError, match=said) as info:
        check_typed_keys(release, [typed], {typed: "1"})
    assert f"--set {meant}=…" in info.value.hint


def test_free_fields_far_from_every_input_or_beside_the_input_itself_are_kept(release: Workflow) -> None:
    check_typed_keys(release, ["notes", "verbose", "ticket"], {"notes": "x", "verbose": 1, "ticket": 2})
    check_typed_keys(release, ["versions"], {"version": "1.4", "versions": ["1.3"]})  # both given: meant
    assert not near_miss("notes", "version") and not near_miss("verbose", "version")
