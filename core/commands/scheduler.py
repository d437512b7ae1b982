"""Schedules firing: `Scheduler.tick(now)` evaluates every schedule (DESIGN.md "Automation").

    for each schedule not paused:
        due = its rule's due times in (evaluated_until, now]          (`schedule_rules.py`)
        the newest is on time (due at most `ON_TIME` ago): it fires; the older ones were
        missed (nothing ticked: the bot was down), and `catchup` says what they get:
            latest  one run, for the newest of them within `catchup_window` (when the newest
                    due time is not on time itself); the others are recorded missed
            none    none; each is recorded missed
            all     a run each, within the window; the others are recorded missed
        evaluated_until moves to the newest due time

    a fire:  its principal may no longer run the workflow -> the schedule is paused with a
             notice to its place and its owner, the fire recorded `refused`; never run
             overlap `skip` and a run of it still active   -> recorded `skipped`
             `cancel_running`  -> its active runs are cancelled, then the run starts
             `queue`           -> the run goes through the concurrency queue of key
                                  `schedule:<id>` (limit 1): queued behind the active
                                  one, started when it rests; the fire records what it
                                  was buffered behind (`detail.behind`)
             `allow`           -> the run starts
             the run starts through the engine, like a `run` command, as the schedule's
             principal, reporting where the schedule says in a thread of its own that the
             announcement (`schedule_fired`) opens

A fire is keyed (schedule, due time) in the store (`UnitOfWork.record_fire`), written in the
unit of work that creates its run: two replicas, a restart or a repeated tick start one run.
`tick` is all there is: the bot calls it on its own loop (`bot/schedule_loop.py`); with
workers, a Procrastinate periodic task may call it too.
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

from core.commands import authz, schedule_replies
from core.commands.messages import Reply
from core.commands.progress import ProgressReporter
from core.config import Access
from core.engine.engine import Created, Engine, RunStart, Starting
from core.errors import (
    BatonError,
    FireAlreadyRecorded,
    FireBusy,
    ScheduleChanged,
    ScheduleNotFound,
    StoreError,
)
from core.store.port import Events, Schedules
from core.store.records import Concurrency, Fire, FireOutcome, OnLimit, Run, Schedule
from core.store.unit_of_work import UnitOfWork
from core.workflows.catalog import Catalog
from core.workflows.schedule_rules import Rule
from core.workflows.schedule_spec import ScheduleSpec

log = logging.getLogger("baton.schedules")

#: a due time found at most this many seconds late is on time; an older one was missed
ON_TIME = 60.0
#: who writes what a schedule does by itself (the audit's actor of an authorization pause)
SCHEDULER = "baton:scheduler"
#: where a YAML schedule without `post_to` reports: the console (no platform is on)
DEFAULT_PLACE = ("console", "console")


@dataclass(frozen=True, slots=True)
class Fired:
    """What this replica did with one due time (a fire another replica wrote is not here)."""

    schedule_id: str
    due_at: float
    outcome: FireOutcome
    run_id: str | None = None


def rule_of(schedule: Schedule) -> Rule:
    return Rule(
        cron=schedule.cron, every=schedule.every, timezone=schedule.timezone, anchor=schedule.created_at
    )


def next_due_of(s: Schedule) -> float:
    """The schedule's first due time after the point it was evaluated to (cached: the same
    until the rule or that point changes, so a loop over many schedules costs little)."""
    return _first_after(rule_of(s), s.evaluated_until)


@lru_cache(maxsize=65536)
def _first_after(rule: Rule, after: float) -> float:
    found = rule.next_fires(after, 1)
    return found[0] if found else math.inf


def plan(
    dues: Sequence[float], now: float, catchup: str, window: float, on_time: float = ON_TIME
) -> list[tuple[float, bool]]:
    """Each due time (oldest first) and whether it starts a run (else it is missed). Pure."""
    if not dues:
        return []
    newest = dues[-1]
    current = now - newest <= on_time
    within = [d for d in dues if now - d <= window]
    if catchup == "all":
        starts = set(within) | ({newest} if current else set())
    elif catchup == "latest":
        starts = {newest} if current else ({within[-1]} if within else set())
    else:  # none
        starts = {newest} if current else set()
    return [(d, d in starts) for d in dues]


def from_spec(workflow: str, spec: ScheduleSpec, now: float) -> Schedule:
    """A workflow's YAML schedule as the store keeps it (id `<workflow>.<id>`)."""
    sid = f"{workflow}.{spec.id}"
    platform, _, conversation = (spec.post_to or ":".join(DEFAULT_PLACE)).partition(":")
    return Schedule(
        id=sid,
        workflow=workflow,
        source="yaml",
        cron=spec.cron,
        every=spec.seconds,
        timezone=spec.timezone,
        args=dict(spec.args),
        overlap=spec.overlap,
        catchup=spec.catchup,
        catchup_window=spec.window,
        platform=platform,
        conversation=conversation,
        principal=spec.as_ or f"schedule:{sid}",
        owner=None,
        created_at=now,
        updated_at=now,
        evaluated_until=now,
    )


