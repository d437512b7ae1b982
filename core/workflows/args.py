"""Run arguments: canonical JSON, content address, short handle, and input validation.

Canonical JSON has sorted keys, no insignificant whitespace, UTF-8 text (no `\\u` escapes) and
no NaN/Infinity, so key order, indentation and quoting style of whatever the user typed never
change a digest. `args:3f9a1c2b` is the handle people see and pass back with `--args @…`.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from core.canonical import ENCODER
from core.errors import InputValidationError
from core.workflows.input_spec import InputSpec, matches_type
from core.workflows.model import Workflow

HANDLE_PREFIX = "args:"
MESSAGE = "message"  # the free text after the workflow name: always allowed, always a string
_INTEGER = re.compile(r"^[+-]?(0|[1-9][0-9]*)$")
_NUMBER = re.compile(r"^[+-]?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$")
_ARTICLE = {"integer": "an integer", "object": "an object", "array": "an array"}


_CANONICAL = ENCODER


def canonical_json(value: Any) -> bytes:
    """Sorted keys, compact separators, UTF-8; NaN and Infinity are refused."""
    try:
        text = _CANONICAL.encode(value)
    except ValueError as exc:  # NaN / Infinity / circular
        raise InputValidationError(
            f"arguments are not valid JSON: {exc}", hint="Use finite numbers (no NaN or Infinity)."
        ) from exc
    except TypeError as exc:  # a set, bytes, a non-string key mixed with strings, …
        raise InputValidationError(
            f"arguments are not JSON data: {exc}",
            hint="Use only strings, numbers, booleans, null, lists and objects with text keys.",
        ) from exc
    return text.encode("utf-8")


def args_digest(value: Any) -> str:
    """sha256 hex of the canonical JSON: the content address of the arguments."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def handle(digest: str) -> str:
    """The short, human handle of a digest: `args:` + its first 8 hex digits."""
    return HANDLE_PREFIX + digest[:8]


def validate_inputs(workflow: Workflow, args: Mapping[str, Any]) -> dict[str, Any]:
    """Check `args` against the declared inputs; return them with defaults applied.

    Required inputs must be present; types are strict (an integer is not a boolean, `3.0` is
    not an integer) except that text which parses exactly is coerced (`"3"` -> 3 for an
    integer, `"true"` for a boolean): what `--set k=v` gives when its value is not JSON, and
    what a form gives. Undeclared keys are kept as free fields. `message` is always allowed,
    is a string and defaults to "".
    """
    result = dict(args)
    message = result.get(MESSAGE, "")
    if not isinstance(message, str):
        raise InputValidationError(
            f"input `message` must be text, got {_describe(message)}",
            hint="Pass the message as the free text after the workflow name.",
        )
    result[MESSAGE] = message
    declared = _declared(workflow)
    for name, spec in workflow.inputs.items():
        if name not in result or result[name] is None:
            if spec.required:
                raise InputValidationError(
                    f"input `{name}` is required ({spec.type}): pass it with --set {name}=…",
                    hint=declared,
                )
            result[name] = spec.default
            continue
        result[name] = _coerce(name, spec, result[name], declared)
    return result


#: how alike a typed key and a declared input must be to be a misspelling (`versoin`)
NEAR_MISS = 0.75


def near_miss(key: str, name: str) -> bool:
    """Whether typing `key` most likely meant the input `name`: the same once case, `_` and `-`
    are set aside (`ENV`, `replica-count`), alike letter for letter (`versoin`), or one the
    start of the other (`replicas` for `replica_count`, `environment` for `env`)."""
    a, b = (text.lower().replace("_", "").replace("-", "") for text in (key, name))
    if a == b or difflib.SequenceMatcher(None, a, b).ratio() >= NEAR_MISS:
        return True
    prefix = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return prefix >= 3 and prefix >= NEAR_MISS * min(len(a), len(b))


