"""Content-addressed step identity: Merkle cache keys with early cutoff.

A node's key is `sha256(canonical_json(components))` where the components are

    {"engine_version": ENGINE_VERSION,
     "node": <node id>, "kind": <kind>,
     "definition": <digest of the fields that affect execution>,
     "inputs": {<name>: <digest of the value>}  # only the `inputs.*` the node references
     "run": <run id>,                           # only when the node's templates read `run.id`
     "tool" / "provider" / "env" / "secrets": … # identity beyond the YAML (`step_identity.py`)
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
why a key missed. What an entry notes beside them (why the step ran, why it was skipped…)
is a record of its own (`KeyNotes`), never hashed or compared: every component here is
part of the key.

The identity components are present only where they apply, so a node without them keys
exactly as it did before they existed. Entries recorded since note it
(`KeyNotes.keyed_identity`); one recorded before misses with a reason saying so ("tool `x`
not recorded with the earlier result"), except for the run that recorded it (`legacy_match`):
a resume or an approval continues where it stopped rather than run a completed step a second
time.

Everything here is pure: callers read the script source and `files:` digests and pass them in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from json.encoder import encode_basestring  # what canonical_json uses for strings (ensure_ascii=False)
from typing import Any

from core.store.records import STORED_NOTE_NAMES
from core.workflows.approval_spec import DEFAULT_CHOICES
from core.workflows.args import canonical_json
from core.workflows.model import Node

#: Bump when the way nodes execute changes in a way that must not re-use old results.
ENGINE_VERSION = "1"

NO_EARLIER_RESULT = "no earlier result"
DEFINITION_CHANGED = "definition changed"
MEMOIZE_FALSE = "memoize: false"
EARLIER_ATTEMPT_FAILED = "earlier attempt failed"
CACHE_EXPIRED = "cache entry expired"  # last used longer ago than BATON_CACHE_RETENTION_DAYS
EARLIER_ATTEMPT_INTERRUPTED = "re-run: the earlier attempt was interrupted (its process stopped)"
RUN_ID_DIFFERS = "it reads `run.id`, which differs in this run"
NOT_RECORDED = "not recorded with the earlier result"
UNREGISTERED = "unregistered"  # the identity of a tool nobody registered (the step fails when it runs)
#: the identity components (`step_identity.py`)
IDENTITY_FIELDS = ("tool", "provider", "env", "secrets")
_PROVIDER_FIELDS = {"base_url": "base URL", "program": "command"}  # field -> words (else its name)


def digest_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_value(value: Any) -> str:
    return hashlib.sha256(canonical_json(value)).hexdigest()


def definition_of(node: Node, *, script_source: str | None, files: Mapping[str, str]) -> dict[str, Any]:
    """The node's fields that affect what it does, and nothing else.

    Never included: description, comments, position in the file, `depends_on` formatting
    (dependencies enter through `upstream`), replay class, timeout, retry, approvers (and a
    gate's quorum, deadlines and escalation; its `form:` and `choices:` count), and
    `provider:` (what answers enters as the `provider` component, whoever names it).
    `files` maps each declared `files:` path to the sha256 of its content.
    """
    kind = node.kind
    definition: dict[str, Any] = {"kind": kind}
    if kind == "script":
        definition["script"] = digest_bytes((script_source or "").encode())
    else:
        definition["body"] = node.body
    if node.with_:
        definition["with"] = node.with_
    if node.output.format != "text" or node.output.schema_ is not None:
        definition["output"] = {"format": node.output.format, "schema": node.output.schema_}
    if files:
        definition["files"] = dict(sorted(files.items()))
    if node.artifacts:
        definition["artifacts"] = sorted(set(node.artifacts))
    if node.when is not None:
        definition["when"] = node.when
    if node.map is not None:  # what the items are and what they are called; not how they run
        definition["map"] = {"items": node.map.items, "as": node.map.as_}
    gate = node.approval
    if gate is not None and (gate.form or tuple(gate.choices) != DEFAULT_CHOICES):
        # what a decision holds (its values, its choices); who decides and when does not count
        definition["gate"] = {
            "form": {name: spec.model_dump() for name, spec in sorted(gate.form.items())},
            "choices": list(gate.answers),
        }
    return definition


def definition_digest(node: Node, *, script_source: str | None, files: Mapping[str, str]) -> str:
    kind = node.kind
    gate = node.approval
    plain = kind != "script" and not files and not node.with_ and not node.artifacts and node.when is None
    plain = plain and node.map is None
    plain = plain and (gate is None or (not gate.form and tuple(gate.choices) == DEFAULT_CHOICES))
    if plain and node.output.format == "text" and node.output.schema_ is None:
        # `{"body": …, "kind": …}` in canonical JSON, written out: prepare does this per node
        text = f'{{"body":{encode_basestring(node.body)},"kind":{encode_basestring(kind)}}}'
        return digest_bytes(text.encode("utf-8"))
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
    identity: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The key components; `run_id` only for nodes whose templates read `run.id`;
    `identity` from `step_identity.identity_components`."""
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
    if identity:
        components.update(identity)
    return components


def item_components(
    components: Mapping[str, Any],
    item: Any,
    *,
    only_items: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset()),
) -> dict[str, Any]:
    """The key components of one item of a `map:` node: the node's (`components_of`), and the
    digest of the item's canonical JSON value under `item`. Not its position: an item added
    or removed before it leaves its key, and its cached result, as they were.

    `only_items`: the (dependencies, inputs) that only `map.items` reads; they are left out,
    since the item holds what the step sees of them: a host added to the list a dependency
    gives does not change the key of the other hosts."""
    deps, inputs = only_items
    result = dict(components)
    if deps:
        result["upstream"] = {k: v for k, v in result["upstream"].items() if k not in deps}
    if inputs:
        result["inputs"] = {k: v for k, v in result["inputs"].items() if k not in inputs}
    result["item"] = digest_value(item)
    return result


