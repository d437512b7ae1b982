"""`concurrency:` at load (line and fix) and the key a run gets from its inputs."""

from __future__ import annotations

import pytest

from core.engine.concurrency import concurrency_of
from core.errors import TemplateRenderError, WorkflowDefinitionError
from core.store.records import Concurrency, OnLimit
from core.workflows.loader import load_workflow_text

BODY = "nodes:\n  - id: a\n    bash: echo hi\n"


def load(head: str) -> object:
    return load_workflow_text(f"name: deploy\ninputs:\n  env: {{type: string, default: ''}}\n{head}{BODY}",
                              file="deploy.yaml")


def test_defaults_are_the_workflow_name_one_at_a_time_queued() -> None:
    workflow = load_workflow_text(f"name: deploy\nconcurrency: {{}}\n{BODY}")
    assert concurrency_of(workflow, {"message": ""}) == Concurrency(key="deploy")
    assert concurrency_of(load_workflow_text(f"name: free\n{BODY}"), {}) is None


def test_the_key_is_rendered_from_the_inputs() -> None:
    workflow = load('concurrency:\n  key: "deploy-{{ inputs.env }}"\n  limit: 2\n  on_limit: replace_queued\n'
                    "  max_queued: 5\n  hold_while_paused: false\n")
    assert concurrency_of(workflow, {"env": "prod"}) == Concurrency(
        key="deploy-prod", limit=2, on_limit=OnLimit.REPLACE_QUEUED, max_queued=5, hold_while_paused=False)


def test_a_key_rendered_empty_is_refused() -> None:
    workflow = load('concurrency:\n  key: "{{ inputs.env }}"\n')
    with pytest.raises(TemplateRenderError, match="rendered empty"):
        concurrency_of(workflow, {"env": ""})


@pytest.mark.parametrize(("head", "line", "words", "fix"), [
    ("concurrency:\n  limit: 0\n", 5, "`limit` of `concurrency`", "allowed range"),
    ("concurrency:\n  limit: true\n", 5, "`limit` of `concurrency`", "whole number"),
    ("concurrency:\n  limit: 1.0\n", 5, "`limit` of `concurrency`", "`limit: 2`"),
    ('concurrency:\n  limit: "2"\n', 5, "`limit` of `concurrency`", "whole number"),
    ("concurrency:\n  max_queued: 10.5\n", 5, "`max_queued` of `concurrency`", "whole number"),
    ("concurrency:\n  on_limit: cancel\n", 5, "not one of queue, cancel_new", "cancel_new"),
    ("concurrency:\n  limt: 2\n", 5, "limt", "limit"),
    ('concurrency:\n  key: "d-{{ inputs.evn }}"\n', 5, "does not declare", "inputs.env"),
    ('concurrency:\n  key: "d-{{ nodes.a.output }}"\n', 5, "only `inputs`", "inputs.<name>"),
    ('concurrency:\n  key: "d-{{ inputs.env "\n', 5, "not a valid template", "deploy-"),
])
def test_bad_concurrency_is_refused_with_its_line_and_a_fix(
    head: str, line: int, words: str, fix: str
) -> None:
    with pytest.raises(WorkflowDefinitionError) as refused:
        load(head)
    assert refused.value.line == line and refused.value.file == "deploy.yaml"
    assert words in refused.value.message and fix in (refused.value.hint or "")
