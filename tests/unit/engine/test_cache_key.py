"""Cache keys: what busts a key, what never does, and how a miss is explained."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.engine.cache_key import (
    DEFINITION_CHANGED,
    NO_EARLIER_RESULT,
    RUN_ID_DIFFERS,
    cache_key,
    components_of,
    definition_digest,
    encode_identity,
    explain,
    input_digests,
    key_from,
    key_prefix,
    legacy_match,
    same_except_upstream,
)
from core.store.records import KeyNotes, split_stored, stored
from core.workflows.loader import load_workflow_text

BASE = """
name: w
nodes:
  - id: collect
    bash: git log {{ inputs.version }}
    replay: pure
  - id: draft
    depends_on: [collect]
    description: the draft
    prompt: "notes for {{ inputs.version }}: {{ nodes.collect.output }}"
    output: {format: json, schema: {type: object}}
"""


def _digest(text: str, node: str) -> str:
    node_model = load_workflow_text(text).node(node)
    return definition_digest(node_model, script_source=None, files={})


def test_description_comments_order_and_formatting_change_no_definition() -> None:
    reformatted = """
# a comment
name: w
nodes:
  - id: draft
    description: something else entirely
    depends_on:
      - collect
    output:
      schema: {type: object}
      format: json
    prompt: "notes for {{ inputs.version }}: {{ nodes.collect.output }}"
  - replay: pure
    id: collect
    bash: git log {{ inputs.version }}
