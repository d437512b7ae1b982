"""Which question a recorded gate decision answers (`executor.answers`, pure)."""

from __future__ import annotations

from core.engine.gates import answers
from core.store.records import Gate, GateStatus

APPROVED = Gate(run_id="r", node_id="review", prompt="Ship v1?", status=GateStatus.APPROVED, created_at=1.0)


def test_a_keyed_gate_answers_only_its_own_key() -> None:
    gate = APPROVED.evolve(cache_key="k1")
    assert answers(gate, "k1", "whatever the text")
    assert not answers(gate, "k2", "Ship v1?")


def test_a_gate_from_before_keys_answers_the_same_prompt_only() -> None:
    assert answers(APPROVED, "k1", "Ship v1?")
    assert not answers(APPROVED, "k1", "Ship v2?")
