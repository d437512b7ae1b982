"""What the engine tells the world: progress events, plans and run summaries.

Adapters never see the engine directly: the conversation layer subscribes to these
events and turns them into `Reply` objects (a progress message edited in place).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from core.store.records import RunStatus
from core.store.unit_of_work import UnitOfWork

_log = logging.getLogger("baton.engine")
ENGINE_ACTOR = "baton"  # who the audit trail names for the engine's own decisions


class NodeState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    CACHED = "cached"
    DONE = "done"
    FAILED = "failed"
    WAITING = "waiting"  # an approval gate waits
    ATTENTION = "needs_attention"  # unsafe step may have half-happened
    SKIPPED = "skipped"  # not reached (run failed/cancelled before it), or its `when:` was false
    REJECTED = "rejected"  # an approval gate someone rejected


class EventKind(StrEnum):
    RUN_STARTED = "run_started"
    #: the run waits in its concurrency key's queue (detail: key); RUN_STARTED follows when admitted
    RUN_QUEUED = "run_queued"
    NODE_QUEUED = "node_queued"
    NODE_STARTED = "node_started"
    NODE_CACHED = "node_cached"
    NODE_COMPLETED = "node_completed"
    NODE_FAILED = "node_failed"
    NODE_WAITING = "node_waiting"
    NODE_ATTENTION = "node_attention"
    NODE_SKIPPED = "node_skipped"  # `when:` is false (or a dependency was skipped); detail: reason
    #: detail: approved (bool), by (user id), how (approve | reject | abandon | cancel)
    GATE_DECIDED = "gate_decided"
    #: the run came to rest: completed/failed/paused/needs_attention/cancelled (detail `keyed`: it
    #: has a concurrency key, so the unit that rested it may have admitted a queued run)
    RUN_FINISHED = "run_finished"


@dataclass(frozen=True, slots=True)
class EngineEvent:
    kind: EventKind
    run_id: str
    node_id: str | None = None
    run_status: str | None = None  # RunStatus value, on RUN_FINISHED (and whenever known)
    detail: dict[str, Any] = field(default_factory=dict)  # e.g. reason, error tail, tokens, seconds


Subscriber = Callable[[EngineEvent], Awaitable[None]]


def tell_rest(tx: UnitOfWork, run_id: str, status: RunStatus, *, reason: str | None,
              node: str | None = None, noticed: bool = False) -> None:
    """The run came to rest at `status`: its reply (the final progress edit and the final
    message) goes in the outbox in the same unit of work as the change, so it exists exactly
    when the change does and is delivered also after a crash (`core/delivery/outbox.py`).
    The engine calls it through `Notifier.rest` (`core/engine/notify.py`), which writes the
    event's notices in the same unit (`noticed`: they were)."""
    payload: dict[str, object] = {"status": RunStatus(status).value, "reason": reason, "node": node}
    if noticed:
        payload["noticed"] = True
    tx.enqueue_delivery(run_id, EventKind.RUN_FINISHED.value, payload)


@dataclass(frozen=True, slots=True)
class NodePlan:
    node_id: str
    kind: str
    action: str  # "cached" | "runs" | "waits" | "done" (already completed in this run)
    reason: str  # in words: "definition changed", "input `inputs.version` changed", ...
    cache_key: str | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    run_id: str
    workflow: str
    nodes: tuple[NodePlan, ...]


@dataclass(frozen=True, slots=True)
class NodeSummary:
    node_id: str
    kind: str
    state: NodeState
    seconds: float = 0.0
    tokens: int = 0
    tokens_saved: int = 0  # tokens a cache hit did not spend
    reason: str = ""  # why it ran / why cached
    error: str = ""  # tail of stderr / contract message
    mapped: str = ""  # a `map:` node: how far its items are ("37/50 · 2 failed · 4 running")
    child: str = ""  # a `workflow:` step: the id of its (latest) child run


@dataclass(frozen=True, slots=True)
class RunSummary:
    """The node table of one run, as the progress message and final reply show it."""

    run_id: str
    workflow: str
    status: str
    nodes: tuple[NodeSummary, ...]
    seconds: float = 0.0
    tokens: int = 0
    tokens_saved: int = 0
    output: str | None = None  # the final node's output (text), if any
    failed_node: str | None = None
    reason: str | None = None


class EventBus:
    """The engine's subscribers. A subscriber that raises is logged and never stops a run.

    `emit` runs inside the step that caused the event, for every event: subscribers must
    only take note and leave any real work to a task of their own (see `core.commands.progress`).
    """

    def __init__(self) -> None:
        self._subscribers: tuple[Subscriber, ...] = ()  # replaced, never mutated: emit needs no copy

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        self._subscribers = (*self._subscribers, fn)

        def unsubscribe() -> None:
            if fn in self._subscribers:
                at = self._subscribers.index(fn)
                self._subscribers = self._subscribers[:at] + self._subscribers[at + 1 :]

        return unsubscribe

    def __bool__(self) -> bool:
        return bool(self._subscribers)

    async def emit(self, event: EngineEvent) -> None:
        for fn in self._subscribers:
            try:
                await fn(event)
            except Exception:
                _log.exception(
                    "subscriber failed",
                    extra={"action": "engine_event", "run_id": event.run_id, "node_id": event.node_id},
                )
