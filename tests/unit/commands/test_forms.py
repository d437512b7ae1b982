"""Forms for a run's inputs: what is asked, and submitted values checked as `--set` checks them."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from core.commands.forms import form_of, inputs_form, read_form
from core.commands.model import RunCommand
from core.commands.parser import parse, parse_set
from core.commands.run_args import build_args
from core.errors import BatonError
from core.workflows.args import validate_inputs
from core.workflows.loader import load_workflow_text

DEPLOY = load_workflow_text("""
name: deploy
inputs:
  service: {type: string, required: true, description: what to deploy}
  replicas: {type: integer, default: 2}
  environment: {type: string, default: staging, enum: [staging, production]}
  dry: {type: boolean, default: false}
nodes:
  - id: go
    bash: echo {{ inputs.service }}
""")


def _command(text: str) -> RunCommand:
    command = parse(text)
    assert isinstance(command, RunCommand)
    return command


def test_a_run_missing_a_required_input_gets_a_form_of_every_input_missing_first() -> None:
    command = _command('run deploy "ship it" --set replicas=3 --force')

    form = inputs_form(DEPLOY, command, build_args({}, command.sets, command.message))

    assert form is not None and form.command == 'run deploy --force "ship it"'
    assert [(f.name, f.type, f.required, f.value) for f in form.fields] == [
        ("service", "string", True, ""), ("replicas", "integer", False, "3"),
        ("environment", "string", False, "staging"), ("dry", "boolean", False, "false")]
    assert form.fields[2].choices == ("staging", "production")
    assert form.fields[0].description == "what to deploy"
    assert inputs_form(DEPLOY, command, {"service": "web"}) is None  # nothing missing: no form


def test_submitted_values_become_the_runs_args_and_the_command_keeps_its_message_and_flags() -> None:
    command = _command('run deploy "ship it" --force --replace 3f9a')
    form = form_of(DEPLOY, command, {})

    done = read_form(form, DEPLOY, {"service": " web ", "replicas": "5", "environment": "production",
                                    "dry": ""})

    assert done.errors == {}
    assert done.command is not None
    run = _command(done.command)
    assert run == RunCommand("deploy", message="ship it", force=True, replace="3f9a",
                             args={"service": " web ", "replicas": 5, "environment": "production"})


def test_each_wrong_value_is_named_on_its_field() -> None:
    form = form_of(DEPLOY, _command("run deploy"), {})

    done = read_form(form, DEPLOY, {"service": "", "replicas": "03", "environment": "prod", "dry": "yes"})

    assert done.command is None
    assert done.errors["service"] == "`service` is required."
    assert done.errors["replicas"] == 'input `replicas` must be an integer, got text "03"'
    assert done.errors["environment"] == (
        'input `environment` must be one of "staging", "production", got "prod"')
    assert done.errors["dry"] == 'input `dry` must be a boolean, got text "yes"'


def _by_set(name: str, text: str) -> object:
    args = build_args({}, [parse_set(f"{name}={text}")], None, frozenset({"service", "environment"}))
    return validate_inputs(DEPLOY, {"service": "web", **args})[name]


@given(name=st.sampled_from(["replicas", "environment", "dry"]),
       text=st.one_of(st.sampled_from(["3", "-1", "3.0", "true", "false", "staging", "production", "[1]",
                                       '"x"', "null", "1e3"]), st.text(max_size=8)))
def test_a_form_accepts_and_refuses_exactly_what_set_does(name: str, text: str) -> None:
    assume(text.strip() != "")  # an empty field is not given: its default applies
    form = form_of(DEPLOY, _command("run deploy"), {})
    submitted = read_form(form, DEPLOY, {"service": "web", name: text})
    try:
        expected: object = _by_set(name, text)
    except BatonError:
        expected = None
    if expected is None:
        assert name in submitted.errors, (name, text)
    else:
        assert submitted.command is not None, submitted.errors
        args = _command(submitted.command).args
        assert args is not None and validate_inputs(DEPLOY, args)[name] == expected
