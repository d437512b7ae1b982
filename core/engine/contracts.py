"""Output contracts: a step's output is checked against its `output:` before it counts.

    check_output("draft", text, node.output)   # -> the text, or the parsed JSON value

A violation raises `OutputContractViolation` naming the node, the rule that broke and the
start of the offending output; the executor fails the step and never caches it.

JSON Schema validators are compiled once per distinct schema (keyed by its canonical JSON).
`compile_schema` is also what the workflow loader can call to reject a bad schema early.
jsonschema is imported at the first schema check, not with the engine (a restarted bot
whose runs check no schema never pays for it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from core.errors import OutputContractViolation
from core.workflows.model import OutputContract

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

OFFENDING_CHARS = 200


def check_output(node_id: str, output: str, contract: OutputContract) -> Any:
    """The parsed output (text for `format: text`, the JSON value for `format: json`)."""
    if contract.format == "text":
        return output
    try:
        value = json.loads(output)
    except json.JSONDecodeError as exc:
        rule = f"output is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        raise violation(node_id, rule, output) from None
    if contract.schema_ is not None:
        from jsonschema import exceptions as schema_errors

        try:
            validator = compile_schema(contract.schema_)
        except schema_errors.SchemaError as exc:
            rule = f"output.schema is not a valid JSON Schema: {exc.message}"
            raise violation(node_id, rule, output) from None
        error = schema_errors.best_match(validator.iter_errors(value))
        if error is not None:
            raise violation(node_id, f"output.schema: {error.message} at {error.json_path}", output)
    return value


def compile_schema(schema: Mapping[str, Any]) -> Validator:
    """A checked validator for `schema`, cached by the schema's canonical JSON."""
    return _compiled(json.dumps(schema, sort_keys=True, separators=(",", ":")))


@lru_cache(maxsize=512)
def _compiled(canonical: str) -> Validator:
    from jsonschema import validators

    schema = json.loads(canonical)
    cls = validators.validator_for(schema)
    cls.check_schema(schema)
    validator: Validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    return validator


def offending_excerpt(output: str) -> str:
    """The first OFFENDING_CHARS characters, with an ellipsis when there is more."""
    if len(output) <= OFFENDING_CHARS:
        return output
    return output[:OFFENDING_CHARS] + "…"


def violation(node_id: str, rule: str, output: str) -> OutputContractViolation:
    excerpt = offending_excerpt(output)
    shown = excerpt.replace("\r", "\\r").replace("\n", "\\n") if excerpt else "(empty)"
    return OutputContractViolation(
        f"step `{node_id}` broke its output contract: {rule}; output was: {shown}",
        node_id=node_id,
        rule=rule,
        offending=excerpt,
    )
