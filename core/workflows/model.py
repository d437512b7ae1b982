"""The workflow format of DESIGN.md as pydantic models.

The loader (`core/workflows/loader.py`) parses YAML, validates it into these models and
turns pydantic's errors into `WorkflowDefinitionError`s that name file, line and fix.
"""

from __future__ import annotations

import operator
import re
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from core.store.records import OnLimit, ReplayClass
from core.workflows.approval_spec import ApprovalField
from core.workflows.input_spec import InputSpec
from core.workflows.notify_spec import NotifyRule
from core.workflows.schedule_spec import SCHEDULE_ERROR, ScheduleSpec

NODE_KINDS: tuple[str, ...] = ("bash", "script", "prompt", "approval", "tool", "workflow")
_KIND_VALUES = operator.itemgetter(*NODE_KINDS)  # a node's fields of the six kinds, in one call
INPUT_TYPES: tuple[str, ...] = ("string", "integer", "number", "boolean", "object", "array")

#: Custom pydantic error types raised by the validators below; the loader reads
#: `ctx["key"]` to point at the offending key's line and `ctx["hint"]` for the fix.
NODE_KIND_ERROR = "node_kind"
ENVIRONMENT_ERROR = "environment"

#: names a step's environment may not take from a workflow: Baton's settings and step variables
RESERVED_PREFIX = "BATON_"
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _variable_error(message: str, key: str, hint: str) -> PydanticCustomError:
    return PydanticCustomError(ENVIRONMENT_ERROR, message, {"key": key, "hint": hint})


def _check_variable(name: str, what: str) -> None:
    """A name a workflow may give to a step's environment variable (an `env:` key or a secret)."""
    if not _VARIABLE.match(name):
        raise _variable_error(
            f"names `{name}`, which is not an environment variable name",
            name,
            f"Use letters, digits and `_`, not starting with a digit, for the {what}.",
        )
    if name.upper().startswith(RESERVED_PREFIX):
        raise _variable_error(
            f"names `{name}`: names starting with {RESERVED_PREFIX} belong to Baton "
            "(its own settings and the step variables), never to a workflow",
            name,
            f"Give the {what} another name (e.g. `{name[len(RESERVED_PREFIX):] or 'MY_VALUE'}`)"
            + (" and have the operator provide it under that name." if what == "secret" else "."),
        )


def _env_values(value: Any) -> Any:
    """`env:` values are text; YAML numbers and booleans are taken as the text they stand for."""
    if not isinstance(value, dict):
        return value
    converted = {}
    for key, item in value.items():
        if isinstance(item, bool):
            item = "true" if item else "false"
        elif isinstance(item, int | float):
            item = str(item)
        converted[key] = item
    return converted


class StepEnvironmentFields(_Strict):
    """Checks of `env:` and `secrets:`, the keys allowed on the workflow (every step) and on a
    node (that step); each model declares the two fields last, so error hints list them last.

    A step's environment is the operator's allowlisted variables, its `BATON_*` step
    variables, the workflow's then the node's `env:` values (the node wins), and the value of
    every secret the workflow or the node declares (a secret wins over an `env:` value of the
    same name). Values are literal text, never templated.
    """

    if TYPE_CHECKING:  # declared by each model, last
        env: dict[str, str]
        secrets: list[str]

    @field_validator("env", mode="before", check_fields=False)
    @classmethod
    def _env_text(cls, value: Any) -> Any:
        return _env_values(value)

    @field_validator("env", check_fields=False)
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            _check_variable(name, "variable")
        return value

    @field_validator("secrets", check_fields=False)
    @classmethod
    def _secret_names(cls, value: list[str]) -> list[str]:
        seen: set[str] = set()
        for name in value:
            _check_variable(name, "secret")
            if name in seen:
                raise _variable_error(
                    f"lists `{name}` twice", name, "List every secret once."
                )
            seen.add(name)
        return value

    @model_validator(mode="after")
    def _secret_or_value(self) -> StepEnvironmentFields:
        if not self.secrets or not self.env:
            return self
        both = sorted(set(self.env) & set(self.secrets))
        if both:
            raise _variable_error(
                f"declares `{both[0]}` both as a secret and in `env:`",
                "env",
                f"Keep `{both[0]}` in one place: `secrets:` when its value is secret, else `env:`.",
            )
        return self


class OutputContract(_Strict):
    format: Literal["text", "json"] = "text"
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")


_TEXT_OUTPUT = OutputContract()  # the default of every node (frozen: one instance serves all)


class RetryPolicy(_Strict):
    attempts: int = Field(default=3, ge=1, le=20)
    backoff: float = Field(default=1.0, ge=0, le=3600, allow_inf_nan=False)  # seconds, doubled each attempt


