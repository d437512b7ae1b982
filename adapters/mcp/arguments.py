"""A tool call checked against the tool's own input schema before the SDK reads it (pure, but
for the middleware at the end): an unknown tool, an unknown, missing or mistyped argument is
one line naming it and a hint, the shape of every other refusal (docs/agents.md, "Tools").

    mistake("get_run", schemas, {})            # Mistake('`run` is required by get_run.', 'Give `run`: …')
    mistake("run_workflow", schemas, {"force": "yes"})
                                               # '`force` must be true or false, not the string "yes".'

JSON types are read strictly, as JSON says them: `"yes"` is not a boolean, `123` not a string,
NaN not a number (the SDK's own validation would coerce the first and word the rest in
pydantic's terms, with a URL). A call that passes is handed on unchanged.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

Schema = Mapping[str, Any]

#: how an expected JSON type is worded: "`force` must be true or false"
_EXPECTED = {"string": "text (a JSON string)", "boolean": "true or false", "number": "a number",
             "integer": "a whole number", "object": "a JSON object", "array": "a JSON array"}


@dataclass(frozen=True, slots=True)
class Mistake:
    """What is wrong with a call (one line naming the tool or argument) and what to do."""

    error: str
    hint: str


def mistake(tool: str, schemas: Mapping[str, Schema], arguments: Any) -> Mistake | None:
    """What is wrong with calling `tool` with `arguments`, or None when the call is well formed."""
    schema = schemas.get(tool)
    if schema is None:
        close = difflib.get_close_matches(tool, list(schemas), n=1, cutoff=0.6)
        meant = f"; did you mean `{close[0]}`?" if close else ""
        return Mistake(f"There is no tool `{tool}`{meant or '.'}",
                       f"Baton's tools (tools/list describes each): {', '.join(schemas)}.")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        return Mistake(f"The arguments of {tool} must be a JSON object, not {describe(arguments)}.",
                       f"Give them by name, e.g. {_example(schema)}.")
    properties: Mapping[str, Schema] = schema.get("properties", {})
    for name in arguments:
        if name not in properties:
            known = ", ".join(f"`{p}`" for p in properties) or "none"
            return Mistake(f"`{name}` is not an argument of {tool}.", f"Its arguments: {known}.")
    for name in schema.get("required", ()):
        if name not in arguments:
            return Mistake(f"`{name}` is required by {tool}.", _hint(name, properties[name]))
    for name, value in arguments.items():
        wrong = _wrong(name, properties[name], value)
        if wrong is not None:
            return Mistake(wrong, _hint(name, properties[name]))
    return None


def describe(value: Any) -> str:
    """A JSON value by its JSON type: `the string "yes"`, `the number 123`, `null`, `an array`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int | float):
        return f"the number {value!r}" if math.isfinite(value) else json.dumps(value)  # NaN, Infinity
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {json.dumps(shown, ensure_ascii=False)}"
    return "an object" if isinstance(value, Mapping) else "an array"


def _wrong(name: str, prop: Schema, value: Any) -> str | None:
    """Why `value` does not fit `prop` (one line), or None."""
    options = list(prop.get("anyOf", [prop]))
    if value is None and any(o.get("type") == "null" for o in options):
        return None
    kinds = [o for o in options if o.get("type") != "null"]
    fitting = next((o for o in kinds if _has_type(value, o.get("type"))), None)
    if fitting is None:
        expected = " or ".join(_wording(o) for o in kinds)
        return f"`{name}` must be {expected}, not {describe(value)}."
    enum = fitting.get("enum")
    if enum is not None and value not in enum:
        return f"`{name}` is one of {', '.join(map(str, enum))}, not {describe(value)}."
    if isinstance(value, int | float) and not isinstance(value, bool) and not _in_range(value, fitting):
        return f"`{name}` must be {_wording(fitting)}, not {describe(value)}."
    return None


def _has_type(value: Any, kind: str | None) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind in ("number", "integer"):
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return number and (kind == "number" or float(value).is_integer())
    if kind == "object":
        return isinstance(value, Mapping)
    if kind == "array":
        return isinstance(value, list)
    return kind is None  # a schema that names no type takes anything


def _in_range(value: float, prop: Schema) -> bool:
    low, high = prop.get("minimum"), prop.get("maximum")
    return math.isfinite(value) and (low is None or value >= low) and (high is None or value <= high)


def _wording(prop: Schema) -> str:
    expected = _EXPECTED.get(str(prop.get("type")), "a JSON value")
    low, high = prop.get("minimum"), prop.get("maximum")
    if low is not None and high is not None:
        return f"{expected} from {low:g} to {high:g}"
    if low is not None:
        return f"{expected} of at least {low:g}"
    return expected if high is None else f"{expected} of at most {high:g}"


def _hint(name: str, prop: Schema) -> str:
    described = str(prop.get("description") or "").strip()
    return f"Give `{name}`: {described}" if described else f"Give `{name}` as {_wording(prop)}."


def _example(schema: Schema) -> str:
    names = list(schema.get("required", ())) or list(schema.get("properties", {}))[:1]
    return "{" + ", ".join(f'"{n}": …' for n in names) + "}"


# -- the SDK's middleware --------------------------------------------------------------------

Refusal = Callable[[Mistake], Any]  # a `Mistake` -> the tool result to answer with
Schemas = Callable[[], Awaitable[Mapping[str, Schema]]]


class ArgumentCheck:
    """A server middleware: a `tools/call` with a mistake is answered with `refuse(mistake)`
    (a tool error) before the SDK validates it; any other message goes on untouched."""

    def __init__(self, schemas: Schemas, refuse: Refusal) -> None:
        self._schemas = schemas
        self._refuse = refuse
        self._known: Mapping[str, Schema] | None = None

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        params = ctx.params
        if ctx.method != "tools/call" or ctx.request_id is None or not isinstance(params, Mapping):
            return await call_next(ctx)
        name = params.get("name")
        if not isinstance(name, str):  # not a tool call the SDK can read: its own error
            return await call_next(ctx)
        if self._known is None:
            self._known = await self._schemas()
        found = mistake(name, self._known, params.get("arguments"))
        return await call_next(ctx) if found is None else self._refuse(found)