def cache_key(components: Mapping[str, Any]) -> str:
    return digest_value(components)


def _flat_json(mapping: Mapping[str, str]) -> str:
    pairs = (f"{encode_basestring(k)}:{encode_basestring(mapping[k])}" for k in sorted(mapping))
    return "{" + ",".join(pairs) + "}"


#: the components every key has, in canonical (sorted) order, `upstream` last
_FIXED = ("definition", "engine_version", "inputs", "kind", "node", "run", "upstream")


def encode_identity(identity: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The identity components as canonical JSON fragments, one slot per gap between the
    fixed components (`_FIXED`), for `key_prefix`; computed once per definition."""
    slots = [""] * len(_FIXED)
    for name in sorted(identity or {}):
        if name in _FIXED or name > _FIXED[-1] or name in STORED_NOTE_NAMES:  # (stored alongside)
            raise ValueError(f"`{name}` cannot be an identity component")
        gap = next(i for i, fixed in enumerate(_FIXED) if name < fixed)
        slots[gap] += f"{encode_basestring(name)}:{canonical_json(identity[name]).decode()},"  # type: ignore[index]
    return tuple(slots)


def key_prefix(
    *,
    node_id: str,
    kind: str,
    definition: str,
    inputs: Mapping[str, str],
    run_id: str | None = None,
    identity_json: tuple[str, ...] | None = None,
) -> str:
    """The canonical JSON of a node's components up to its `upstream` (fixed for one execution).

    `key_from(key_prefix(...), upstream) == cache_key(components_of(...))`: the hot path
    hashes a precomputed prefix plus the upstream digests instead of re-encoding everything.
    `identity_json` is `encode_identity(identity)`: the identity components, encoded once,
    placed where they sort among the others.
    """
    i = identity_json or ("",) * len(_FIXED)
    run = f'"run":{encode_basestring(run_id)},' if run_id is not None else ""
    return (
        f'{{{i[0]}"definition":{encode_basestring(definition)},{i[1]}'
        f'"engine_version":{encode_basestring(ENGINE_VERSION)},{i[2]}'
        f'"inputs":{_flat_json(inputs)},{i[3]}'
        f'"kind":{encode_basestring(kind)},{i[4]}'
        f'"node":{encode_basestring(node_id)},{i[5]}{run}{i[6]}"upstream":'
    )


def key_from(prefix: str, upstream: Mapping[str, str]) -> str:
    return hashlib.sha256((prefix + _flat_json(upstream) + "}").encode()).hexdigest()


def _changed(previous: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    return sorted(k for k in set(previous) | set(new) if previous.get(k) != new.get(k))


def _names(names: list[str]) -> str:
    return ", ".join(f"`{name}`" for name in names)


def _tool_reasons(previous: Any, new: Any) -> list[str]:
    if not isinstance(new, Mapping):
        return ["tool changed"]
    if not isinstance(previous, Mapping):
        return [f"tool {_names(sorted(new))} {NOT_RECORDED}"]
    reasons = []
    for name in _changed(previous, new):
        was, now = str(previous.get(name, "")), str(new.get(name, ""))
        if now == UNREGISTERED:
            reasons.append(f"tool `{name}` is not registered")
        elif was.startswith("version:") and now.startswith("version:"):
            reasons.append(f"tool `{name}` changed: version {was[8:]} → {now[8:]}")
        else:
            reasons.append(f"tool `{name}` changed")
    return reasons


def _provider_reasons(previous: Any, new: Any) -> list[str]:
    if not isinstance(new, Mapping):
        return ["provider changed"]
    if not isinstance(previous, Mapping):
        return [f"provider {NOT_RECORDED}"]
    name = new.get("name")
    if previous.get("name") != name:
        return [f"provider changed: {previous.get('name')} → {name}"]
    if new.get("configured") is False or previous.get("configured") is False:
        return [f"provider `{name}` {'is not' if new.get('configured') is False else 'was not'} configured"]
    reasons = []
    for field in _changed(previous, new):
        if field == "command":
            if previous.get("program") == new.get("program"):
                reasons.append("command changed")  # the arguments: shown by digest only
            continue
        label = _PROVIDER_FIELDS.get(field, field.replace("_", " "))
        reasons.append(f"{label} changed: {previous.get(field)} → {new.get(field)}")
    return reasons


def _sees_env(components: Mapping[str, Any]) -> bool:
    return "env" in components or "secrets" in components


def _identity_reasons(previous: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    reasons: list[str] = []
    was, now = previous.get("tool"), new.get("tool")
    if was != now:
        reasons += _tool_reasons(was, now)
    was, now = previous.get("provider"), new.get("provider")
    if was != now:
        reasons += _provider_reasons(was, now)
        if _sees_env(previous) != _sees_env(new):
            return reasons  # another provider, which does (not) see the environment: said above
    env = _changed(previous.get("env") or {}, new.get("env") or {})
    if env:
        reasons.append(f"env {_names(env)} changed")
    was_secrets, now_secrets = set(previous.get("secrets") or ()), set(new.get("secrets") or ())
    if now_secrets - was_secrets:
        reasons.append(f"secret {_names(sorted(now_secrets - was_secrets))} declared")
    if was_secrets - now_secrets:
        reasons.append(f"secret {_names(sorted(was_secrets - now_secrets))} no longer declared")
    return reasons


def explain(previous: Mapping[str, Any] | None, new: Mapping[str, Any]) -> str:
    """Why `new` does not hit an entry keyed by `previous`, in words; "" when they agree."""
    if not previous:
        return NO_EARLIER_RESULT
    for field in ("engine_version", "node", "kind", "definition"):
        if previous.get(field) != new.get(field):
            return DEFINITION_CHANGED
    reasons = _identity_reasons(previous, new)
    if previous.get("item") != new.get("item"):
        reasons.append("item changed")
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
    fields = {k for k in (*previous, *new) if k != "upstream"}
    return all(previous.get(f) == new.get(f) for f in fields)


def legacy_match(previous: Mapping[str, Any] | None, new: Mapping[str, Any], keyed_identity: bool) -> bool:
    """True when `previous` was recorded before identity components existed (`keyed_identity`:
    its entry notes it was recorded since) and agrees with `new` on everything else: the same
    step, as that engine keyed it."""
    if not previous or keyed_identity:
        return False
    fields = {k for k in (*previous, *new) if k not in IDENTITY_FIELDS}
    return all(previous.get(f) == new.get(f) for f in fields)