class Defaults(_Strict):
    replay: ReplayClass | None = None  # None: kind's own default (see Node.replay_class)
    memoize: bool = True
    timeout: float = Field(default=600, gt=0, allow_inf_nan=False)  # capped at load (`LoadLimits`)
    provider: str | None = None  # prompt nodes without their own `provider:` (None: settings)


class ConcurrencySpec(_Strict):
    """`concurrency:` (DESIGN.md, "Concurrency and the queue"): how many runs of a key may be
    active at once, and what a run past the limit does."""

    key: str | None = None  # a template over `inputs` (None: the workflow's name)
    # strict: `limit: true` and `limit: 1.5` are mistakes, not 1 (pydantic's lax mode took them)
    limit: int = Field(default=1, ge=1, strict=True)
    on_limit: OnLimit = OnLimit.QUEUE
    max_queued: int = Field(default=100, ge=0, strict=True)
    hold_while_paused: bool = True


def is_script_path(script: str) -> bool:
    """`script:` names a file when it ends with `.py` and has no newline; else it is inline code."""
    text = script.strip()
    return text.endswith(".py") and "\n" not in text


#: `map: {max_items}` when not given: a map over more items than this fails with one line
DEFAULT_MAX_ITEMS = 1000
#: the largest `max_items` a workflow may declare
MAX_ITEMS_LIMIT = 100_000


class MapSpec(_Strict):
    """`map:` runs the node once per item (`core/engine/mapping.py`)."""

    items: str | list[Any]  # a template rendering a list (`{{ nodes.hosts.output }}`), or a list
    as_: str = Field(default="item", alias="as", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    max_parallel: int = Field(default=4, ge=1, le=1000)  # items of this node running at once
    on_failure: Literal["continue", "fail_fast"] = "continue"
    max_items: int = Field(default=DEFAULT_MAX_ITEMS, ge=1, le=MAX_ITEMS_LIMIT)


class ScriptSpec(_Strict):
    """`script:` is either a path (relative to the workflow file) or inline Python."""

    path: str | None = None
    code: str | None = None


class Node(StepEnvironmentFields):
    id: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]*$")
    description: str = ""
    depends_on: list[str] = Field(default_factory=list)
    # exactly one of the six kinds
    bash: str | None = None
    script: str | None = None  # a .py path relative to the workflow file, or inline code
    prompt: str | None = None
    approval: ApprovalField = None  # text (the short form) or the policy (approval_spec.py)
    tool: str | None = None
    #: a child run of another workflow (`core/engine/subruns.py`), `with:` its args
    workflow: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    with_: dict[str, Any] = Field(default_factory=dict, alias="with")  # tool kwargs / child args
    provider: str | None = None  # prompt nodes: provider name from settings (default: settings)
    replay: ReplayClass | None = None
    memoize: bool | None = None
    timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    retry: RetryPolicy | None = None
    output: OutputContract = _TEXT_OUTPUT
    files: list[str] = Field(default_factory=list)
    artifacts: list[str] = Field(default_factory=list)
    approvers: list[str] | None = None  # approval nodes: user ids allowed to decide (settings otherwise)
    when: str | None = None  # `{{ expression }}` over inputs and dependencies; false: skipped
    network: bool | None = Field(default=None, strict=True)  # False: no network (None: the workflow's)
    map: MapSpec | None = None  # run once per item (`core/engine/mapping.py`)
    env: dict[str, str] = Field(default_factory=dict)  # this step's variables (over the workflow's)
    secrets: list[str] = Field(default_factory=list)  # secrets this step receives (and the workflow's)

    @model_validator(mode="before")
    @classmethod
    def _approvers_once(cls, data: Any) -> Any:
        """The long form's `approvers:` are the node's: every check of who may decide reads
        `Node.approvers`, whichever form the author wrote."""
        if not isinstance(data, dict) or not isinstance(data.get("approval"), dict):
            return data
        listed = data["approval"].get("approvers")
        if listed is None:
            return data
        if data.get("approvers") is not None:
            raise PydanticCustomError(
                NODE_KIND_ERROR,
                "node `{node}` lists `approvers:` twice (on the node and in `approval:`)",
                {"node": data.get("id", "?"), "key": "approvers",
                 "hint": "Keep the list inside `approval:` and remove the node's `approvers:`."},
            )
        return {**data, "approvers": listed}

    @model_validator(mode="after")
    def _one_kind(self) -> Node:
        if _KIND_VALUES(self.__dict__).count(None) == len(NODE_KINDS) - 1:
            return self  # exactly one kind: the common case, without building the list below
        kinds = [k for k in NODE_KINDS if getattr(self, k) is not None]
        if not kinds:
            raise PydanticCustomError(
                NODE_KIND_ERROR,
                "node `{node}` has no kind",
                {
                    "node": self.id,
                    "key": "id",
                    "hint": "Give it exactly one of: " + ", ".join(f"`{k}:`" for k in NODE_KINDS) + ".",
                },
            )
        if len(kinds) > 1:
            raise PydanticCustomError(
                NODE_KIND_ERROR,
                "node `{node}` has {count} kinds ({kinds}); a node does exactly one thing",
                {
                    "node": self.id,
                    "count": len(kinds),
                    "kinds": " and ".join(kinds),
                    "key": kinds[1],
                    "hint": f"Keep one of {' / '.join(kinds)} and move the other into its own node.",
                },
            )
        return self

    @property
    def kind(self) -> str:
        for kind in NODE_KINDS:
            if getattr(self, kind) is not None:
                return kind
        raise AssertionError("a validated node has a kind")

    @property
    def body(self) -> str:
        """The kind's field: command, script, prompt text, gate question or tool name."""
        if self.approval is not None:
            return self.approval.question
        return str(getattr(self, self.kind))


