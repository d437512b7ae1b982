"""What `when:` and a gate's policy add to a node's identity (its definition digest)."""

from __future__ import annotations

from typing import Any

from core.engine.cache_key import definition_of, digest_bytes
from core.engine.conditions import SKIP_DIGEST
from core.workflows.model import Node


def _definition(**fields: Any) -> dict[str, Any]:
    return definition_of(Node.model_validate({"id": "n", **fields}), script_source=None, files={})


def test_a_condition_is_part_of_the_definition_and_its_absence_changes_nothing() -> None:
    plain = _definition(bash="echo a")
    assert "when" not in plain  # nodes without `when:` keep the keys they had
    assert _definition(bash="echo a", when="inputs.x == 1")["when"] == "inputs.x == 1"
    assert _definition(bash="echo a", when="inputs.x == 1") != _definition(
        bash="echo a", when="inputs.x == 2"
    )


def test_a_gates_form_and_choices_count_but_who_decides_and_when_do_not() -> None:
    short = _definition(approval="Go?")
    assert short == _definition(
        approval={
            "question": "Go?",
            "approvers": ["console:a"],
            "required": 2,
            "timeout": "1h",
            "remind": ["30m"],
        }
    )
    with_form = _definition(approval={"question": "Go?", "form": {"n": {"type": "integer", "default": 3}}})
    with_choices = _definition(approval={"question": "Go?", "choices": ["approve", "hotfix", "reject"]})
    assert len({str(short), str(with_form), str(with_choices)}) == 3
    assert with_choices["gate"]["choices"] == ["approve", "hotfix", "reject"]


def test_a_skip_has_a_digest_no_ordinary_output_has() -> None:
    assert SKIP_DIGEST not in {digest_bytes(b""), digest_bytes(b"null"), digest_bytes(b"skipped\n")}


def test_the_fast_definition_digest_agrees_with_the_canonical_one_for_policies_and_conditions() -> None:
    from core.engine.cache_key import definition_digest, digest_value

    for fields in (
        {"approval": {"question": "Go?", "required": 2, "timeout": "1h"}},
        {"approval": {"question": "Go?", "choices": ["approve", "hotfix", "reject"]}},
        {"bash": "echo a", "when": "inputs.x == 1"},
    ):
        node = Node.model_validate({"id": "n", **fields})
        assert definition_digest(node, script_source=None, files={}) == digest_value(_definition(**fields))
