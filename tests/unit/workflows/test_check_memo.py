"""Checks of schemas and cron expressions that passed, remembered (core/workflows/check_memo.py).

With a memo installed (a dict here; the `baton` executable's is bot/compile_cache.py's file) a
schema or an expression that passed is not checked again, one that fails is checked and reported
every time exactly as without a memo, and a key changes with the library's installation.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
from croniter import croniter

from core.errors import WorkflowDefinitionError
from core.workflows import check_memo
from core.workflows.loader import load_workflow_text
from core.workflows.schedule_rules import RuleError, check_cron

SCHEMA_WORKFLOW = (
    "name: w\nnodes:\n  - id: a\n    bash: echo '{{}}'\n    replay: pure\n"
    "    output: {{format: json, schema: {schema}}}\n"
)
GOOD = "{type: object, properties: {n: {type: integer, minimum: 0}}}"
BAD = "{type: objekt}"


@pytest.fixture
def memo(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, bool]]:
    kept: dict[str, bool] = {}
    monkeypatch.setattr(check_memo, "_passed", None)
    monkeypatch.setattr(check_memo, "_remember", None)
    check_memo.install(lambda key: kept.get(key, False), lambda key: kept.__setitem__(key, True))
    yield kept


@pytest.fixture
def schema_checks(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every schema the workflow checks ask jsonschema about (not those jsonschema looks up
    itself while checking)."""
    seen: list[object] = []
    real = jsonschema.validators.validator_for

    def counted(schema: object, *args: object, **kwargs: object) -> object:
        if sys._getframe(1).f_globals["__name__"] == "core.workflows.validation":
            seen.append(schema)
        return real(schema, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(jsonschema.validators, "validator_for", counted)
    return seen


@pytest.fixture
def cron_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = croniter.is_valid

    def counted(expression: str, *args: object, **kwargs: object) -> bool:
        seen.append(expression)
        return bool(real(expression, *args, **kwargs))

    monkeypatch.setattr(croniter, "is_valid", counted)
    return seen


def test_a_schema_that_passed_is_not_checked_again(
    memo: dict[str, bool], schema_checks: list[object]
) -> None:
    text = SCHEMA_WORKFLOW.format(schema=GOOD)
    first = load_workflow_text(text)
    assert len(schema_checks) == 1 and len(memo) == 1
    second = load_workflow_text(text)
    assert len(schema_checks) == 1  # remembered: jsonschema not asked
    assert second.nodes[0].output.schema_ == first.nodes[0].output.schema_
    load_workflow_text(SCHEMA_WORKFLOW.format(schema="{type: object, required: [n]}"))
    assert len(schema_checks) == 2 and len(memo) == 2  # another schema is checked


def test_a_bad_schema_is_reported_every_time_and_never_remembered(
    memo: dict[str, bool], schema_checks: list[object]
) -> None:
    errors = []
    for _ in range(2):
        with pytest.raises(WorkflowDefinitionError) as caught:
            load_workflow_text(SCHEMA_WORKFLOW.format(schema=BAD), file="w.yaml")
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and "invalid JSON Schema in `output.schema` of `a`" in errors[0]
    assert len(schema_checks) == 2 and memo == {}


def test_without_a_memo_every_schema_is_checked(
    monkeypatch: pytest.MonkeyPatch, schema_checks: list[object]
) -> None:
    monkeypatch.setattr(check_memo, "_passed", None)
    monkeypatch.setattr(check_memo, "_remember", None)
    for _ in range(2):
        load_workflow_text(SCHEMA_WORKFLOW.format(schema=GOOD))
    assert len(schema_checks) == 2


def test_a_cron_expression_read_as_valid_is_not_read_again(
    memo: dict[str, bool], cron_reads: list[str]
) -> None:
    assert check_cron("0  2 * * 1-5") == "0 2 * * 1-5"
    assert check_cron("0 2 * * 1-5") == "0 2 * * 1-5"
    assert cron_reads == ["0 2 * * 1-5"]
    for _ in range(2):
        with pytest.raises(RuleError, match="is not a cron expression"):
            check_cron("0 25 * * *")
    assert cron_reads == ["0 2 * * 1-5", "0 25 * * *", "0 25 * * *"] and len(memo) == 1


def test_only_texts_that_stand_for_one_value_get_a_key(memo: dict[str, bool]) -> None:
    assert (
        check_memo.canonical_json({"b": [1, 2.5, None, True], "a": "x"}) == '{"a":"x","b":[1,2.5,null,true]}'
    )
    assert check_memo.canonical_json({1: "x"}) is None  # json.dumps would write {"1": "x"}
    assert check_memo.canonical_json({"a": (1, 2)}) is None
    assert check_memo.key("schema", ("jsonschema",), None) is None
    assert check_memo.key("schema", ("no_such_library_for_baton",), "{}") is None


def test_a_key_changes_when_a_package_is_installed_beside_the_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memo: dict[str, bool]
) -> None:
    site = tmp_path / "site"
    (site / "fakelib_for_memo").mkdir(parents=True)
    (site / "fakelib_for_memo" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(check_memo, "_stamps", {})
    before = check_memo.key("k", ("fakelib_for_memo",), "t")
    assert before is not None and before == check_memo.key("k", ("fakelib_for_memo",), "t")
    (site / "fakelib_for_memo-2.0.dist-info").mkdir()  # an upgrade: a new entry in site-packages
    os.utime(site, ns=(0, os.stat(site).st_mtime_ns + 1_000_000_000))  # however coarse the clock
    monkeypatch.setattr(check_memo, "_stamps", {})  # a new process
    after = check_memo.key("k", ("fakelib_for_memo",), "t")
    assert after is not None and after != before
