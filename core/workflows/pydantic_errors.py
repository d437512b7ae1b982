"""Translate one pydantic validation error of a workflow into (message, hint) for a person.

Pydantic says "Extra inputs are not permitted" at `('nodes', 2, 'dependson')`; we say
"unknown key `dependson` in node `build`" and "Did you mean `depends_on`?". The location is
turned into a line by the loader; this module only words the error.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Union

from pydantic import BaseModel
from pydantic_core import ErrorDetails

from core.workflows.input_spec import INPUT_SPEC_ERROR
from core.workflows.model import ENVIRONMENT_ERROR, NODE_KIND_ERROR, Workflow
from core.workflows.schedule_spec import SCHEDULE_ERROR
from core.workflows.validation import did_you_mean

Loc = tuple[str | int, ...]
_HIDDEN_FIELDS = {"source"}  # model fields the YAML may not set


def translate(error: ErrorDetails, data: Any) -> tuple[str, str]:
    """(one-line cause, one-line fix) for a pydantic error raised while validating `data`."""
    loc: Loc = tuple(error["loc"])
    kind = error["type"]
    ctx = error.get("ctx") or {}
    value = error.get("input")
    where = describe(loc[:-1], data) if loc else "the workflow"
    key = str(loc[-1]) if loc else ""

    if kind == NODE_KIND_ERROR:
        return error["msg"], str(ctx.get("hint", ""))
    if kind == SCHEDULE_ERROR:  # a schedule's check ("schedule `x` has …"), or a field's ("`cron` of …: …")
        if not loc:  # the workflow's check of its schedules ("schedule #2 repeats the id …")
            return error["msg"], str(ctx.get("hint", ""))
        sep = ": " if len(loc) > 2 else " "
        return f"{describe(loc, data)}{sep}{error['msg']}", str(ctx.get("hint", ""))
    if kind in (INPUT_SPEC_ERROR, ENVIRONMENT_ERROR):
        return f"{describe(loc, data)} {error['msg']}", str(ctx.get("hint", ""))
    if kind == "extra_forbidden":
        allowed = allowed_keys(loc[:-1])
        guess = did_you_mean(key, allowed)
        hint = f"Did you mean `{guess}`?" if guess else "Allowed keys: " + ", ".join(allowed) + "."
        return f"unknown key `{key}` in {where}", hint
    if kind == "missing":
        if loc == ("nodes",):
            return "the workflow has no `nodes:`", "List its steps under `nodes:` (each with an `id`)."
        return f"{where} is missing `{key}`", f"Add `{key}:`."
    if kind in ("literal_error", "enum"):
        expected = _choices(str(ctx.get("expected", "")))
        guess = did_you_mean(str(value), expected)
        shown = ", ".join(expected)
        if key == "type" and loc[:1] == ("inputs",):
            cause = f"{where} has unknown type `{value}`"
        else:
            cause = f"`{key}` of {where} is `{value}`, which is not one of {shown}"
        return cause, (f"Did you mean `{guess}`?" if guess else f"Use one of: {shown}.")
    if kind == "string_pattern_mismatch":
        if loc == ("name",):
            return (
                f"workflow name `{value}` is not valid",
                "Use letters, digits, `.`, `_` and `-`, starting with a letter or digit.",
            )
        if key == "id":
            return (
                f"node id `{value}` is not valid",
                "Use letters, digits, `_` and `-`, starting with a letter or `_`.",
            )
    if kind == "value_error" and "duration" in error["msg"]:
        where_key = describe(loc, data)
        return f"{where_key}: {error['msg'].removeprefix('Value error, ')}", (
            "Write a duration such as 30m, 4h, 1h30m or 2d (more than 0s, at most 30d)."
        )
    if loc == ("nodes",) and kind == "list_type":
        return "`nodes:` must be a list of steps", "Write each node as a `- id: …` item under `nodes:`."
    field = f"`{key}` of {where}" if loc else "the workflow"
    return f"{field}: {error['msg'].rstrip('.')} (got {_short(value)})", _type_hint(kind, key)


def describe(loc: Loc, data: Any) -> str:
    """Name the object at `loc` for a person: "node `build`", "input `version`", …"""
    if not loc:
        return "the workflow"
    if loc[0] == "nodes" and len(loc) >= 2 and isinstance(loc[1], int):
        node_id = _node_id(data, loc[1])
        name = f"node `{node_id}`" if node_id else f"node #{loc[1] + 1}"
        rest = ".".join(str(p) for p in loc[2:])
        return f"`{rest}` of {name}" if rest else name
    if loc[0] == "schedules" and len(loc) >= 2 and isinstance(loc[1], int):
        try:
            sid = data["schedules"][loc[1]]["id"]
        except (KeyError, IndexError, TypeError):
            sid = None
        name = f"schedule `{sid}`" if isinstance(sid, str) else f"schedule #{loc[1] + 1}"
        rest = ".".join(str(p) for p in loc[2:])
        return f"`{rest}` of {name}" if rest else name
    if loc[0] == "inputs" and len(loc) >= 2:
        rest = ".".join(str(p) for p in loc[2:])
        return f"`{rest}` of input `{loc[1]}`" if rest else f"input `{loc[1]}`"
    return "`" + ".".join(str(p) for p in loc) + "`"


def allowed_keys(loc: Loc) -> list[str]:
    """The keys the YAML may use in the mapping at `loc` (aliases, e.g. `with`, `schema`)."""
    model = model_at(loc)
    if model is None:
        return []
    return [
        info.alias or name for name, info in model.model_fields.items() if name not in _HIDDEN_FIELDS
    ]


def model_at(loc: Loc) -> type[BaseModel] | None:
    """The pydantic model that validates the mapping at `loc`, following field annotations."""
    current: Any = Workflow
    for part in loc:
        if isinstance(current, type) and issubclass(current, BaseModel):
            fields = {info.alias or name: info for name, info in current.model_fields.items()}
            info = fields.get(str(part))
            if info is None:
                return None
            current = _unwrap(info.annotation)
        else:  # a list or dict annotation: `part` is an index or key
            args = typing.get_args(current)
            current = _unwrap(args[-1]) if args else None
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _unwrap(options[0]) if len(options) == 1 else annotation
    return annotation


def _node_id(data: Any, index: int) -> str | None:
    try:
        node_id = data["nodes"][index]["id"]
    except (KeyError, IndexError, TypeError):
        return None
    return node_id if isinstance(node_id, str) else None


def _choices(expected: str) -> list[str]:
    return [part.strip(" '") for part in expected.replace(" or ", ", ").split(",") if part.strip(" '")]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_hint(kind: str, key: str) -> str:
    if kind.startswith("list"):
        return f"Write `{key}:` as a list, e.g. `{key}: [a, b]`."
    if kind.startswith(("dict", "model")):
        return f"Write `{key}:` as a mapping of keys to values."
    if kind.startswith("string"):
        return f"Write `{key}:` as text (quote it if YAML reads it as a number or boolean)."
    if kind.startswith(("bool",)):
        return f"Write `{key}:` as true or false."
    if kind.startswith("int"):  # `true`, `1.0`, `"2"` where a whole number goes
        return f"Write `{key}:` as a whole number, e.g. `{key}: 2`."
    if kind.startswith(("float", "greater", "less")):
        return f"Give `{key}:` a number in the allowed range."
    return f"Fix `{key}:`."
