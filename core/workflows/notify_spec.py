"""`notify:`: who hears about a workflow's runs, beyond the conversation each run reports in.

```yaml
notify:
  - on: [failed, needs_attention, gate_waiting]
    to: "slack:C0OPS"              # a conversation: slack:<channel>, discord:<channel id>, console:<name>
    when: "{{ inputs.env == 'prod' }}"   # optional, over the run's inputs
    digest: 10m                    # optional: a flood becomes one notice, then a digest per window
```

`NotifyRule` is the shape; `notify_problems(workflow)` the load-time checks (events, address,
`when:`), each with the path of the key at fault and the fix. `parse_address` reads a place
(`slack:C0OPS`) as the commands and the rules write it. Pure.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, model_validator

from core.workflows.durations import parse_duration

#: every event a notice can tell, in the order docs list them
EVENTS: tuple[str, ...] = (
    "failed", "needs_attention", "gate_waiting", "completed", "cancelled", "gate_overdue", "queued_long",
)
#: the words of `subscribe … [failed|attention|gates|done|queued|all]`, and the events each stands for
CLASSES: dict[str, tuple[str, ...]] = {
    "failed": ("failed",),
    "attention": ("needs_attention",),
    "gates": ("gate_waiting", "gate_overdue"),
    "done": ("completed", "cancelled"),
    "queued": ("queued_long",),
    "all": EVENTS,
}
DEFAULT_CLASSES = ("failed", "attention")
DEFAULT_DIGEST = 600.0  # seconds: a flood's notices are folded into one digest per 10 minutes

#: a platform's conversation ids: Slack channels (C…, G… private, D… direct), Discord snowflakes
_CONVERSATION = {
    "slack": re.compile(r"^[CGD][A-Z0-9]{2,}$"),
    "discord": re.compile(r"^\d{5,25}$"),
    "console": re.compile(r"^[^\s:]{1,100}$"),
}
PLATFORMS = tuple(_CONVERSATION)

Duration = Annotated[float, BeforeValidator(parse_duration)]
Loc = tuple[str | int, ...]
Found = tuple[Loc, str, str]  # (path under the rule, message, fix)


class NotifyRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    on: list[str]
    to: str
    when: str | None = None
    digest: Duration | None = None

    @model_validator(mode="before")
    @classmethod
    def _yaml_on(cls, data: Any) -> Any:
        """YAML 1.1 reads a bare `on:` key as the boolean true: it is the `on:` key."""
        if isinstance(data, dict) and True in data and "on" not in data:
            return {("on" if key is True else key): value for key, value in data.items()}
        return data

    @property
    def window(self) -> float:
        return DEFAULT_DIGEST if self.digest is None else self.digest


def parse_address(text: str) -> tuple[str, str] | None:
    """(platform, conversation) of `slack:C0OPS`, `discord:1234…`, `console:ops`; None when it
    is not one (the caller words the refusal)."""
    platform, sep, conversation = text.strip().partition(":")
    pattern = _CONVERSATION.get(platform.lower())
    if not sep or pattern is None or not pattern.match(conversation):
        return None
    return platform.lower(), conversation


def address_hint() -> str:
    return ('Write the conversation as `slack:<channel id>` (e.g. "slack:C0OPS"), `discord:<channel id>` '
            '(e.g. "discord:1130001112223334445") or `console:<name>`.')


def event_problem(word: str, choices: Sequence[str] = EVENTS) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.5)
    guess = f"Did you mean `{close[0]}`? " if close else ""
    return guess + "Events: " + ", ".join(choices) + "."


def notify_problems(rules: Sequence[NotifyRule]) -> Iterator[Found]:
    """Every problem of the workflow's `notify:` rules, with the path of the key at fault."""
    for index, rule in enumerate(rules):
        if not rule.on:
            yield (index, "on"), "a `notify:` rule names no event (`on: []`)", (
                "List the events it tells, e.g. `on: [failed, needs_attention]`.")
        for at, event in enumerate(rule.on):
            if event not in EVENTS:
                yield (index, "on", at), f"`notify:` names the unknown event `{event}`", event_problem(event)
        if parse_address(rule.to) is None:
            yield (index, "to"), f"`notify:` sends to `{rule.to}`, which is not a conversation", (
                address_hint())
        for loc, message, fix in _when_problems(rule):
            yield (index, *loc), message, fix


def _when_problems(rule: NotifyRule) -> Iterator[Found]:
    if rule.when is None:
        return
    from jinja2.exceptions import TemplateSyntaxError

    from core.workflows.templating import compile_condition, condition_expression

    expression = condition_expression(rule.when)
    if expression is None:
        yield ("when",), "`when:` of a `notify:` rule is not one expression", (
            "Write one condition over the inputs, e.g. `when: \"{{ inputs.env == 'prod' }}\"`.")
        return
    try:
        compile_condition(expression)
    except TemplateSyntaxError as exc:
        yield ("when",), f"`when:` of a `notify:` rule does not compile: {exc.message}", (
            "Fix the expression (jinja2 syntax: ==, and, or, not, in).")
        return
    if re.search(r"\bnodes\b", expression):
        yield ("when",), "`when:` of a `notify:` rule reads `nodes`, but it sees only the run's inputs", (
            "Compare inputs only, e.g. `{{ inputs.env == 'prod' }}`.")
