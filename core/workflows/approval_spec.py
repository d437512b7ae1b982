"""The long form of an approval gate (DESIGN.md "Approvals"): who decides, how many, until when,
what they are asked for and which answers they have.

    approval:
      question: "Deploy {{ inputs.version }}?"
      approvers: [group:sre, "slack:U024BE7LH"]   # users or groups of BATON_ACCESS
      required: 2                  # distinct eligible approvers; one rejection ends the gate
      requester_may_approve: false # the run's requester is not one of them
      timeout: 4h                  # then on_timeout: reject (default) | fail | skip | approve
      remind: [1h, 3h]
      escalate: {after: 2h, to: [group:leads]}
      form: {replicas: {type: integer, default: 3}}
      choices: [approve, hotfix, reject]
      humans_only: true            # no agent (an `mcp:` principal) may decide it

The short form `approval: "Deploy?"` is `ApprovalSpec(question="Deploy?")`: one approver of
the workflow decides, with no deadline. Shapes are checked here; what needs the whole node
(approver ids, deadlines in order, quorum against listed people, choice and field names) is
checked by `core/workflows/validation.py`, with the line of the offending key.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from core.workflows.durations import parse_duration
from core.workflows.input_spec import InputSpec

APPROVE = "approve"
REJECT = "reject"
DEFAULT_CHOICES: tuple[str, ...] = (APPROVE, REJECT)
TIMEOUT_OUTCOMES: tuple[str, ...] = ("reject", "fail", "skip", "approve")

Duration = Annotated[float, BeforeValidator(parse_duration)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Escalation(_Strict):
    after: Duration
    to: list[str] = Field(min_length=1)


def _question_only(value: Any) -> Any:
    """The short form (text) is the long form with only a question."""
    return {"question": value} if isinstance(value, str) else value


class ApprovalSpec(_Strict):
    question: str
    approvers: list[str] | None = None  # None: the workflow's approvers (BATON_ACCESS `approve`)
    required: int = Field(default=1, ge=1, le=50)
    requester_may_approve: bool | None = None  # None: as BATON_ACCESS says; false excludes them
    timeout: Duration | None = None
    on_timeout: Literal["reject", "fail", "skip", "approve"] = "reject"
    remind: list[Duration] = Field(default_factory=list)
    escalate: Escalation | None = None
    form: dict[str, InputSpec] = Field(default_factory=dict)  # typed and validated like `inputs:`
    choices: list[str] = Field(default_factory=lambda: list(DEFAULT_CHOICES))
    #: only people decide it: every agent principal (`mcp:…`) is refused, admins included
    humans_only: bool = False

    @property
    def answers(self) -> tuple[str, ...]:
        """The choices a person may vote for; `reject` is always one of them (it ends the gate)."""
        return tuple(dict.fromkeys([*self.choices, REJECT]))

    @property
    def is_short(self) -> bool:
        """True for a gate that states no policy (the short form, or a long form saying nothing more)."""
        return self == ApprovalSpec(question=self.question, approvers=self.approvers)


ApprovalField = Annotated[ApprovalSpec | None, BeforeValidator(_question_only)]
