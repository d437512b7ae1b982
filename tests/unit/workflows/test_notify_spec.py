"""`notify:` rules: loaded with their events, place, condition and digest window; every
mistake refused at load with its line and the fix."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from core.errors import WorkflowDefinitionError
from core.workflows.model import Workflow
from core.workflows.notify_spec import DEFAULT_DIGEST, parse_address

HEAD = """
name: deploy
nodes:
  - id: a
    bash: "true"
notify:
"""


def test_a_rule_loads_with_a_bare_on_key(load_yaml: Callable[[str], Workflow]) -> None:
    workflow = load_yaml(HEAD + """
  - on: [failed, needs_attention, gate_waiting]
    to: "slack:C0OPS"
    when: "{{ inputs.env == 'prod' }}"
    digest: 5m
  - on: [completed]
    to: discord:1130001112223334445
""")
    first, second = workflow.notify
    assert first.on == ["failed", "needs_attention", "gate_waiting"] and first.to == "slack:C0OPS"
    assert first.window == 300 and second.window == DEFAULT_DIGEST and second.when is None


@pytest.mark.parametrize(("rule", "line", "words", "fix"), [
    ("  - on: [failed, gate_wating]\n    to: slack:C0OPS\n", 6, "unknown event `gate_wating`",
     "Did you mean `gate_waiting`?"),
    ("  - on: [failed]\n    to: \"slack:#ops\"\n", 7, "`slack:#ops`, which is not a conversation",
     "slack:<channel id>"),
    ("  - on: [failed]\n    to: ops\n", 7, "`ops`, which is not a conversation", "discord:<channel id>"),
    ("  - on: [failed]\n    to: slack:C0OPS\n    when: \"{{ nodes.a.output == 'x' }}\"\n", 8,
     "sees only the run's inputs", "inputs.env"),
    ("  - on: [failed]\n    to: slack:C0OPS\n    when: \"{{ inputs.env == }}\"\n", 8, "does not compile",
     "jinja2 syntax"),
    ("  - on: [failed]\n    to: slack:C0OPS\n    digest: soon\n", 8, "is not a duration", "30m"),
    ("  - on: []\n    to: slack:C0OPS\n", 6, "names no event", "on: [failed"),
    ("  - to: slack:C0OPS\n", 6, "missing `on`", "on:"),
    ("  - on: [failed]\n    to: slack:C0OPS\n    channel: x\n", 8, "unknown key `channel`", ""),
])
def test_a_broken_rule_names_its_line_and_the_fix(
    load_error: Callable[[str], WorkflowDefinitionError], rule: str, line: int, words: str, fix: str
) -> None:
    error = load_error(HEAD + rule)
    assert error.line == line, error.message
    assert words in error.message
    assert fix in error.hint


@pytest.mark.parametrize(("text", "place"), [
    ("slack:C0OPS", ("slack", "C0OPS")), ("discord:1130001112223334445", ("discord", "1130001112223334445")),
    ("console:ops", ("console", "ops")), ("Slack:C0OPS", ("slack", "C0OPS")),
    ("slack:#ops", None), ("teams:C0", None), ("C0OPS", None), ("console:", None), ("discord:abc", None),
])
def test_addresses(text: str, place: tuple[str, str] | None) -> None:
    assert parse_address(text) == place
