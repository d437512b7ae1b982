"""The two baseline keyings of the scorecard behave as documented."""

from __future__ import annotations

import yaml

from bench.scorecard.baselines import (
    instruction_of,
    node_id_skips,
    prefix_keys,
    prefix_skips,
    steps_of,
)

WORKFLOW = yaml.safe_load(
    """
name: w
nodes:
  - id: c
    depends_on: [a]
    bash: echo c
  - id: a
    bash: echo a
  - id: b
    tool: t
    with: {z: 1, a: 2}
    files: [x.txt]
    memoize: false
"""
)
ARGS = '{"x": 1, "y": 2}'
OUT = {"a": "A", "b": "B", "c": "C"}


def test_steps_run_dependencies_first_then_file_order() -> None:
    assert [s.id for s in steps_of(WORKFLOW)] == ["a", "c", "b"]


def test_instruction_keeps_with_as_written_and_only_file_names() -> None:
    node = WORKFLOW["nodes"][2]
    assert instruction_of(node) == 'tool: t with {"z": 1, "a": 2} files ["x.txt"]'


def test_node_id_reuses_whatever_completed_except_dropped_and_unmemoized() -> None:
    steps = steps_of(WORKFLOW)
    assert node_id_skips(steps, {"a", "b", "c"}, dropped=set()) == {"a", "c"}
    assert node_id_skips(steps, {"a", "b", "c"}, dropped={"a"}) == {"c"}
    assert node_id_skips(steps, {"c"}, dropped=set()) == {"c"}


def _earlier() -> dict[str, str]:
    keys = prefix_keys(ARGS, steps_of(WORKFLOW), OUT)
    return {key: OUT[node] for node, key in keys.items()}


def test_prefix_reuses_a_byte_identical_transcript() -> None:
    assert prefix_skips(ARGS, steps_of(WORKFLOW), _earlier(), OUT, dropped=set()) == {"a", "c"}


def test_prefix_misses_everything_when_the_arguments_are_retyped() -> None:
    retyped = '{"y": 2, "x": 1}'
    assert prefix_skips(retyped, steps_of(WORKFLOW), _earlier(), OUT, dropped=set()) == frozenset()


def test_prefix_keeps_later_steps_when_a_rerun_prints_the_same() -> None:
    assert prefix_skips(ARGS, steps_of(WORKFLOW), _earlier(), OUT, dropped={"a"}) == {"c"}


def test_prefix_misses_later_steps_when_an_earlier_output_changed() -> None:
    fresh = {**OUT, "a": "A2"}
    assert prefix_skips(ARGS, steps_of(WORKFLOW), _earlier(), fresh, dropped={"a"}) == frozenset()


def test_prefix_feeds_a_stale_output_forward_when_it_reuses_it() -> None:
    # `a` changed in reality, but its instruction did not: the cache serves the old "A",
    # so the transcript matches and `c` is re-used too (the trap the scorecard counts)
    fresh = {**OUT, "a": "A2", "c": "C2"}
    assert prefix_skips(ARGS, steps_of(WORKFLOW), _earlier(), fresh, dropped=set()) == {"a", "c"}
