"""Scoring a keying on the corpus: precision and recall of "skipped safely".

Per node of a scenario, a keying either re-uses the earlier result (skips) or re-runs it.
A skip is *safe* when the node is not in the scenario's `must_rerun`:
    true positive   skipped, safe          false positive  skipped, must re-run (a stale result served)
    false negative  re-ran, could skip     true negative   re-ran, had to
Precision = TP / (TP + FP): of the results re-used, how many were right to re-use.
Recall    = TP / (TP + FN): of the results that could be re-used, how many were.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Tally:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    def __add__(self, other: Tally) -> Tally:
        return Tally(self.tp + other.tp, self.fp + other.fp, self.fn + other.fn, self.tn + other.tn)

    @property
    def precision(self) -> float | None:
        skipped = self.tp + self.fp
        return self.tp / skipped if skipped else None

    @property
    def recall(self) -> float | None:
        could = self.tp + self.fn
        return self.tp / could if could else None


def tally(nodes: Iterable[str], skipped: frozenset[str], must_rerun: frozenset[str]) -> Tally:
    tp = fp = fn = tn = 0
    for node in nodes:
        safe = node not in must_rerun
        if node in skipped:
            tp, fp = (tp + 1, fp) if safe else (tp, fp + 1)
        else:
            fn, tn = (fn + 1, tn) if safe else (fn, tn + 1)
    return Tally(tp, fp, fn, tn)


def total(tallies: Iterable[Tally]) -> Tally:
    result = Tally()
    for t in tallies:
        result = result + t
    return result
