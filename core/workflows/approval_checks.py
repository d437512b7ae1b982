"""Load-time checks of an approval gate's policy and of a node's `when:`, each with the path of
the offending key (the loader turns it into a line) and one line of fix.

`gate_problems(node)` and `when_problems(node)` yield `(loc, message, hint)` relative to the
node; `core/workflows/validation.py` wraps them into its `Problem`s. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from core.principals import AGENT_PREFIX, ANYONE, GROUP_NAME, GROUP_PREFIX, USER_ID
from core.workflows.approval_spec import REJECT, ApprovalSpec
from core.workflows.durations import show_duration
from core.workflows.model import Node

Loc = tuple[str | int, ...]
Found = tuple[Loc, str, str]
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CHOICE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_ID_HINT = ("Write users as slack:U… / discord:<digits> / console:<name> / mcp:<agent>, groups as "
            "group:<name>, or *.")


def approver_error(entry: str) -> str | None:
    """Why `entry` is not an approver reference (a user id, `group:<name>` or `*`), or None."""
    if entry == ANYONE or USER_ID.fullmatch(entry):
        return None
    if entry.startswith(GROUP_PREFIX):
        if GROUP_NAME.fullmatch(entry.removeprefix(GROUP_PREFIX)):
            return None
        return f"`{entry}` is not a group name (lower-case letters, digits, - and _)"
    return f"`{entry}` is not a user id or group (never a display name)"


def gate_problems(node: Node) -> Iterator[Found]:
    """Problems of an approval node's policy (nothing for other kinds)."""
    spec = node.approval
    if spec is None:
        return
    if not spec.question.strip():
        yield (("approval", "question"), f"gate `{node.id}` asks nothing: its question is empty",
               'Write the question people answer, e.g. `approval: "Deploy {{ inputs.version }}?"`.')
    where: Loc = ("approval", "approvers") if spec.approvers is not None else ("approvers",)
    for index, entry in enumerate(node.approvers or ()):
        why = approver_error(entry)
        if why:
            yield (*where, index), f"approver of `{node.id}`: {why}", _ID_HINT
    if spec.escalate is not None:
        for index, entry in enumerate(spec.escalate.to):
            why = approver_error(entry)
            if why:
                yield ("approval", "escalate", "to", index), f"escalation of `{node.id}`: {why}", _ID_HINT
    yield from _quorum(node, spec)
    yield from _humans_only(node, spec)
    yield from _deadlines(node, spec)
    yield from _answers(node, spec)


def _quorum(node: Node, spec: ApprovalSpec) -> Iterator[Found]:
    people = list(node.approvers or ())
    if spec.escalate is not None:
        people += spec.escalate.to
    if spec.required == 1 or node.approvers is None or any(not USER_ID.fullmatch(p) for p in people):
        return  # groups and the workflow's approvers are known only when Baton runs
    if len(set(people)) < spec.required:
        yield (
            ("approval", "required"),
            f"gate `{node.id}` requires {spec.required} approvers but lists only {len(set(people))} "
            "people, so it could never open",
            "Lower `required:` or list more approvers (a `group:` counts its members at run time).",
        )


def _humans_only(node: Node, spec: ApprovalSpec) -> Iterator[Found]:
    """`humans_only: true` with approvers that are all agents: nobody could ever decide it."""
    people = list(spec.approvers or ())
    if spec.humans_only and people and all(p.startswith(AGENT_PREFIX) for p in people):
        yield (
            ("approval", "humans_only"),
            f"gate `{node.id}` is humans_only but lists only agents (mcp:…) as approvers, so nobody "
            "could ever decide it",
            "List people or groups in `approvers:`, or drop `humans_only`.",
        )


def _deadlines(node: Node, spec: ApprovalSpec) -> Iterator[Found]:
    if spec.timeout is None and "on_timeout" in spec.model_fields_set:
        yield (
            ("approval", "on_timeout"),
            f"gate `{node.id}` says `on_timeout:` but has no `timeout:`",
            "Add `timeout:` (e.g. `timeout: 4h`) or remove `on_timeout:`.",
        )
    seen: set[float] = set()
    for index, after in enumerate(spec.remind):
        if after in seen:
            twice = f"gate `{node.id}` reminds twice at {show_duration(after)}"
            yield ("approval", "remind", index), twice, "List every reminder time once."
        seen.add(after)
        if spec.timeout is not None and after >= spec.timeout:
            yield (
                ("approval", "remind", index),
                f"gate `{node.id}` reminds at {show_duration(after)}, when its timeout "
                f"({show_duration(spec.timeout)}) has already ended it",
                "Remind before `timeout:`, or lengthen the timeout.",
            )
    if spec.timeout is not None and spec.on_timeout == "approve":
        for name, field in spec.form.items():  # nobody fills the form when the clock approves
            if field.default is None:
                yield (
                    ("approval", "form", name),
                    f"gate `{node.id}` approves on timeout, but its form field `{name}` has no "
                    "`default:` for that approval to take",
                    f"Give `{name}` a `default:` (not `required: true`), or use another `on_timeout:`.",
                )
    if spec.escalate is not None and spec.timeout is not None and spec.escalate.after >= spec.timeout:
        yield (
            ("approval", "escalate", "after"),
            f"gate `{node.id}` escalates at {show_duration(spec.escalate.after)}, when its timeout "
            f"({show_duration(spec.timeout)}) has already ended it",
            "Escalate before `timeout:`, or lengthen the timeout.",
        )


def _answers(node: Node, spec: ApprovalSpec) -> Iterator[Found]:
    seen: set[str] = set()
    for index, choice in enumerate(spec.choices):
        if not _CHOICE.match(choice):
            yield (
                ("approval", "choices", index),
                f"choice `{choice}` of gate `{node.id}` is not a plain word",
                "Use lower-case letters, digits, - and _ (people type it: `approve <run> <choice>`).",
            )
        elif choice in seen:
            yield ("approval", "choices", index), f"gate `{node.id}` lists choice `{choice}` twice", (
                "List every choice once."
            )
        seen.add(choice)
    if not seen - {REJECT}:
        yield (
            ("approval", "choices"),
            f"gate `{node.id}` offers no choice but `reject`, so it could never open",
            "Add the choice that continues the run, e.g. `choices: [approve, reject]`.",
        )
    for name in spec.form:
        if not _NAME.match(name):
            yield (
                ("approval", "form", name),
                f"form field `{name}` of gate `{node.id}` is not a plain identifier",
                "Use letters, digits and `_` (it is typed as `approve <run> name=value`, read as "
                f"`nodes.{node.id}.values.<name>`).",
            )


def when_problems(node: Node) -> Iterator[Found]:
    """`when:` is one expression: `{{ … }}` around it, or the bare expression."""
    if node.when is None:
        return
    from jinja2.exceptions import TemplateSyntaxError

    from core.workflows.templating import compile_condition, condition_expression

    expression = condition_expression(node.when)
    if expression is None:
        yield ("when",), f"`when:` of `{node.id}` is not one expression", (
            "Write one condition, e.g. `when: \"{{ nodes.review.decision == 'hotfix' }}\"`."
        )
        return
    try:
        compile_condition(expression)
    except TemplateSyntaxError as exc:
        yield ("when",), f"`when:` of `{node.id}` does not compile: {exc.message}", (
            "Fix the expression (jinja2 syntax: ==, and, or, not, in)."
        )
