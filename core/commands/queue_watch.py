"""`queued_long`: a run that has waited in its concurrency queue longer than
`BATON_QUEUED_LONG_AFTER` seconds is told to the places that asked (DESIGN.md,
"Notifications"), once per run per queue episode.

`QueueWatch.tick(now)` is called by the bot's periodic deadline loop (`bot/deadline_loop.py`)
and reads the runs still `queued` that joined their queue at most `after` seconds before
`now` (`Store.queued_runs`, in (`queued_at`, id) order). For each, one unit of work writes
its notices (`Notifier.write`, event `queued_long`, the episode being the time it joined the
queue): the outbox's unique key makes that once per (run, episode, place) however many
replicas tick or however often a tick is repeated after a crash.

The watch's place in that order (the last run it told) is kept in the store
(`platform_state`, written after the run's notices), so a restart neither tells a run twice
nor forgets one that crossed the threshold while Baton was down; a run queued again later
joins the queue at a later time, so it is read again (a new episode).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Protocol

from core.engine.engine import Engine
from core.store.port import PlatformState, Transactions, Views
from core.store.records import Run

log = logging.getLogger("baton.notices")

EVENT = "queued_long"
STATE = ("baton", "queued_long")  # platform_state (platform, key) of the watch's place
BATCH = 200  # runs read at a time; a tick reads again while batches come back full


def episode_of(run: Run) -> str:
    """A run's queue episode: the time it joined its queue, as the notice's key spells it."""
    return f"{run.queued_at or run.created_at:.6f}"


class WatchStore(Transactions, Protocol):
    """The store roles the watch uses: the queued runs, its place, the notices' units."""

    @property
    def views(self) -> Views: ...
    @property
    def state(self) -> PlatformState: ...


class QueueWatch:
    def __init__(self, *, store: WatchStore, engine: Engine, after: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.engine = engine
        self.after = after  # seconds a run may wait queued before `queued_long` is told
        self.clock = clock

    def _place(self) -> tuple[float, str] | None:
        raw = self.store.state.get_state(*STATE)
        if not raw:
            return None
        at, run_id = json.loads(raw)
        return float(at), str(run_id)

    def tick(self, now: float | None = None) -> list[str]:
        """Tell every run queued longer than `after` at `now` not told yet; their ids."""
        now = self.clock() if now is None else now
        told: list[str] = []
        place = self._place()
        while True:
            batch = self.store.views.queued_runs(after=place, up_to=now - self.after, limit=BATCH)
            for run in batch:
                with self.store.transaction() as tx:
                    self.engine.notifier.write(tx, run, EVENT, episode=episode_of(run),
                                               reason=f"queued for {now - (run.queued_at or now):.0f} s")
                told.append(run.id)
            if batch:
                last = batch[-1]
                place = (float(last.queued_at or last.created_at), last.id)
                self.store.state.put_state(*STATE, json.dumps(list(place)))  # after its notices: none lost
            if len(batch) < BATCH:
                break
        if told:
            log.info("%d runs queued longer than %.0f s told", len(told), self.after,
                     extra={"action": "queued_long", "runs": len(told)})
        return told
