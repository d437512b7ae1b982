"""The long form of an approval gate and `when:` (DESIGN.md "Approvals"): what loads, and the
one-line error (with its line and fix) for everything that does not."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from core.errors import TemplateRenderError, WorkflowDefinitionError
from core.workflows.durations import parse_duration, show_duration
from core.workflows.model import Workflow
from core.workflows.templating import evaluate_condition, references

LoadError = Callable[[str], WorkflowDefinitionError]
Load = Callable[[str], Workflow]

FULL = """
name: deploy-gate
inputs:
  version: {type: string, required: true}
nodes:
  - id: build
    bash: echo build
  - id: review
    depends_on: [build]
    approval:
      question: "Deploy {{ inputs.version }}?"
      approvers: [group:sre, "slack:U024BE7LH"]
      required: 2
      requester_may_approve: false
      timeout: 4h
      remind: [1h, 3h]
      escalate: {after: 2h, to: [group:leads]}
      form:
        replicas: {type: integer, default: 3}
        window: {type: string, enum: [now, tonight]}
      choices: [approve, hotfix, reject]
  - id: hotfix
    depends_on: [review]
    when: "{{ nodes.review.decision == 'hotfix' }}"
    bash: echo {{ nodes.review.values.replicas }}
"""


def _gate(body: str) -> str:
    """A workflow whose gate `review` has the policy lines `body` (indented under `approval:`)."""
    lines = "".join(f"      {line}\n" for line in body.strip("\n").splitlines())
    return f"""