class ScheduleStore(Protocol):
    """The store roles the scheduler uses: schedules and their fires, and the audit."""

    @property
    def schedules(self) -> Schedules: ...
    @property
    def events(self) -> Events: ...


class Scheduler:
    def __init__(
        self,
        *,
        store: ScheduleStore,
        engine: Engine,
        catalog: Catalog,
        access: Access,
        replica: str,
        progress: ProgressReporter | None = None,
        clock: Callable[[], float] = time.time,
        on_time: float = ON_TIME,
    ) -> None:
        self.store = store
        self.engine = engine
        self.catalog = catalog
        self.access = access
        self.replica = replica
        self.progress = progress  # announcements and their threads (None: nothing is told)
        self.clock = clock
        self.on_time = on_time
        self._synced: object = None  # the catalog's schedules last synced
        #: called when a schedule was added, paused or resumed here (the loop re-reads at once)
        self.on_change: Callable[[], None] | None = None

    def changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    # -- the catalog's schedules ---------------------------------------------------------------
    def sync(self) -> None:
        """The workflows' `schedules:` into the store (only when the catalog's changed). A
        workflow whose file is broken keeps its schedules as they were."""
        self.catalog.reload()
        entries = self.catalog.entries()
        key = tuple((e.name, e.workflow.schedules if e.workflow else None, e.error is None) for e in entries)
        if key == self._synced:
            return
        now = self.clock()
        wanted = [
            from_spec(e.name, spec, now) for e in entries if e.workflow for spec in e.workflow.schedules
        ]
        broken = {e.name for e in entries if e.workflow is None}
        wanted += [
            s for s in self.store.schedules.list_schedules() if s.source == "yaml" and s.workflow in broken
        ]
        touched, removed = self.store.schedules.sync_schedules(wanted)
        for sid in touched:
            self.store.events.audit(actor=SCHEDULER, action="schedule_synced", details={"schedule": sid})
        for sid in removed:
            self.store.events.audit(actor=SCHEDULER, action="schedule_removed", details={"schedule": sid})
        self._synced = key

    # -- ticking ---------------------------------------------------------------------------------
    async def tick(self, now: float | None = None) -> list[Fired]:
        """Fire every due time up to `now` (the clock's time by default) that this replica wins.
        Only schedules whose next due time (after the point they were evaluated to) has come
        are read any further. The runs of the fires are created `BATCH` at a time, each batch
        in one commit (`Engine.create_runs`); a schedule's point moves forward (in one write at
        the end) once its fires were written; then the runs created begin executing (launching
        one costs about what creating it does: launched as they are created, they would make
        every later batch, and so the fires in it, that much later). Replicas ticking
        together start at random places of the schedules (in id order), so they share the work
        and their batches meet late; where they meet, a batch leaves the schedules a peer's
        batch holds to it (PostgreSQL: `FireBusy`), and such a schedule's point stays where it
        was, so the next tick finds its fire written (or fires it, when the peer failed)."""
        now = self.clock() if now is None else now
        self.sync()
        fired: list[Fired] = []
        schedules = sorted(
            (s for s in self.store.schedules.list_schedules() if not s.paused and next_due_of(s) <= now),
            key=lambda s: s.id,
        )
        start = random.randrange(len(schedules)) if schedules else 0
        schedules = schedules[start:] + schedules[:start]
        untils: dict[str, float] = {}
        batch = _Batch(share=True)
        try:
            for at, schedule in enumerate(schedules):
                if at % BATCH == 0:  # which of the next ones a peer fired meanwhile: one read
                    batch.latest = self.store.schedules.latest_fires(s.id for s in schedules[at : at + BATCH])
                done, until = await self._evaluate(schedule, now, batch, untils)
                fired.extend(done)
                if until is not None:
                    batch.untils[schedule.id] = until
                if len(batch.fires) >= BATCH:
                    fired.extend(await self._flush(batch, untils))
            fired.extend(await self._flush(batch, untils))
        finally:
            try:
                self.store.schedules.advance_schedules(untils)
            finally:
                await self._begin(batch)
        return fired

    def next_due(self) -> float | None:
        """The soonest due time of a schedule not paused after the point it was evaluated to
        (a loop sleeps until then); None when nothing is scheduled."""
        dues = [next_due_of(s) for s in self.store.schedules.list_schedules() if not s.paused]
        return min(dues, default=None)

    async def _evaluate(
        self, s: Schedule, now: float, batch: _Batch, untils: dict[str, float]
    ) -> tuple[list[Fired], float | None]:
        key = (rule_of(s), s.evaluated_until)  # schedules of one rule, evaluated as far: one reckoning
        dues = batch.dues.get(key)
        if dues is None:
            dues = batch.dues[key] = key[0].due_between(s.evaluated_until, now)
        out: list[Fired] = []
        for due, start in plan(dues, now, s.catchup, s.catchup_window, self.on_time):
            if start and s.overlap != "allow" and any(f.schedule.id == s.id for f in batch.fires):
                out.extend(await self._flush(batch, untils))  # its overlap looks at that run
            if start:
                done = await self._prepare(s, due, batch, catchup=now - due > self.on_time)
            else:
                done = self._record(s, due, FireOutcome.MISSED, {"late": round(now - due, 3)})
            if done is not None:
                out.append(done)
            if done is not None and done.outcome is FireOutcome.REFUSED:
                break  # paused: the rest waits for a resume
        return out, (dues[-1] if dues else None)

    # -- one fire ------------------------------------------------------------------------------
    async def fire(
        self, s: Schedule, due: float, *, by: str | None = None, catchup: bool = False
    ) -> Fired | None:
        """Fire `s` for `due` (DESIGN's rules, module docstring); None when another replica (or an
        earlier tick) fired that due time. `by`: the person who fired it by hand."""
        batch = _Batch()
        fired = self.store.schedules.schedule_fires(s.id, 1)
        batch.latest = {s.id: fired[0].due_at} if fired else {}
        done = await self._prepare(s, due, batch, by=by, catchup=catchup)
        if not batch.fires:
            return done
        try:
            started = await self._flush(batch, {})
        finally:
            await self._begin(batch)
        return started[0] if started else None

    async def _prepare(
        self, s: Schedule, due: float, batch: _Batch, *, by: str | None = None, catchup: bool = False
    ) -> Fired | None:
        """What a fire of `s` for `due` gets (module docstring), but its run: a fire that
        starts one joins `batch` (None is returned for it; `_flush` starts it)."""
        detail: dict[str, Any] = {}
        if by is not None:
            detail["by"] = by
        if catchup:
            detail["catchup"] = True
        if batch.latest.get(s.id) == due:
            return None  # fired already (a peer replica got there first): no start attempt to undo
        if not authz.may_run(self.access, s.principal, s.workflow):
            return await self._refuse(s, due, detail)
        active = (
            []
            if s.overlap == "allow"
            else [r for r in self.store.schedules.active_runs(s.started_by) if r.scheduled_for != due]
        )
        if active and s.overlap == "skip":
            return self._record(s, due, FireOutcome.SKIPPED, detail | {"active": [r.id for r in active]})
        if active and s.overlap == "cancel_running":
            await self._begin(batch)  # runs this tick created begin first: one it cancels must not after
            detail["cancelled"] = await self._cancel(s, active)
        if active and s.overlap == "queue":
            detail["behind"] = [r.id for r in active]
        batch.fires.append(_Pending(s, due, detail))
        return None

    async def _flush(self, batch: _Batch, untils: dict[str, float]) -> list[Fired]:
        """Create the runs of the fires in `batch` in one commit (in schedule order: two
        replicas' batches take their rows' locks in the same order; `_begin` starts them);
        the evaluated points of its schedules then go into `untils`. A store error leaves
        both as they were (the next tick fires them)."""
        fires = sorted(batch.fires, key=lambda f: (f.schedule.id, f.due))
        batch.fires = []
        done: list[Fired] = []
        if fires:
            done = await self._start(fires, batch)
        untils.update((sid, until) for sid, until in batch.untils.items() if sid not in batch.busy)
        batch.untils = {}
        return done

    async def _start(self, fires: Sequence[_Pending], batch: _Batch) -> list[Fired]:
        def written(f: _Pending) -> Starting:
            def write(tx: UnitOfWork, run: Run) -> None:
                tx.record_fire(self._fire(f.schedule, f.due, FireOutcome.STARTED, f.detail, run.id))

            return write

        starts = [self._run_start(f, written(f)) for f in fires]
        replies: list[Reply | None] = [None] * len(fires)
        async with contextlib.AsyncExitStack() as places:
            answered: dict[tuple[str, str], list[Reply]] = {}
            if self.progress is not None:  # thread-less runs there wait for the announcements
                for place in dict.fromkeys((f.schedule.platform, f.schedule.conversation) for f in fires):
                    answered[place] = await places.enter_async_context(self.progress.starting(*place))
            created = self.engine.create_runs(starts, share=batch.share)  # StoreError: nothing written
            batch.begins += [c for c in created if isinstance(c, Created)]
            results = [c.run if isinstance(c, Created) else c for c in created]
            for i, (f, result) in enumerate(zip(fires, results, strict=True)):
                if isinstance(result, Run) and self.progress is not None:
                    announced = schedule_replies.fired(result, f.schedule, f.due, f.detail)
                    answered[(f.schedule.platform, f.schedule.conversation)].append(announced)
                    replies[i] = announced
        out: list[Fired] = []
        for f, result, reply in zip(fires, results, replies, strict=True):
            s, due = f.schedule, f.due
            if isinstance(result, FireAlreadyRecorded):
                continue
            if isinstance(result, FireBusy):  # a peer's batch holds it: its point stays (`tick`)
                batch.busy.add(s.id)
                continue
            if isinstance(result, BatonError):  # the workflow is gone or broken, the args no longer fit
                log.warning(
                    "schedule %s could not start a run: %s",
                    s.id,
                    result.message,
                    extra={"action": "schedule_failed", "schedule": s.id},
                )
                failed = self._record(s, due, FireOutcome.FAILED, f.detail | {"error": result.message})
                if failed is not None:
                    out.append(failed)
                continue
            run = result
            log.info("schedule %s started run %s", s.id, run.id,
                     extra={"action": "schedule_fired", "schedule": s.id, "run_id": run.id, "due_at": due,
                            "late": round(run.created_at - due, 3)})  # fmt: skip
            if reply is not None and self.progress is not None:
                await self.progress.post(reply)
            out.append(Fired(s.id, due, FireOutcome.STARTED, run.id))
        return out

    async def _begin(self, batch: _Batch) -> None:
        """The runs `batch` created (committed) begin: queued (told), or executing. One that
        cannot is logged; the others still begin."""
        begins, batch.begins = batch.begins, []
        for created in begins:
            try:
                await self.engine.begin(created)
            except Exception:
                log.exception("run %s of a schedule did not begin", created.run.id,
                              extra={"action": "schedule_failed", "run_id": created.run.id})  # fmt: skip

    def _run_start(self, f: _Pending, written: Starting) -> RunStart:
        s = f.schedule
        return RunStart(
            workflow=s.workflow,
            args=s.args,
            platform=s.platform,
            conversation=s.conversation,
            thread=None,
            requester=s.principal,
            started_by=s.started_by,
            scheduled_for=f.due,
            alongside=written,
            # overlap `queue`: one run of the schedule at a time, the others wait in its queue
            concurrency=Concurrency(key=f"schedule:{s.id}", limit=1, on_limit=OnLimit.QUEUE)
            if s.overlap == "queue"
            else None,
        )

    async def _cancel(self, s: Schedule, active: Sequence[Run]) -> list[str]:
        cancelled = []
        for run in active:
            try:
                await self.engine.abandon(
                    run.id,
                    actor=s.started_by,
                    reason=f"a newer fire of schedule {s.id} (overlap: cancel_running)",
                )
                cancelled.append(run.id)
            except StoreError:
                raise
            except BatonError as exc:  # it came to rest meanwhile
                log.info(
                    "run %s not cancelled: %s",
                    run.id,
                    exc.message,
                    extra={"action": "schedule_cancel", "run_id": run.id},
                )
        return cancelled

    async def _refuse(self, s: Schedule, due: float, detail: dict[str, Any]) -> Fired | None:
        """Its principal may no longer run the workflow: paused (a CAS: one replica), told to its
        place and its owner, the fire recorded `refused`; nothing runs."""
        note = f"{s.principal} may no longer run {s.workflow}"
        try:
            paused = self.store.schedules.change_schedule(s, paused=True, note=note, paused_by=SCHEDULER)
        except (ScheduleChanged, ScheduleNotFound):
            return None  # another replica paused it (or someone changed it) first
        self.store.schedules.record_fire(self._fire(s, due, FireOutcome.REFUSED, detail | {"reason": note}))
        self.store.events.audit(
            actor=SCHEDULER,
            action="schedule_paused",
            details={"schedule": s.id, "reason": note, "due_at": due},
        )
        log.warning(
            "schedule %s paused: %s", s.id, note, extra={"action": "schedule_refused", "schedule": s.id}
        )
        if self.progress is not None:
            for reply in schedule_replies.refused(paused, note):
                await self.progress.post(reply)
        return Fired(s.id, due, FireOutcome.REFUSED)

    def _record(self, s: Schedule, due: float, outcome: FireOutcome, detail: dict[str, Any]) -> Fired | None:
        if not self.store.schedules.record_fire(self._fire(s, due, outcome, detail)):
            return None
        log.info(
            "schedule %s: fire %s",
            s.id,
            outcome.value,
            extra={"action": f"schedule_{outcome.value}", "schedule": s.id, "due_at": due},
        )
        return Fired(s.id, due, outcome)

    def _fire(
        self, s: Schedule, due: float, outcome: FireOutcome, detail: dict[str, Any], run_id: str | None = None
    ) -> Fire:
        return Fire(
            schedule_id=s.id,
            due_at=due,
            outcome=outcome,
            at=self.clock(),
            by=self.replica,
            run_id=run_id,
            detail=dict(detail),
        )


