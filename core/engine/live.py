"""Live runs: one watcher per watched run, fanning its changes out to every listener (a run's
page today; anything that follows a run live next).

The store is the source of truth (a run may move on another replica): a watcher asks
`Store.run_pulse` every `poll` seconds, one small query however many listeners there are, and
reads the run's node states again only when the pulse changed. Engine events of runs that
move in this process wake their watcher at once (`poke`), so a local change reaches the
listeners without waiting for the next poll; reads stay at most one per `min_gap` seconds.

A listener's stream (`updates`) first gets the current state, then every change; `None` now
and then (a heartbeat) so that a closed connection is noticed.

    hub = LiveHub(pulse=store.views.run_pulse, read=partial(snapshot, store, engine, redactor), poll=1.0)
    async for state in hub.updates(run_id): ...    # `changes(state, sent, rev)`: what is new

A state (`snapshot`) is plain data, redacted: the run's status, a revision that moves with
any change (a gate's vote too), node counts by state and, per node, its state, seconds,
cache verdict and reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from core.engine.events import NodeState
from core.engine.inspection import NodeDetail, RunDetail
from core.errors import RunNotFound
from core.redaction import Redactor
from core.store.port import Runs, Views
from core.store.records import Run

log = logging.getLogger("baton.web")  # the run pages' log, where these lines always were

Snapshot = dict[str, Any]  # {"rev": [...], "nodes": {id: [state, seconds, verdict, reason]}, ...}
Pulse = Callable[[str], "tuple[object, ...] | None"]
Read = Callable[[str], "Snapshot | None"]


class Inspects(Protocol):
    """What a snapshot reads of the engine (`Engine.inspect`)."""

    def inspect(self, run: Run, *, plan: bool = ...) -> RunDetail: ...


@dataclass
class _Watcher:
    run_id: str
    listeners: int = 0
    version: int = 0
    snapshot: Snapshot | None = None
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class LiveHub:
    def __init__(self, *, pulse: Pulse, read: Read, poll: float, min_gap: float = 0.05,
                 heartbeat: float = 15.0) -> None:
        self._pulse = pulse
        self._read = read
        self.poll = poll
        self.min_gap = min_gap
        self.heartbeat = heartbeat
        self._watchers: dict[str, _Watcher] = {}
        self.closed = asyncio.Event()

    @property
    def watching(self) -> int:
        """Runs with at least one open page (one watcher each)."""
        return len(self._watchers)

    def poke(self, run_id: str) -> None:
        """Something happened to `run_id` in this process: look now."""
        watcher = self._watchers.get(run_id)
        if watcher is not None:
            watcher.wake.set()

    async def close(self) -> None:
        """End every stream (the server is stopping)."""
        self.closed.set()
        for watcher in list(self._watchers.values()):
            async with watcher.changed:
                watcher.changed.notify_all()
            if watcher.task is not None:
                watcher.task.cancel()

    async def updates(self, run_id: str) -> AsyncIterator[Snapshot | None]:
        """The run's state now, then after every change; None as a heartbeat."""
        watcher = self._watchers.get(run_id)
        if watcher is None:
            watcher = self._watchers[run_id] = _Watcher(run_id)
            watcher.task = asyncio.create_task(self._watch(watcher), name=f"web-watch-{run_id}")
        watcher.listeners += 1
        seen = 0
        try:
            while not self.closed.is_set():
                moved = functools.partial(self._moved, watcher, seen)
                async with watcher.changed:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(watcher.changed.wait_for(moved), self.heartbeat)
                if self.closed.is_set():
                    return
                if watcher.version == seen:
                    yield None
                    continue
                seen = watcher.version
                yield watcher.snapshot
        finally:
            watcher.listeners -= 1
            if watcher.listeners <= 0 and self._watchers.get(run_id) is watcher:
                del self._watchers[run_id]
                if watcher.task is not None:
                    watcher.task.cancel()

    def _moved(self, watcher: _Watcher, seen: int) -> bool:
        return watcher.version != seen or self.closed.is_set()

    async def _watch(self, watcher: _Watcher) -> None:
        last: tuple[object, ...] | None = None
        while not self.closed.is_set():
            began = time.monotonic()
            watcher.wake.clear()  # before reading: a poke during the read means "look again"
            try:
                pulse = await asyncio.to_thread(self._pulse, watcher.run_id)
                if pulse != last:
                    snapshot = await asyncio.to_thread(self._read, watcher.run_id)
                    last = pulse
                    if snapshot is not None:
                        async with watcher.changed:
                            watcher.snapshot = snapshot
                            watcher.version += 1
                            watcher.changed.notify_all()
            except asyncio.CancelledError:
                raise
            except Exception:  # a database hiccup: the page keeps its state, the next poll retries
                log.warning("live page update failed", exc_info=True,
                            extra={"action": "web_live", "run_id": watcher.run_id})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(watcher.wake.wait(), self.poll)
            pause = self.min_gap - (time.monotonic() - began)
            if pause > 0:
                await asyncio.sleep(pause)


def verdict(node: NodeDetail) -> str:
    """The cache verdict in a few words."""
    if node.state is NodeState.CACHED:
        return "cached"
    if node.state in (NodeState.DONE, NodeState.FAILED, NodeState.RUNNING):
        return "ran" if node.state is not NodeState.RUNNING else "running"
    return ""


def live_nodes(detail: RunDetail, hide: Redactor) -> dict[str, list[Any]]:
    """Per node what a live update carries: state, seconds, verdict and reason."""
    return {
        n.node_id: [str(n.state), n.seconds, verdict(n), hide.redact(n.reason)] for n in detail.nodes
    }


class LiveStore(Protocol):
    """The roles a live snapshot reads: the run and its pulse."""

    @property
    def runs(self) -> Runs: ...
    @property
    def views(self) -> Views: ...


def snapshot(store: LiveStore, engine: Inspects, hide: Redactor, run_id: str) -> Snapshot | None:
    """A run's live state, for `LiveHub` (read in a worker thread); None: no such run."""
    try:
        run = store.runs.get_run(run_id)
    except RunNotFound:
        return None
    detail = engine.inspect(run, plan=False)
    nodes = live_nodes(detail, hide)
    counts: dict[str, int] = {}
    for state, *_ in nodes.values():
        counts[state] = counts.get(state, 0) + 1
    pulse = store.views.run_pulse(run_id)
    return {"rev": [str(run.status), run.version, str(pulse[-1]) if pulse else ""],
            "status": str(run.status), "counts": counts, "nodes": nodes}


def changes(state: Snapshot, sent: dict[str, list[Any]], rev: Any) -> dict[str, Any] | None:
    """What changed since the last update a listener got (everything, the first time); None:
    nothing. `reload`: something beyond the nodes moved (a gate, the run's status)."""
    nodes = {k: v for k, v in state["nodes"].items() if sent.get(k) != v}
    if not nodes and state["rev"] == rev:
        return None
    return {"rev": state["rev"], "status": state["status"], "counts": state["counts"],
            "nodes": nodes, "reload": rev is not None and state["rev"] != rev}
