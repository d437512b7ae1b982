"""Housekeeping: the tables that only grow are pruned, once at start and then periodically.

- `processed_events` (chat event dedupe): ids older than `BATON_EVENT_RETENTION_HOURS`
  (24 h) go. Platforms stop redelivering after minutes (Slack retries for about 5) and a
  claim left unfinished is re-claimable after 60 s, so a day is far past both.
- `platform_state` (adapters' values, `Handler.remember`): values not written for
  `BATON_STATE_RETENTION_DAYS` (30 d) go. They are the location of each run's progress
  message (a run that comes back after that gets a new progress message instead of an edit
  of the old one). Long button commands live in the blob store, which is not pruned.

- `outbox` (state-carrying replies): rows delivered more than `BATON_OUTBOX_RETENTION_DAYS`
  (7 d) ago go; a row not delivered yet is never dropped.

- runs (`bot/retention.py`), when `BATON_RUN_RETENTION_DAYS` is set: finished, unpinned runs
  last changed longer ago go with their journal, gates, votes, deadlines and outbox rows, in
  batches of `BATON_PRUNE_BATCH` runs (at most `PRUNE_BATCHES_PER_PASS` batches a pass, so a
  first pass over years of history spreads over passes); then the blobs only they referenced,
  and audit rows older than `BATON_AUDIT_RETENTION_DAYS`.

A pass is three DELETEs (and the prune's batches), each one short statement; several replicas
may run them at the same time (a row deleted by a peer is simply not counted). Counts are
logged at INFO. Passes run in a worker thread, the first one as soon as the engine has
started: a bot whose tables grew for months neither waits for its first pass nor stalls its
event loop during one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from bot.periodic import Periodic
from bot.retention import Pruner
from core.config import Settings
from core.store.port import Deliveries, Events, PlatformState, Retention

log = logging.getLogger("baton.housekeeping")

HOUR = 3600.0
DAY = 24 * HOUR
#: batches of runs one housekeeping pass prunes at most (the rest waits for the next pass)
PRUNE_BATCHES_PER_PASS = 50


@dataclass(frozen=True, slots=True)
class Swept:
    """What one pass deleted."""

    events: int
    state: int
    outbox: int = 0
    runs: int = 0  # runs pruned (retention)


class SweptStore(Protocol):
    """The store roles a housekeeping pass forgets old rows of (event ids, values, replies)."""

    @property
    def events(self) -> Events: ...
    @property
    def state(self) -> PlatformState: ...
    @property
    def outbox(self) -> Deliveries: ...


class KeptStore(SweptStore, Protocol):
    """…and the one its pruner deletes old runs with."""

    @property
    def retention(self) -> Retention: ...


class Housekeeping:
    """Started and stopped with the engine (`Baton.running`)."""

    def __init__(
        self,
        store: SweptStore,
        *,
        every: float,
        event_retention: float,
        state_retention: float,
        outbox_retention: float = 7 * DAY,
        pruner: Pruner | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.every = every  # seconds between passes
        self.event_retention = event_retention  # seconds
        self.state_retention = state_retention  # seconds
        self.outbox_retention = outbox_retention  # seconds
        self.pruner = pruner  # old runs and audit rows, when retention is set
        self._clock = clock
        self._periodic = Periodic("baton-housekeeping", self._pass, pause=lambda: self.every,
                                  action="housekeeping")
        self.passes = 0  # passes completed by this process

    @classmethod
    def from_settings(cls, store: KeptStore, settings: Settings) -> Housekeeping:
        return cls(
            store,
            every=settings.housekeeping_minutes * 60,
            event_retention=settings.event_retention_hours * HOUR,
            state_retention=settings.state_retention_days * DAY,
            outbox_retention=settings.outbox_retention_days * DAY,
            pruner=pruner_from_settings(store.retention, settings),
        )

    def sweep(self) -> Swept:
        """One pass: forget event ids, adapters' values and delivered replies past their retention."""
        now = self._clock()
        swept = Swept(
            events=self.store.events.forget_events(now - self.event_retention),
            state=self.store.state.forget_state(now - self.state_retention),
            outbox=self.store.outbox.forget_deliveries(now - self.outbox_retention),
            runs=self._prune(),
        )
        self.passes += 1
        log.info(
            "housekeeping: %d event ids, %d platform values and %d delivered replies forgotten",
            swept.events,
            swept.state,
            swept.outbox,
            extra={"action": "housekeeping", "events": swept.events, "state": swept.state,
                   "outbox": swept.outbox},
        )
        return swept

    def _prune(self) -> int:
        if self.pruner is None or not self.pruner.enabled:
            return 0
        return self.pruner.prune(max_batches=PRUNE_BATCHES_PER_PASS).counts.runs

    async def start(self) -> None:
        """A pass at once (a process that was down for a while catches up), then one every
        `every` seconds until `stop`; all in the background."""
        await self._periodic.start()

    async def stop(self) -> None:
        """Stop after the pass in progress, if any."""
        await self._periodic.stop()

    async def wait_for_passes(self, count: int, timeout: float) -> None:
        """Until this process has completed `count` passes; TimeoutError at the deadline."""
        await self._periodic.wait_until(lambda: self.passes >= count, timeout)

    async def _pass(self) -> None:
        await asyncio.to_thread(self._sweep_logged)

    def _sweep_logged(self) -> None:
        try:
            self.sweep()
        except Exception:  # the database blinked: the next pass catches up
            log.exception("housekeeping failed", extra={"action": "housekeeping"})


def pruner_from_settings(retention: Retention, settings: Settings) -> Pruner | None:
    """The pruner the settings ask for; None when both run and audit retention are off."""
    runs, audit = settings.run_retention_days, settings.audit_retention_days
    if runs is None and audit is None:
        return None
    return Pruner(
        retention,
        run_retention=None if runs is None else runs * DAY,
        audit_retention=None if audit is None else audit * DAY,
        data_dir=settings.data_dir,
        batch=settings.prune_batch,
    )
