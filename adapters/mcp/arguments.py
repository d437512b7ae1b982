"""A tool call checked against the tool's own input schema before the SDK reads it (pure, but
for the middleware at the end): an unknown tool, an unknown, missing or mistyped argument is
one line naming it and a hint, the shape of every other refusal (docs/agents.md, "Tools").

    mistake("get_run", schemas, {})            # Mistake('`run` is required by get_run.', 'Give `run`: …')
    mistake("run_workflow", schemas, {"force": "yes"})
                                               # '`force` must be true or false, not the string "yes".'

The schema is checked by jsonschema, which reads JSON types as JSON says them: `"yes"` is not
a boolean, `123` not a string (the SDK's own validation would coerce the first and word the
rest in pydantic's terms, with a URL); NaN and the infinities, numbers to jsonschema, are
refused too. A call that passes is handed on unchanged.
"""

from __future__ import annotations

import difflib
import functools
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
    """What is wrong with calling `tool` with `arguments`, or None when the call is well formed:
    jsonschema finds what the schema refuses (no argument the tool does not take), and the
    first mistake, in the order a person fixes them, is worded here."""
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
    unknown = [name for name in arguments if name not in properties]
    if unknown:
        known = ", ".join(f"`{p}`" for p in properties) or "none"
        return Mistake(f"`{unknown[0]}` is not an argument of {tool}.", f"Its arguments: {known}.")
    missing = [name for name in schema.get("required", ()) if name not in arguments]
    if missing:
        return Mistake(f"`{missing[0]}` is required by {tool}.", _hint(missing[0], properties[missing[0]]))
    refused = {str(e.path[0]) for e in _validator(schema).iter_errors(dict(arguments)) if e.path}
    # NaN and the infinities are numbers to jsonschema, and no number JSON can say
    refused |= {name for name, v in arguments.items() if isinstance(v, float) and not math.isfinite(v)}
    for name, value in arguments.items():  # in the order given
        if name in refused:
            return Mistake(_wrong(name, properties[name], value), _hint(name, properties[name]))
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


@functools.lru_cache(maxsize=64)
def _compiled(schema: str) -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(json.loads(schema))


def _validator(schema: Schema) -> Any:
    """jsonschema's validator of a tool's input schema (JSON types as JSON says them: `"yes"`
    is no boolean, `true` no number), compiled once per schema."""
    return _compiled(json.dumps(schema, sort_keys=True))


def _wrong(name: str, prop: Schema, value: Any) -> str:
    """Why `value`, refused, does not fit `prop`, the schema of argument `name` (one line)."""
    kinds = [o for o in prop.get("anyOf", [prop]) if o.get("type") != "null"]
    for kind in kinds:  # the right type, so the list of values is what refused it
        if "enum" in kind and _validator({"type": kind.get("type")}).is_valid(value):
            return f"`{name}` is one of {', '.join(map(str, kind['enum']))}, not {describe(value)}."
    return f"`{name}` must be {' or '.join(_wording(o) for o in kinds)}, not {describe(value)}."


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
