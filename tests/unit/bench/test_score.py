"""Precision and recall of "skipped safely"."""

from __future__ import annotations

from bench.scorecard.score import Tally, tally, total


def test_tally_counts_each_node_once() -> None:
    nodes = ["a", "b", "c", "d"]
    t = tally(nodes, skipped=frozenset({"a", "b"}), must_rerun=frozenset({"b", "c"}))
    assert t == Tally(tp=1, fp=1, fn=1, tn=1)
    assert t.precision == 0.5
    assert t.recall == 0.5


def test_precision_and_recall_are_undefined_without_skips_or_safe_nodes() -> None:
    t = tally(["a"], skipped=frozenset(), must_rerun=frozenset({"a"}))
    assert t == Tally(tn=1)
    assert t.precision is None
    assert t.recall is None


def test_total_adds_tallies() -> None:
    assert total([Tally(1, 2, 3, 4), Tally(1, 0, 0, 1)]) == Tally(2, 2, 3, 5)
    assert total([]) == Tally()