name: g
nodes:
  - id: review
    approval:
      question: "Go?"
{lines}"""


def test_the_long_form_loads_with_every_policy_key(load_yaml: Load) -> None:
    workflow = load_yaml(FULL)
    gate = workflow.node("review").approval
    assert gate is not None
    assert gate.question == "Deploy {{ inputs.version }}?"
    assert gate.required == 2 and gate.requester_may_approve is False
    assert gate.timeout == 4 * 3600 and gate.on_timeout == "reject"
    assert gate.remind == [3600, 3 * 3600]
    assert gate.escalate is not None and gate.escalate.after == 7200 and gate.escalate.to == ["group:leads"]
    assert gate.form["replicas"].type == "integer" and gate.form["replicas"].default == 3
    assert gate.answers == ("approve", "hotfix", "reject")
    # who decides is read from the node whichever form the author wrote (authz reads it there)
    assert workflow.node("review").approvers == ["group:sre", "slack:U024BE7LH"]
    assert workflow.node("review").body == "Deploy {{ inputs.version }}?"
    assert workflow.node("hotfix").when == "{{ nodes.review.decision == 'hotfix' }}"


def test_the_short_form_is_a_question_with_the_default_policy(load_yaml: Load) -> None:
    workflow = load_yaml(
        'name: s\nnodes:\n  - id: g\n    approval: "Ship?"\n    approvers: ["console:ana"]\n'
    )
    gate = workflow.node("g").approval
    assert gate is not None and gate.question == "Ship?" and gate.is_short
    assert gate.required == 1 and gate.timeout is None and gate.answers == ("approve", "reject")
    assert workflow.node("g").approvers == ["console:ana"]


def test_on_timeout_is_reject_unless_approve_is_written(load_yaml: Load) -> None:
    assert load_yaml(_gate("timeout: 30m")).node("review").approval.on_timeout == "reject"  # type: ignore[union-attr]
    written = load_yaml(_gate("timeout: 30m\non_timeout: approve")).node("review").approval
    assert written is not None and written.on_timeout == "approve"


def test_reject_is_always_a_choice(load_yaml: Load) -> None:
    gate = load_yaml(_gate("choices: [approve, hotfix]")).node("review").approval
    assert gate is not None and gate.answers == ("approve", "hotfix", "reject")


def test_the_question_and_when_are_templates_whose_references_count(load_yaml: Load) -> None:
    workflow = load_yaml(FULL)
    assert references(workflow.node("review")).inputs == {"version"}
    assert references(workflow.node("hotfix")).nodes == {"review"}


@pytest.mark.parametrize(
    ("body", "line", "cause", "fix"),
    [
        ("approvers: [Ana]", 6, "`Ana` is not a user id or group", "slack:U…"),
        ("approvers: [group:SRE]", 6, "`group:SRE` is not a group name", "group:<name>"),
        ('approvers: ["slack:U1", "slack:U2"]\nrequired: 3', 7, "requires 3 approvers but", "Lower"),
        ("required: 0", 6, "`required` of `approval` of node `review`: Input should be", "number"),
        ("timeout: soon", 6, "'soon' is not a duration", "such as 30m"),
        ("timeout: 40d", 6, "out of range", "at most 30d"),
        ("on_timeout: approve", 6, "says `on_timeout:` but has no `timeout:`", "Add `timeout:`"),
        ("timeout: 1h\non_timeout: approve\nform: {window: {type: string, enum: [now, later]}}", 8,
         "approves on timeout, but its form field `window` has no `default:`", "Give `window` a `default:`"),
        ("on_timeout: maybe", 6, "`on_timeout` of `approval` of node `review` is `maybe`", "Use one of"),
        ("timeout: 1h\nremind: [30m, 2h]", 7, "reminds at 2h, when its timeout (1h)", "Remind before"),
        ("remind: [1h, 1h]", 6, "reminds twice at 1h", "once"),
        ("timeout: 1h\nescalate: {after: 1h, to: [group:leads]}", 7, "escalates at 1h", "Escalate before"),
        ("escalate: {after: 1h, to: [bob]}", 6, "escalation of `review`: `bob`", "slack:U…"),
        ("choices: [approve, Hot Fix]", 6, "choice `Hot Fix` of gate `review` is not", "lower-case"),
        ("choices: [approve, approve]", 6, "lists choice `approve` twice", "once"),
        ("choices: [reject]", 6, "offers no choice but `reject`", "continues the run"),
        ("form: {bad-name: {type: string}}", 6, "form field `bad-name`", "letters, digits"),
        ("form: {n: {type: integer, default: x}}", 6, "default 'x' is not of type integer", "type integer"),
        ("requird: 2", 6, "unknown key `requird`", "`required`"),
        ('approvers: ["mcp:ci"]\nhumans_only: true', 7, "is humans_only but lists only agents", "drop"),
        ("humans_only: perhaps", 6, "`humans_only` of `approval` of node `review`", "true or false"),
    ],
)
def test_a_bad_policy_is_one_line_with_its_line_and_fix(
    load_error: LoadError, body: str, line: int, cause: str, fix: str
) -> None:
    error = load_error(_gate(body))
    assert cause in error.message
    assert error.line == line
    assert fix in (error.hint or "")
    assert "\n" not in error.message


def test_approvers_on_the_node_and_in_the_policy_is_an_error(load_error: LoadError) -> None:
    error = load_error(
        'name: g\nnodes:\n  - id: review\n    approvers: ["console:a"]\n'
        '    approval: {question: "Go?", approvers: ["console:b"]}\n'
    )
    assert "lists `approvers:` twice" in error.message and "inside `approval:`" in (error.hint or "")


@pytest.mark.parametrize(
    ("when", "cause"),
    [
        ("\"{{ inputs.x == 1 }} and {{ inputs.y }}\"", "is not one expression"),
        ("\"{{ inputs.x == }}\"", "does not compile"),
        ("\"{{ nodes.other.output }}\"", "`other` is not in its `depends_on`"),
        ("\"{{ secrets.x }}\"", "unknown variable `secrets`"),
    ],
)
def test_a_bad_when_is_a_load_error(load_error: LoadError, when: str, cause: str) -> None:
    error = load_error(
        f"name: w\nnodes:\n  - id: a\n    bash: echo a\n  - id: other\n    bash: echo o\n"
        f"  - id: b\n    depends_on: [a]\n    when: {when}\n    bash: echo b\n"
    )
    assert cause in error.message
    assert error.line == 9


def test_when_may_be_written_without_braces(load_yaml: Load) -> None:
    workflow = load_yaml("name: w\nnodes:\n  - id: b\n    when: inputs.go == 'yes'\n    bash: echo b\n")
    assert references(workflow.node("b")).inputs == {"go"}


def test_when_evaluates_to_a_boolean_over_inputs_and_dependencies() -> None:
    context = {"inputs": {"go": "yes"}, "nodes": {"review": {"decision": "hotfix", "values": {"n": 5}}}}
    assert evaluate_condition("{{ nodes.review.decision == 'hotfix' }}", context) is True
    assert evaluate_condition("nodes.review.values.n > 7", context) is False
    assert evaluate_condition("{{ inputs.go in ['yes', 'y'] }}", context) is True


def test_typed_text_in_a_condition_stays_a_value_never_code() -> None:
    context = {"inputs": {"go": "{{ 7 * 7 }}' or True or '"}}
    assert evaluate_condition("{{ inputs.go == 'yes' }}", context) is False
    with pytest.raises(TemplateRenderError, match="not true or false"):
        evaluate_condition("{{ inputs.go }}", context)


def test_a_condition_that_is_not_a_boolean_is_refused_not_guessed() -> None:
    with pytest.raises(TemplateRenderError, match=r'gave "false" \(str\)') as info:
        evaluate_condition("{{ inputs.flag }}", {"inputs": {"flag": "false"}})
    assert "Compare" in (info.value.hint or "")


def test_the_sandbox_refuses_unsafe_attribute_access_in_a_condition() -> None:
    with pytest.raises(TemplateRenderError, match="not allowed"):
        evaluate_condition("{{ inputs.__class__.__mro__ == 1 }}", {"inputs": {}})


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("30m", 1800), ("4h", 14400), ("1h30m", 5400), ("2d", 172800), (45, 45), ("1d 2h", 93600)],
)
def test_durations_parse(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "4x", "1m1h", "-5m", 0, True, "31d"])
def test_bad_durations_are_refused(text: str | int | bool) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(14340, "3h 59m"), (3600, "1h"), (93600, "1d 2h"), (45, "45s"), (-3, "0s"), (61, "1m 1s")],
)
def test_durations_show_the_two_largest_units(seconds: float, shown: str) -> None:
    assert show_duration(seconds) == shown



def test_humans_only_loads_and_is_part_of_the_policy(load_yaml: Load) -> None:
    workflow = load_yaml(_gate('approvers: ["slack:U1", "mcp:ci"]\nhumans_only: true'))
    spec = workflow.node("review").approval
    assert spec is not None and spec.humans_only and not spec.is_short


@pytest.mark.parametrize("approval", ['""', '"   "', '{question: ""}', "{question: \"\\n\"}"])
def test_a_gate_with_an_empty_question_is_a_load_error(load_error: LoadError, approval: str) -> None:
    """It waited with a blank message: the people asked could not tell what they approve."""
    error = load_error(f"name: g\nnodes:\n  - id: review\n    approval: {approval}\n")
    assert "gate `review` asks nothing: its question is empty" in error.message and error.line == 4
    assert "Write the question" in (error.hint or "")