class Workflow(StepEnvironmentFields):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    defaults: Defaults = Field(default_factory=Defaults)
    nodes: list[Node]
    network: bool = Field(default=True, strict=True)  # False: steps run without network (a node may differ)
    env: dict[str, str] = Field(default_factory=dict)  # variables of every step
    secrets: list[str] = Field(default_factory=list)  # secrets every step receives
    #: runs nobody typed (DESIGN.md "Automation" -> "Schedules"): `schedule_spec.py`
    schedules: list[ScheduleSpec] = Field(default_factory=list)
    concurrency: ConcurrencySpec | None = None  # None: unlimited
    notify: list[NotifyRule] = Field(default_factory=list)  # who hears about its runs (notify_spec.py)
    # where it came from (set by the loader, not part of the YAML)
    source: str = Field(default="", exclude=True)

    @model_validator(mode="after")
    def _schedule_ids(self) -> Workflow:
        seen: set[str] = set()
        for index, spec in enumerate(self.schedules):
            if spec.id in seen:
                raise PydanticCustomError(  # `path`: the loader points at the repeated id's line
                    SCHEDULE_ERROR, f"schedule #{index + 1} repeats the id `{spec.id}`",
                    {"hint": "Give each schedule of a workflow its own `id`.",
                     "path": ("schedules", index, "id")})
            seen.add(spec.id)
        return self

    def calls(self) -> list[tuple[int, str]]:
        """(node index, workflow name) of every `workflow:` node: the runs this one starts."""
        return [(i, n.workflow) for i, n in enumerate(self.nodes) if n.workflow is not None]

    def node(self, node_id: str) -> Node:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    def replay_class(self, node: Node) -> ReplayClass:
        """Node's own, else workflow default, else: approval/prompt pure, a sub-workflow
        idempotent (run again, it finds its child run; the child's steps keep their own
        classes), others unsafe."""
        if node.replay is not None:
            return node.replay
        if node.workflow is not None:
            return ReplayClass.IDEMPOTENT
        if self.defaults.replay is not None:
            return self.defaults.replay
        return ReplayClass.PURE if node.kind in ("approval", "prompt") else ReplayClass.UNSAFE

    def memoize(self, node: Node) -> bool:
        return self.defaults.memoize if node.memoize is None else node.memoize

    def timeout(self, node: Node) -> float:
        return self.defaults.timeout if node.timeout is None else node.timeout

    def step_env(self, node: Node) -> dict[str, str]:
        """The node's `env:` values: the workflow's, then the node's (the node wins)."""
        return {**self.env, **node.env} if node.env else dict(self.env)

    def step_secrets(self, node: Node) -> tuple[str, ...]:
        """The names of the secrets the node's step receives: the workflow's and its own."""
        return tuple(dict.fromkeys((*self.secrets, *node.secrets)))

    def network_for(self, node: Node) -> bool:
        """Whether the node's step may use the network: its own `network:`, else the workflow's."""
        return self.network if node.network is None else node.network

    def provider(self, node: Node) -> str | None:
        """The provider a prompt node names, else the workflow's default (None: the settings')."""
        return self.defaults.provider if node.provider is None else node.provider

    def declared_secrets(self) -> tuple[str, ...]:
        """Every secret name the workflow or any of its nodes declares."""
        names = [*self.secrets, *(name for node in self.nodes for name in node.secrets)]
        return tuple(dict.fromkeys(names))
