from __future__ import annotations

import pytest

from core.commands.parser import parse_set
from core.commands.run_args import apply_sets, build_args
from core.errors import UsageError


def test_sets_apply_in_order_build_nested_objects_and_never_mutate_the_base() -> None:
    base = {"a": {"keep": 1}, "message": "old"}
    result = apply_sets(base, [parse_set("a.b.c=1"), parse_set("n=x"), parse_set("n=2")])
    assert result == {"a": {"keep": 1, "b": {"c": 1}}, "message": "old", "n": 2}
    assert base == {"a": {"keep": 1}, "message": "old"}


def test_message_replaces_inputs_message_only_when_given() -> None:
    assert build_args({"message": "old", "v": 1}, [], "new") == {"message": "new", "v": 1}
    assert build_args({"message": "old"}, [], None) == {"message": "old"}


def test_setting_inside_a_plain_value_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="`a` is already a value"):
        apply_sets({"a": 5}, [parse_set("a.b=1")])


def test_a_declared_string_input_keeps_the_text_as_typed() -> None:
    sets = [parse_set("version=1.2"), parse_set("count=3"), parse_set("flag=true")]

    args = build_args({}, sets, None, frozenset({"version", "flag"}))

    assert args == {"version": "1.2", "count": 3, "flag": "true"}