#: fires whose runs one commit creates (a tick of 1,000 due fires: 20 commits, not 1,000;
#: under PostgreSQL's 64 cached subtransactions, one per fire's savepoint)
BATCH = 50


@dataclass(slots=True)
class _Pending:
    """A fire that starts a run, waiting for its batch's commit."""

    schedule: Schedule
    due: float
    detail: dict[str, Any]


@dataclass(slots=True)
class _Batch:
    #: a tick's (`Engine.start_runs` with `share`): fires a peer's batch holds are left to it
    share: bool = False
    fires: list[_Pending] = field(default_factory=list)
    #: schedules whose fire a peer's batch held (`FireBusy`): not moved forward this tick
    busy: set[str] = field(default_factory=set)
    #: the points the batch's schedules were evaluated to, moved once their fires are written
    untils: dict[str, float] = field(default_factory=dict)
    #: the latest fire's due time of the schedules about to be evaluated (`Store.latest_fires`,
    #: read just before: a fire a peer writes later loses its unit, which the CAS undoes)
    latest: dict[str, float] = field(default_factory=dict)
    #: due times by (rule, evaluated until) in this tick (`now` is the tick's)
    dues: dict[tuple[Rule, float], list[float]] = field(default_factory=dict)
    #: the runs its flushes created (committed), to begin (`Scheduler._begin`)
    begins: list[Created] = field(default_factory=list)
