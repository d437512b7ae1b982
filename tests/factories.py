"""Test factories over the store port: single writes the production code only makes inside a
unit of work (`store.transaction()`), for tests that need one on its own."""

from __future__ import annotations

from typing import Any

from core.store.port import NewRun, Store
from core.store.records import Gate, Run


def create_run(store: Store, **fields: Any) -> Run:
    """A run as `tx.create_run(**fields)` writes it, in a unit of its own."""
    with store.transaction() as tx:
        run = tx.create_run(NewRun(**fields))
    return run


def decide_gate(
    store: Store, run_id: str, node_id: str, *, approved: bool, by: str, comment: str | None = None
) -> Gate:
    """`tx.decide_gate` in a unit of its own: the decided gate (or its CAS error)."""
    with store.transaction() as tx:
        decided = tx.decide_gate(run_id, node_id, approved=approved, by=by, comment=comment)
    return decided.value


def invalidate(store: Store, run_id: str, node_ids: list[str], *, actor: str) -> int:
    """`tx.invalidate` in a unit of its own: how many entries it marked."""
    with store.transaction() as tx:
        marked = tx.invalidate(run_id, node_ids, actor=actor)
    return marked.value
