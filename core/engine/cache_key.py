"""Content-addressed step identity: Merkle cache keys with early cutoff.

A node's key is `sha256(canonical_json(components))` where the components are

    {"engine_version": ENGINE_VERSION,
     "node": <node id>, "kind": <kind>,
     "definition": <digest of the fields that affect execution>,
     "inputs": {<name>: <digest of the value>}  # only the `inputs.*` the node references
     "run": <run id>,                           # only when the node's templates read `run.id`
     "upstream": {<dep id>: <output digest>}}   # one per `depends_on`

A template that reads `run.id` renders differently in every run, so its result can only be
re-used by the same run (a resume), never by a `--resume-from` run. `BATON_RUN_ID` in the
environment and `run.id` on a script's stdin are *not* part of the key: they are there for
logs and correlation; a step whose output depends on them should say `memoize: false`.

Values are stored as digests so a journal entry stays small whatever the inputs hold;
the key is the same Merkle hash as over the values themselves. Because `upstream` holds
the *output* digests of the dependencies, a dependency that re-runs and produces the
same bytes leaves its dependents' keys unchanged (early cutoff).

The components are stored with each journal entry so that `explain` can say in words
why a key missed. Keys starting with `_` (such as `_reason`) are annotations: they are
stored, but never hashed or compared.

Everything here is pure: callers read the script source and `files:` digests and pass them in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from json.encoder import encode_basestring  # what canonical_json uses for strings (ensure_ascii=False)
from typing import Any

from core.workflows.args import canonical_json
from core.workflows.model import Node

#: Bump when the way nodes execute changes in a way that must not re-use old results.
ENGINE_VERSION = "1"

NO_EARLIER_RESULT = "no earlier result"
DEFINITION_CHANGED = "definition changed"
MEMOIZE_FALSE = "memoize: false"
EARLIER_ATTEMPT_FAILED = "earlier attempt failed"
RUN_ID_DIFFERS = "it reads `run.id`, which differs in this run"


def digest_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_value(value: Any) -> str:
    return hashlib.sha256(canonical_json(value)).hexdigest()


def definition_of(node: Node, *, script_source: str | None, files: Mapping[str, str]) -> dict[str, Any]:
    """The node's fields that affect what it does, and nothing else.

    Never included: description, comments, position in the file, `depends_on` formatting
    (dependencies enter through `upstream`), replay class, timeout, retry, approvers.
    `files` maps each declared `files:` path to the sha256 of its content.
    """
    definition: dict[str, Any] = {"kind": node.kind}
    if node.kind == "script":
        definition["script"] = digest_bytes((script_source or "").encode())
    else:
        definition["body"] = node.body
    if node.with_:
        definition["with"] = node.with_
    if node.output.format != "text" or node.output.schema_ is not None:
        definition["output"] = {"format": node.output.format, "schema": node.output.schema_}
    if node.provider is not None:
        definition["provider"] = node.provider
    if files:
        definition["files"] = dict(sorted(files.items()))
    if node.artifacts:
        definition["artifacts"] = sorted(set(node.artifacts))
    return definition


def definition_digest(node: Node, *, script_source: str | None, files: Mapping[str, str]) -> str:
    return digest_value(definition_of(node, script_source=script_source, files=files))


def input_digests(args: Mapping[str, Any], names: Iterable[str] | None) -> dict[str, str]:
    """Digests of the referenced inputs (`names`), or of every input when `names` is None.

    A referenced input that is absent is recorded as absent (`null`), so adding it later
    changes the key.
    """
    keys = sorted(args) if names is None else sorted(names)
    return {name: digest_value(args.get(name)) for name in keys}


def components_of(
    *,
    node_id: str,
    kind: str,
    definition: str,
    inputs: Mapping[str, str],
    upstream: Mapping[str, str],
    run_id: str | None = None,
) -> dict[str, Any]:
    """The key components; `run_id` only for nodes whose templates read `run.id`."""
    components: dict[str, Any] = {
        "engine_version": ENGINE_VERSION,
        "node": node_id,
        "kind": kind,
        "definition": definition,
        "inputs": dict(inputs),
        "upstream": dict(upstream),
    }
    if run_id is not None:
        components["run"] = run_id
    return components


def _hashed(components: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in components.items() if not k.startswith("_")}


def cache_key(components: Mapping[str, Any]) -> str:
    return digest_value(_hashed(components))


def _flat_json(mapping: Mapping[str, str]) -> str:
    pairs = (f"{encode_basestring(k)}:{encode_basestring(mapping[k])}" for k in sorted(mapping))
    return "{" + ",".join(pairs) + "}"


def key_prefix(
    *, node_id: str, kind: str, definition: str, inputs: Mapping[str, str], run_id: str | None = None
) -> str:
    """The canonical JSON of a node's components up to its `upstream` (fixed for one execution).

    `key_from(key_prefix(...), upstream) == cache_key(components_of(...))`: the hot path
    hashes a precomputed prefix plus the upstream digests instead of re-encoding everything.
    """
    return (
        f'{{"definition":{encode_basestring(definition)},'
        f'"engine_version":{encode_basestring(ENGINE_VERSION)},'
        f'"inputs":{_flat_json(inputs)},'
        f'"kind":{encode_basestring(kind)},'
        f'"node":{encode_basestring(node_id)},'
        + (f'"run":{encode_basestring(run_id)},' if run_id is not None else "")
        + '"upstream":'
    )


def key_from(prefix: str, upstream: Mapping[str, str]) -> str:
    return hashlib.sha256((prefix + _flat_json(upstream) + "}").encode()).hexdigest()


def _changed(previous: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    return sorted(k for k in set(previous) | set(new) if previous.get(k) != new.get(k))


def explain(previous: Mapping[str, Any] | None, new: Mapping[str, Any]) -> str:
    """Why `new` does not hit an entry keyed by `previous`, in words; "" when they agree."""
    if not previous:
        return NO_EARLIER_RESULT
    for field in ("engine_version", "node", "kind", "definition"):
        if previous.get(field) != new.get(field):
            return DEFINITION_CHANGED
    reasons: list[str] = []
    if previous.get("run") != new.get("run"):
        reasons.append(RUN_ID_DIFFERS)
    inputs = _changed(previous.get("inputs") or {}, new.get("inputs") or {})
    if inputs:
        names = ", ".join(f"`inputs.{name}`" for name in inputs)
        reasons.append(f"input {names} changed" if len(inputs) == 1 else f"inputs {names} changed")
    upstream = _changed(previous.get("upstream") or {}, new.get("upstream") or {})
    if upstream:
        names = ", ".join(f"`{name}`" for name in upstream)
        reasons.append(
            f"upstream {names} output changed" if len(upstream) == 1 else f"upstream {names} outputs changed"
        )
    return "; ".join(reasons)


def same_except_upstream(previous: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """True when only the upstream digests could make `new` differ from `previous` (for `plan`)."""
    if not previous:
        return False
    fields = ("engine_version", "node", "kind", "definition", "inputs", "run")
    return all(previous.get(f) == new.get(f) for f in fields)
