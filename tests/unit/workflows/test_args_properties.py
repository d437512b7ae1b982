"""Property tests: canonical args do not depend on key order, whitespace or quoting style."""

from __future__ import annotations

import json
import random
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from core.workflows.args import args_digest, canonical_json

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=6)

# YAML folds line breaks inside quoted scalars (a YAML rule, not ours): plain text only there
_plain_text = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), max_size=12)
yaml_objects = st.dictionaries(
    _plain_text,
    st.recursive(
        st.none() | st.booleans() | st.integers() | _plain_text,
        lambda children: st.lists(children, max_size=3) | st.dictionaries(_plain_text, children, max_size=3),
        max_leaves=12,
    ),
    max_size=5,
)


def _shuffled(value: Any, rng: random.Random) -> Any:
    """The same value with every dict's insertion order shuffled, recursively."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


@settings(deadline=None, max_examples=60)  # shared 2-core CI: keep it quick, no timing flakes
@given(json_objects, st.randoms(use_true_random=False))
def test_invariant_to_key_order_recursively(value: dict[str, Any], rng: random.Random) -> None:
    assert canonical_json(_shuffled(value, rng)) == canonical_json(value)
    assert args_digest(_shuffled(value, rng)) == args_digest(value)


@settings(deadline=None, max_examples=60)  # shared 2-core CI: keep it quick, no timing flakes
@given(
    json_objects,
    st.sampled_from([None, 0, 2, 4, "\t"]),
    st.sampled_from([(",", ":"), (", ", ": "), (" ,  ", " :\n ")]),
    st.booleans(),
)
def test_invariant_to_whitespace_indentation_and_escaping_of_the_json_text(
    value: dict[str, Any], indent: int | str | None, separators: tuple[str, str], ascii_escapes: bool
) -> None:
    text = json.dumps(value, indent=indent, separators=separators, ensure_ascii=ascii_escapes)
    assert canonical_json(json.loads(text)) == canonical_json(value)


@settings(deadline=None, max_examples=60)  # shared 2-core CI: keep it quick, no timing flakes
@given(yaml_objects, st.sampled_from(["'", '"', None]), st.booleans())
def test_invariant_to_yaml_quoting_and_flow_style(
    value: dict[str, Any], quote: str | None, flow: bool
) -> None:
    text = yaml.safe_dump(value, default_style=quote, default_flow_style=flow, allow_unicode=True)
    assert canonical_json(yaml.safe_load(text)) == canonical_json(value)


@settings(deadline=None, max_examples=60)  # shared 2-core CI: keep it quick, no timing flakes
@given(json_objects)
def test_canonical_json_round_trips(value: dict[str, Any]) -> None:
    encoded = canonical_json(value)
    assert canonical_json(json.loads(encoded)) == encoded
    assert b"\n" not in encoded.replace(b"\\n", b"")