def check_typed_keys(workflow: Workflow, typed: Iterable[str], args: Mapping[str, Any]) -> None:
    """Refuse a key someone typed (`--set versoin=1.4`, a key of `--args`) that the workflow
    does not declare but that is a near miss of an input it declares and `args` lacks: it
    would be kept as a free field that nothing reads, and the run would go on without the
    value (or with the input's default) while the person believes they set it."""
    open_inputs = [name for name in workflow.inputs if args.get(name) is None]
    for key in dict.fromkeys(typed):
        if key in workflow.inputs or key == MESSAGE:
            continue
        meant = [name for name in open_inputs if near_miss(key, name)]
        if meant:
            raise InputValidationError(
                f"`{key}` is not an input of `{workflow.name}`; did you mean `{meant[0]}`?",
                hint=f"Type it again as `--set {meant[0]}=…`. {_declared(workflow)}",
            )


def missing_inputs(workflow: Workflow, args: Mapping[str, Any]) -> list[str]:
    """The required inputs `args` lacks (what `validate_inputs` would refuse first), in order."""
    return [n for n, spec in workflow.inputs.items() if spec.required and args.get(n) is None]


def check_input(workflow: Workflow, name: str, value: Any) -> Any:
    """One declared input's value as `validate_inputs` checks it (text coerced, enum), or
    `InputValidationError` naming that input."""
    return _coerce(name, workflow.inputs[name], value, _declared(workflow))


def check_value(name: str, spec: InputSpec, value: Any, *, noun: str, hint: str, pass_as: str) -> Any:
    """A value checked against a spec the way inputs are (an approval's `form:` fields):
    `noun` names it ("field"), `hint` is the fix for a wrong type, `pass_as` how to type it."""
    return _coerce(name, spec, value, hint, noun=noun, pass_as=pass_as)


def _coerce(
    name: str,
    spec: InputSpec,
    value: Any,
    declared: str,
    *,
    noun: str = "input",
    pass_as: str = "--set {name}=…",
) -> Any:
    if not matches_type(value, spec.type) and isinstance(value, str):
        value = _from_text(value, spec.type)
    if not matches_type(value, spec.type):
        raise InputValidationError(
            f"{noun} `{name}` must be {_ARTICLE.get(spec.type, 'a ' + spec.type)}, got {_describe(value)}",
            hint=declared,
        )
    if spec.enum is not None and value not in spec.enum:
        allowed = ", ".join(json.dumps(v, ensure_ascii=False) for v in spec.enum)
        raise InputValidationError(
            f"{noun} `{name}` must be one of {allowed}, got {json.dumps(value, ensure_ascii=False)}",
            hint=f"Pass one of them with {pass_as.format(name=name)}",
        )
    return value


def _from_text(text: str, type_: str) -> Any:
    """Text that parses *exactly* as the declared type; otherwise the text unchanged."""
    stripped = text.strip()
    if type_ == "integer" and _INTEGER.match(stripped):
        return int(stripped)
    if type_ == "number" and _NUMBER.match(stripped):
        number = float(stripped)
        return int(stripped) if _INTEGER.match(stripped) else number if math.isfinite(number) else text
    if type_ == "boolean" and stripped in ("true", "false"):
        return stripped == "true"
    if type_ in ("object", "array") and stripped[:1] in ("{", "["):
        try:
            return json.loads(stripped)
        except json.JSONDecodeError:
            return text
    return text


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {json.dumps(value)}"
    if isinstance(value, int):
        return f"integer {value}"
    if isinstance(value, float):
        return f"number {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"text {json.dumps(shown, ensure_ascii=False)}"
    return "an object" if isinstance(value, dict) else "an array"


def _declared(workflow: Workflow) -> str:
    """One line listing the declared inputs: what the user is expected to pass."""
    parts = []
    for name, spec in workflow.inputs.items():
        flags = [spec.type, "required" if spec.required else f"default {json.dumps(spec.default)}"]
        if spec.enum is not None:
            flags.append("one of " + "|".join(json.dumps(v, ensure_ascii=False) for v in spec.enum))
        parts.append(f"{name} ({', '.join(flags)})")
    return f"Inputs of `{workflow.name}`: " + "; ".join(parts) + "."