"""
    assert _digest(BASE, "draft") == _digest(reformatted, "draft")
    assert _digest(BASE, "collect") == _digest(reformatted, "collect")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("git log {{ inputs.version }}", "git log --oneline {{ inputs.version }}"),
        ("replay: pure", "replay: pure\n    artifacts: [dist/*]"),
    ],
)
def test_what_the_node_does_changes_its_definition(old: str, new: str) -> None:
    assert _digest(BASE, "collect") != _digest(BASE.replace(old, new), "collect")


def test_script_source_and_declared_files_are_part_of_the_definition() -> None:
    node = load_workflow_text("name: s\nnodes:\n  - id: p\n    script: print(1)\n").node("p")
    one = definition_digest(node, script_source="print(1)", files={})
    two = definition_digest(node, script_source="print(2)", files={})
    with_file = definition_digest(node, script_source="print(1)", files={"x.sh": "ab" * 32})
    assert len({one, two, with_file}) == 3


def test_only_referenced_inputs_enter_and_their_order_does_not_matter() -> None:
    args = {"version": "1.2", "unrelated": "x"}
    assert set(input_digests(args, ["version"])) == {"version"}
    reordered = {"unrelated": "y", "version": "1.2"}
    assert input_digests(args, ["version"]) == input_digests(reordered, ["version"])
    assert input_digests({"b": {"x": 1, "y": [1, 2]}}, None) == input_digests(
        {"b": {"y": [1, 2], "x": 1}}, None
    )


def _components(**over: object) -> dict[str, object]:
    base: dict[str, object] = {
        "node_id": "draft",
        "kind": "prompt",
        "definition": "d1",
        "inputs": {"version": "v1"},
        "upstream": {"collect": "o1"},
    }
    base.update(over)
    return components_of(**base)  # type: ignore[arg-type]


def test_explain_names_what_changed() -> None:
    old = _components()
    assert explain(None, old) == NO_EARLIER_RESULT
    assert explain(old, _components(definition="d2")) == DEFINITION_CHANGED
    assert explain(old, _components(inputs={"version": "v2"})) == "input `inputs.version` changed"
    assert explain(old, _components(upstream={"collect": "o2"})) == "upstream `collect` output changed"
    both = explain(old, _components(inputs={"version": "v2"}, upstream={"collect": "o2"}))
    assert both == "input `inputs.version` changed; upstream `collect` output changed"
    assert explain(old, dict(old, _reason="annotation")) == ""


def test_notes_are_stored_beside_the_key_components_and_never_change_the_key() -> None:
    plain = _components()
    notes = KeyNotes(reason="no earlier result", skipped="`a` was skipped", saved_tokens=9,
                     keyed_identity=True, child="r_child", items=3)  # fmt: skip
    as_stored = stored(plain, notes)
    assert {k: v for k, v in as_stored.items() if k not in plain} == {  # the names entries always had
        "_reason": "no earlier result", "_skipped": "`a` was skipped", "_tokens": 9, "_identity": 1,
        "_child": "r_child", "_of": 3,
    }  # fmt: skip
    assert split_stored(as_stored) == (plain, notes)
    assert split_stored(stored(plain, KeyNotes())) == (plain, KeyNotes())
    assert cache_key(split_stored(as_stored)[0]) == cache_key(plain)
    assert cache_key(plain) != cache_key(_components(upstream={"collect": "o2"}))


def test_same_except_upstream() -> None:
    assert same_except_upstream(_components(), _components(upstream={"collect": "other"}))
    assert not same_except_upstream(_components(), _components(definition="d2"))
    assert not same_except_upstream(None, _components())


names = st.text(min_size=1, max_size=8)
digests = st.dictionaries(names, st.text(max_size=12), max_size=4)


@given(
    node=names,
    kind=names,
    definition=st.text(max_size=20),
    inputs=digests,
    upstream=digests,
    run_id=st.none() | st.text(max_size=12),
)
def test_fast_key_equals_the_canonical_json_key(
    node: str,
    kind: str,
    definition: str,
    inputs: dict[str, str],
    upstream: dict[str, str],
    run_id: str | None,
) -> None:
    prefix = key_prefix(node_id=node, kind=kind, definition=definition, inputs=inputs, run_id=run_id)
    expected = cache_key(
        components_of(
            node_id=node, kind=kind, definition=definition, inputs=inputs, upstream=upstream, run_id=run_id
        )
    )
    assert key_from(prefix, upstream) == expected


def test_a_node_reading_run_id_is_keyed_per_run_and_says_so() -> None:
    mine, other = _components(run_id="aaaaaaaaaaaa"), _components(run_id="bbbbbbbbbbbb")
    assert cache_key(mine) != cache_key(other)
    assert cache_key(_components()) == cache_key(_components())  # nodes that do not read it: no run
    assert explain(mine, other) == RUN_ID_DIFFERS
    assert not same_except_upstream(mine, other)


# -- identity components (tool, provider, env, secrets) --------------------------------------

TOOL = {"tool": {"produce": "source:aaa"}}
OPENAI = {"name": "openai", "model": "gpt-4o-mini", "base_url": "https://api.openai.com/v1"}


def _with(**identity: object) -> dict[str, object]:
    return _components(identity=identity)


@pytest.mark.parametrize(
    ("was", "now", "reason"),
    [
        (TOOL, {"tool": {"produce": "source:bbb"}}, "tool `produce` changed"),
        (
            {"tool": {"produce": "version:1"}},
            {"tool": {"produce": "version:2"}},
            "tool `produce` changed: version 1 → 2",
        ),
        (TOOL, {"tool": {"produce": "unregistered"}}, "tool `produce` is not registered"),
        ({}, TOOL, "tool `produce` not recorded with the earlier result"),
        ({"provider": {"name": "fake"}}, {"provider": OPENAI}, "provider changed: fake → openai"),
        (
            {"provider": OPENAI},
            {"provider": {**OPENAI, "model": "gpt-4.1"}},
            "model changed: gpt-4o-mini → gpt-4.1",
        ),
        (
            {"provider": OPENAI},
            {"provider": {**OPENAI, "base_url": "http://127.0.0.1:8080/v1"}},
            "base URL changed: https://api.openai.com/v1 → http://127.0.0.1:8080/v1",
        ),
        (
            {"provider": {"name": "command", "program": "llm", "command": "c1"}},
            {"provider": {"name": "command", "program": "llm", "command": "c2"}},
            "command changed",
        ),
        (
            {"provider": {"name": "command", "program": "llm", "command": "c1"}},
            {"provider": {"name": "command", "program": "claude", "command": "c2"}},
            "command changed: llm → claude",
        ),
        (
            {"provider": OPENAI},
            {"provider": {"name": "openai", "configured": False}},
            "provider `openai` is not configured",
        ),
        ({}, {"provider": {"name": "fake"}}, "provider not recorded with the earlier result"),
        ({"env": {"A": "1", "B": "1"}}, {"env": {"A": "2", "B": "1"}}, "env `A` changed"),
        ({}, {"env": {"A": "1"}}, "env `A` changed"),
        ({"secrets": ["A"]}, {"secrets": ["A", "B"]}, "secret `B` declared"),
        ({"secrets": ["A", "B"]}, {"secrets": []}, "secret `A`, `B` no longer declared"),
    ],
)
def test_explain_names_the_identity_that_changed(
    was: dict[str, object], now: dict[str, object], reason: str
) -> None:
    assert explain(_with(**was), _with(**now)) == reason
    assert cache_key(_with(**was)) != cache_key(_with(**now))
    assert not same_except_upstream(_with(**was), _with(**now))


def test_identity_reasons_come_before_inputs_and_upstream() -> None:
    old = _components(identity={"tool": {"produce": "source:a"}})
    new = _components(identity={"tool": {"produce": "source:b"}}, upstream={"collect": "o2"})
    assert explain(old, new) == "tool `produce` changed; upstream `collect` output changed"


def test_a_provider_named_by_the_node_is_not_its_definition() -> None:
    """Who names the provider (the node or the defaults) is not identity; what answers is."""
    own = "name: w\nnodes:\n  - id: a\n    prompt: hi\n    provider: openai\n"
    inherited = "name: w\ndefaults: {provider: openai}\nnodes:\n  - id: a\n    prompt: hi\n"
    assert _digest(own, "a") == _digest(inherited, "a")


identities = st.fixed_dictionaries(
    {},
    optional={
        "tool": st.dictionaries(names, st.text(max_size=12), min_size=1, max_size=1),
        "provider": st.dictionaries(names, st.text(max_size=12) | st.booleans(), max_size=3),
        "env": digests,
        "secrets": st.lists(names, max_size=3),
    },
)


@given(inputs=digests, upstream=digests, identity=identities, run_id=st.none() | st.text(max_size=12))
def test_fast_key_with_identity_equals_the_canonical_json_key(
    inputs: dict[str, str], upstream: dict[str, str], identity: dict[str, object], run_id: str | None
) -> None:
    prefix = key_prefix(
        node_id="n",
        kind="tool",
        definition="d",
        inputs=inputs,
        run_id=run_id,
        identity_json=encode_identity(identity),
    )
    expected = cache_key(
        components_of(
            node_id="n",
            kind="tool",
            definition="d",
            inputs=inputs,
            upstream=upstream,
            run_id=run_id,
            identity=identity,
        )
    )
    assert key_from(prefix, upstream) == expected


def test_a_provider_that_sees_the_environment_instead_of_one_that_does_not_is_one_reason() -> None:
    fake = _with(provider={"name": "fake"})
    command = _with(provider={"name": "command", "program": "llm", "command": "c"}, env={"A": "1"})
    assert explain(fake, command) == "provider changed: fake → command"
    assert explain(_with(), _with(env={"A": "1"})) == "env `A` changed"  # env added to a workflow


def test_an_entry_recorded_before_identity_matches_its_own_step_but_for_identity() -> None:
    before = _components()  # as an engine without identity components recorded it: no mark
    now = _with(tool={"produce": "source:a"}, env={"A": "1"})
    assert legacy_match(before, now, False)
    assert not legacy_match(before, {**now, "upstream": {"collect": "o2"}}, False)  # anything else differs
    assert not legacy_match(before, {**now, "definition": "d2"}, False)
    assert not legacy_match(before, now, True)  # recorded since (its notes say so): identity counts
    assert not legacy_match(None, now, False)
