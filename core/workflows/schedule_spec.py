"""`schedules:` of a workflow (DESIGN.md "Automation" -> "Schedules"), checked at load.

    schedules:
      - id: nightly
        cron: "0 2 * * 1-5"            # or `every: 15m`
        timezone: Europe/Paris         # default UTC
        args: {message: nightly}
        overlap: skip                  # skip (default) | queue | cancel_running | allow
        catchup: latest                # latest (default) | none | all
        catchup_window: 1h
        post_to: "slack:C024BE7LH"     # where its runs report
        as: "slack:U024BE7LH"          # the principal it runs as

A bad cron expression, an unknown time zone, both or neither of `cron` and `every`, a
`timezone` with `every` (an interval has none): one `WorkflowDefinitionError` with the key's
line and the fix (`SCHEDULE_ERROR`, worded by `pydantic_errors.py`). When each fires is
`schedule_rules.py`'s.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from core.workflows.durations import parse_duration
from core.workflows.schedule_rules import UTC, RuleError, check_cron, check_every, zone

SCHEDULE_ERROR = "schedule"
OVERLAPS: tuple[str, ...] = ("skip", "queue", "cancel_running", "allow")
CATCHUPS: tuple[str, ...] = ("latest", "none", "all")
DEFAULT_WINDOW = 3600.0  # catch-up window when none is given: fires missed within the hour
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_PLACE = re.compile(r"^(console|slack|discord):[^\s:][^\s]*$")


def _error(message: str, key: str | None, hint: str) -> PydanticCustomError:
    """`key`: the key to point at, inside the mapping the error is about (a model check's);
    None for a field's own check (the error's location is the field already)."""
    ctx = {"hint": hint} if key is None else {"key": key, "hint": hint}
    return PydanticCustomError(SCHEDULE_ERROR, message, ctx)


def _window(value: Any) -> Any:
    return None if value is None else parse_duration(value)


class ScheduleSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    id: str
    cron: str | None = None
    every: str | float | None = None
    timezone: str = UTC
    args: dict[str, Any] = Field(default_factory=dict)
    overlap: Literal["skip", "queue", "cancel_running", "allow"] = "skip"
    catchup: Literal["latest", "none", "all"] = "latest"
    catchup_window: Annotated[float | None, BeforeValidator(_window)] = None
    post_to: str | None = None
    as_: str | None = Field(default=None, alias="as")

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not _ID.match(value):
            raise _error(f"`{value}` is not a schedule id", None,
                         "Use letters, digits, `_` and `-`, starting with a letter or digit.")
        return value

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return check_cron(value)
        except RuleError as exc:
            raise _error(exc.message, None, exc.hint) from None

    @field_validator("every")
    @classmethod
    def _every(cls, value: str | float | None) -> float | None:
        if value is None:
            return None
        try:
            return check_every(value)
        except RuleError as exc:
            raise _error(exc.message, None, exc.hint) from None

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            zone(value)
        except RuleError as exc:
            raise _error(exc.message, None, exc.hint) from None
        return value

    @field_validator("post_to", "as_")
    @classmethod
    def _place(cls, value: str | None) -> str | None:
        if value is not None and not _PLACE.match(value):
            raise _error(f"`{value}` is not `<platform>:<id>`", None,
                         'Write e.g. "slack:C024BE7LH", "discord:123456789" or "console:ops".')
        return value

    @model_validator(mode="after")
    def _one_rule(self) -> ScheduleSpec:
        if (self.cron is None) == (self.every is None):
            both = self.cron is not None
            raise _error(
                "has both `cron` and `every`" if both else "has neither `cron` nor `every`",
                "every" if both else "id",
                'Give exactly one: `cron: "0 2 * * *"` (a wall-clock rule) or `every: 15m` (an interval).',
            )
        if self.every is not None and "timezone" in self.model_fields_set:
            raise _error(
                "has `every` and `timezone`: an interval has no time zone",
                "timezone",
                "Remove `timezone:` (`every` counts from when the schedule was first seen), or use "
                '`cron:` for a wall-clock rule in that zone (`cron: "0 2 * * *"`).',
            )
        return self

    @property
    def seconds(self) -> float | None:
        """`every` in seconds (validated), or None for a cron schedule."""
        return None if self.every is None else float(self.every)

    @property
    def window(self) -> float:
        return DEFAULT_WINDOW if self.catchup_window is None else self.catchup_window
