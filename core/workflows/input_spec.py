"""A declared value: a workflow's `inputs:` entry, or a field of an approval's `form:`.

`InputSpec` states a type (string, integer, number, boolean, object, array), whether it is
required, a default and allowed values; `matches_type` is the type check both use.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

#: the pydantic error type of an inconsistent spec; the loader reads `ctx["key"]` and `ctx["hint"]`
INPUT_SPEC_ERROR = "input_spec"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def matches_type(value: Any, type_: str) -> bool:
    """True when a (JSON) value is of a declared input type; bool is not a number."""
    if type_ == "string":
        return isinstance(value, str)
    if type_ == "boolean":
        return isinstance(value, bool)
    if type_ == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_ == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if type_ == "object":
        return isinstance(value, dict)
    return isinstance(value, list)


def _spec_error(message: str, key: str, hint: str) -> PydanticCustomError:
    return PydanticCustomError(INPUT_SPEC_ERROR, message, {"key": key, "hint": hint})


class InputSpec(_Strict):
    type: Literal["string", "integer", "number", "boolean", "object", "array"] = "string"
    required: bool = False
    default: Any = None
    description: str = ""
    enum: list[Any] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> InputSpec:
        if self.required and self.default is not None:
            raise _spec_error(
                "is required and also has a default",
                "default",
                "Remove `default:` or `required: true`: an input with a default is never missing.",
            )
        if self.default is not None and not matches_type(self.default, self.type):
            raise _spec_error(
                f"default {self.default!r} is not of type {self.type}",
                "default",
                f"Give a default of type {self.type}, or change `type:`.",
            )
        if self.enum is not None:
            if not self.enum:
                raise _spec_error("has an empty `enum`", "enum", "List the allowed values or drop `enum:`.")
            wrong = [v for v in self.enum if not matches_type(v, self.type)]
            if wrong:
                raise _spec_error(
                    f"enum value {wrong[0]!r} is not of type {self.type}",
                    "enum",
                    f"Make every `enum` value of type {self.type}.",
                )
            if self.default is not None and self.default not in self.enum:
                raise _spec_error(
                    f"default {self.default!r} is not one of its enum values",
                    "default",
                    f"Pick a default from {self.enum!r}.",
                )
        return self
