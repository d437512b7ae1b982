"""What the chat shows of concurrency queues (DESIGN.md, "Concurrency and the queue"): why a
queued run waits and behind whom, and `queue [workflow|key]`'s listing. Data for the
templates (`queue.j2`, the `queue_line` macro), read from `Store.key_runs`.

    waiting(store, run, now)      {key, position, queued, limit, waited, ahead: {id, status,
                                  node, for, requester}} of a queued run, else None
    listing(store, runs, now)     one group per key: its active runs, then its queue in order
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from core.store.port import Gates, Views
from core.store.records import Run, RunStatus


class QueueStore(Protocol):
    """The store roles a queue's facts are read from."""

    @property
    def gates(self) -> Gates: ...
    @property
    def views(self) -> Views: ...


def holder(store: QueueStore, run: Run, now: float) -> dict[str, Any]:
    """An active run as a queue shows it: where it stands and for how long."""
    gate = store.gates.waiting_gate(run.id) if run.status is RunStatus.PAUSED else None
    return {"id": run.id, "workflow": run.workflow, "status": run.status.value, "requester": run.requester,
            "node": gate.node_id if gate is not None else None,
            "for": max(0.0, now - run.updated_at)}  # fmt: skip


def waiting(store: QueueStore, run: Run, now: float) -> dict[str, Any] | None:
    """Why `run` waits (None: it is not queued)."""
    if run.status is not RunStatus.QUEUED or run.concurrency is None:
        return None
    runs = store.views.key_runs(key=run.concurrency.key)
    queued = [r.id for r in runs if r.status is RunStatus.QUEUED]
    active = [r for r in runs if r.holds_slot]
    position = queued.index(run.id) + 1 if run.id in queued else len(queued) + 1
    return {
        "key": run.concurrency.key, "position": position, "queued": len(queued),
        "limit": run.concurrency.limit, "active": len(active),
        "waited": max(0.0, now - (run.queued_at or run.created_at)),
        "ahead": holder(store, active[0], now) if active else None,
    }  # fmt: skip


def listing(store: QueueStore, runs: Sequence[Run], now: float) -> list[dict[str, Any]]:
    """`runs` (as `key_runs` orders them) grouped by key: active runs, then the queue."""
    groups: dict[str, dict[str, Any]] = {}
    for run in runs:
        if run.concurrency is None:
            continue
        group = groups.setdefault(run.concurrency.key, {
            "key": run.concurrency.key, "limit": run.concurrency.limit, "active": [], "queued": []})
        if run.status is RunStatus.QUEUED:
            group["queued"].append({
                "position": len(group["queued"]) + 1, "id": run.id, "workflow": run.workflow,
                "requester": run.requester, "waited": max(0.0, now - (run.queued_at or run.created_at)),
            })  # fmt: skip
        elif run.holds_slot:
            group["active"].append(holder(store, run, now))
    return [g for g in groups.values() if g["active"] or g["queued"]]
