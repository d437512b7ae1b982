"""Delivery latency against the platform fakes: from the engine's event saying a run came to
rest (the state change) to the platform call that shows it (the completion message).

`Rested` subscribes to the real engine; the fakes stamp each call they receive with
`time.monotonic()`, so both ends are read on the same clock."""

from __future__ import annotations

import statistics
import time

from core.engine.engine import Engine
from core.engine.events import EngineEvent, EventKind


class Rested:
    """run id -> when the engine said it came to rest (monotonic)."""

    def __init__(self, engine: Engine) -> None:
        self.at: dict[str, float] = {}
        self.unsubscribe = engine.subscribe(self._on)

    async def _on(self, event: EngineEvent) -> None:
        if event.kind is EventKind.RUN_FINISHED:
            self.at.setdefault(event.run_id, time.monotonic())


def percentiles(samples: list[float]) -> tuple[float, float]:
    """(p50, p99) of `samples` in milliseconds."""
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1e3, p99 * 1e3
