"""Forms: values asked for in a platform's form (a Slack modal, a Discord modal), not typed.

A `Form` (`messages.py`, carried by a `Reply`) is platform-neutral: fields derived from a
workflow's declared `inputs:` (`InputSpec`), and the command the submitted values complete.
Adapters draw it (`adapters/slack/forms.py`, `adapters/discord/forms.py`) and hand the
submitted texts back through `Handler.read_form` to `read_form` here, which checks them with
the same rules as `--set` (each text is parsed exactly as `--set name=<text>`, then
`validate_inputs`' checks) and gives either the command to run or one error per field. Text
works everywhere: the reply that carries a form says which `--set` to type.

Pure: no I/O. Later forms (an approval's `form:` values) reuse `Form`, `FormField` and `read_form`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.commands.messages import Form, FormField
from core.commands.model import SPECS, RunCommand
from core.commands.parser import parse, parse_set
from core.commands.resolution import run_command_text
from core.commands.run_args import apply_sets
from core.engine.ballots import Ballot
from core.errors import BatonError, UsageError
from core.workflows.args import MESSAGE, check_input, missing_inputs
from core.workflows.model import Workflow

RUN_FORM = "run_inputs"  # `Form.kind` of the form asking for a run's inputs


@dataclass(frozen=True, slots=True)
class FormResult:
    command: str | None  # the command to handle, as if typed; None when `errors`
    errors: dict[str, str]  # field name -> one line: what is wrong with that value
    #: a gate's form: the ballot it completes (`Handler.decide`), its values never re-parsed
    ballot: Ballot | None = None


def _text(value: Any, type_: str) -> str:
    """A value as the text a person types for it (`--set name=<text>` gives it back)."""
    if value is None:
        return ""
    if type_ == "string" and isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def offered(field: FormField) -> tuple[str, ...]:
    """What a platform's form offers to pick for `field` (a choice list): its `enum:` values,
    `true`/`false` for a boolean, none for a field typed in."""
    return field.choices or (("true", "false") if field.type == "boolean" else ())


def inputs_form(workflow: Workflow, command: RunCommand, args: Mapping[str, Any]) -> Form | None:
    """The form asking for `workflow`'s inputs when `args` (what `command` gave) lacks a
    required one; None when nothing is missing."""
    missing = missing_inputs(workflow, args)
    return form_of(workflow, command, args, first=missing) if missing else None


def form_of(workflow: Workflow, command: RunCommand, args: Mapping[str, Any],
            first: Sequence[str] = ()) -> Form:
    """Every declared input as a field (`first` first), prefilled with what `args` gives,
    else its default; the form completes `command` (its message, `--force`, `--replace`)."""
    order = [*first, *(n for n in workflow.inputs if n not in first and n != MESSAGE)]
    fields = tuple(
        FormField(
            name=name, label=name, type=spec.type, required=spec.required,
            value=_text(args.get(name, spec.default), spec.type),
            choices=tuple(_text(v, spec.type) for v in spec.enum or ()),
            description=spec.description,
        )
        for name in order
        for spec in (workflow.inputs[name],)
    )
    base = RunCommand(workflow.name, message=command.message, force=command.force, replace=command.replace)
    return Form(kind=RUN_FORM, title=f"Run {workflow.name}", submit="Run", command=run_command_text(base),
                fields=fields)


def read_form(form: Form, workflow: Workflow, values: Mapping[str, str]) -> FormResult:
    """The submitted texts (field name -> text; empty: not given) checked as `--set
    <name>=<text>` would be; the command with those values as its `--args`, or the errors."""
    strings = frozenset(f.name for f in form.fields if f.type == "string")
    errors: dict[str, str] = {}
    args: dict[str, Any] = {}
    for item in form.fields:
        text = values.get(item.name) or ""
        if item.type != "string":
            text = text.strip()
        if text == "":
            if item.required:
                errors[item.name] = f"`{item.name}` is required."
            continue
        try:
            typed = apply_sets({}, [parse_set(f"{item.name}={text}")], strings)[item.name]
            if typed is None:  # `null`: not given, as validate_inputs reads it
                if item.required:
                    errors[item.name] = f"`{item.name}` is required."
                continue
            args[item.name] = check_input(workflow, item.name, typed)
        except BatonError as exc:
            errors[item.name] = exc.message
    if errors:
        return FormResult(None, errors)
    base = run_of(form.command)
    done = RunCommand(base.workflow, message=base.message, args=args, force=base.force, replace=base.replace)
    return FormResult(run_command_text(done), {})


def run_of(text: str) -> RunCommand:
    """The `run` command a form's `command` is (UsageError for any other text)."""
    command = parse(text)
    if not isinstance(command, RunCommand):
        raise UsageError(f"`{text[:40]}` is not a `run` command", usage=f"/workflow {SPECS['run'].usage}")
    return command
