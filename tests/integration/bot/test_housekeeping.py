"""Housekeeping (`bot/housekeeping.py`) on real stores, SQLite and PostgreSQL: old event ids
and adapters' values go, recent ones stay; a pass runs when the engine starts, then every
interval, and the task ends with the engine."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import threading
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.app import build_baton
from bot.housekeeping import DAY, HOUR, Housekeeping, Swept
from core.config import Settings
from core.store.port import Transition
from core.store.repository import SqlStore

NOW = 2_000_000_000.0


def seed(url: str, at: float, name: str) -> None:
    """An event id and two adapter values written at `at` (by another process)."""
    with SqlStore(url, clock=lambda: at) as store:
        store.migrate()
        assert store.events.claim_event("slack", f"ev-{name}")
        store.events.finish_event("slack", f"ev-{name}")
        store.state.put_state("slack", f"ref:{name}", f"run deploy --force {name!r}")
        store.state.put_state("discord", f"message:progress:{name}", "10 20")


def kept(store: SqlStore, name: str) -> tuple[bool, bool, bool]:
    """(event id still known, slack value kept, discord value kept)."""
    known = not store.events.claim_event("slack", f"ev-{name}")
    return (
        known,
        store.state.get_state("slack", f"ref:{name}") is not None,
        store.state.get_state("discord", f"message:progress:{name}") is not None,
    )


def test_a_pass_forgets_what_is_past_its_retention_and_keeps_the_rest(database_url: str) -> None:
    seed(database_url, NOW - 31 * DAY, "month-old")  # past both retentions
    seed(database_url, NOW - 25 * HOUR, "yesterday")  # events past 24 h, values within 30 days
    seed(database_url, NOW - 10 * 60, "recent")  # within both (a Slack retry could still come)
    with SqlStore(database_url) as store:
        housekeeping = Housekeeping(
            store, every=60, event_retention=24 * HOUR, state_retention=30 * DAY, clock=lambda: NOW
        )
        assert housekeeping.sweep() == Swept(events=2, state=2)
        assert housekeeping.sweep() == Swept(events=0, state=0)  # idempotent: a peer's pass
        assert kept(store, "month-old") == (False, False, False)
        assert kept(store, "yesterday") == (False, True, True)
        assert kept(store, "recent") == (True, True, True)


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    return Settings(
        database_url=database_url, workflow_dirs=[workflows], data_dir=tmp_path / "data", tool_modules=[]
    )


async def test_the_bot_sweeps_at_start_then_every_interval_and_stops_with_the_engine(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    seed(settings.database_url, NOW - 31 * DAY, "before-start")
    baton = build_baton(settings)
    assert baton.housekeeping is not None
    housekeeping = Housekeeping(
        baton.store, every=0.05, event_retention=24 * HOUR, state_retention=30 * DAY, clock=lambda: NOW
    )
    baton = dataclasses.replace(baton, housekeeping=housekeeping)  # a short interval, our clock
    try:
        with caplog.at_level(logging.INFO, logger="baton.housekeeping"):
            async with baton.running(grace=1.0, handle_signals=False):
                await housekeeping.wait_for_passes(1, timeout=10)  # the pass at start
                assert kept(baton.store, "before-start") == (False, False, False)
                seed(settings.database_url, NOW - 31 * DAY, "while-running")
                done = housekeeping.passes
                await housekeeping.wait_for_passes(done + 2, timeout=10)  # a whole pass after the seed
                assert kept(baton.store, "while-running") == (False, False, False)
            task_names = {t.get_name() for t in asyncio.all_tasks()}
            assert "baton-housekeeping" not in task_names  # stopped (ended) with the engine
    finally:
        baton.close()
    counts = [r for r in caplog.records if getattr(r, "action", None) == "housekeeping"]
    assert counts and counts[0].levelno == logging.INFO
    assert (counts[0].events, counts[0].state) == (1, 2)  # type: ignore[attr-defined]


def test_build_baton_wires_the_settings(settings: Settings) -> None:
    configured = settings.model_copy(
        update={"housekeeping_minutes": 5.0, "event_retention_hours": 2.0, "state_retention_days": 7.0}
    )
    baton = build_baton(configured)
    try:
        assert baton.housekeeping is not None
        assert (
            baton.housekeeping.every,
            baton.housekeeping.event_retention,
            baton.housekeeping.state_retention,
        ) == (300.0, 2 * HOUR, 7 * DAY)
    finally:
        baton.close()


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("BATON_EVENT_RETENTION_HOURS", "0"),
        ("BATON_EVENT_RETENTION_HOURS", "0.01"),  # 36 s: inside Slack's retries and the claim window
        ("BATON_STATE_RETENTION_DAYS", "0"),
        ("BATON_HOUSEKEEPING_MINUTES", "-1"),
    ],
)
def test_retentions_and_the_interval_must_be_sensible(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError, match=variable.removeprefix("BATON_").lower()):
        Settings()


async def test_a_long_pass_runs_off_the_event_loop_and_does_not_delay_the_start(sqlite_url: str) -> None:
    entered, release = threading.Event(), threading.Event()

    class SlowDeletes:
        """The real store, whose first DELETE lasts until the test releases it."""

        def __init__(self, inner: SqlStore) -> None:
            self.inner = inner
            self.events = self  # its events role: `forget_events` below
            self.state, self.outbox = inner.state, inner.outbox

        def forget_events(self, before: float) -> int:
            entered.set()
            release.wait(10)
            return self.inner.events.forget_events(before)

    with SqlStore(sqlite_url) as store:
        store.migrate()
        housekeeping = Housekeeping(
            SlowDeletes(store),  # type: ignore[arg-type]
            every=HOUR,
            event_retention=24 * HOUR,
            state_retention=30 * DAY,
            clock=lambda: NOW,
        )
        await housekeeping.start()  # returns while the first pass has not even begun
        assert housekeeping.passes == 0
        assert await asyncio.to_thread(entered.wait, 10)  # the loop runs during the DELETE
        assert housekeeping.passes == 0
        release.set()
        await housekeeping.wait_for_passes(1, timeout=10)
        await housekeeping.stop()
        assert housekeeping.passes == 1


def test_with_a_run_retention_the_bot_prunes_old_finished_runs_in_batches(settings: Settings) -> None:
    """The wiring `baton run` uses: BATON_RUN_RETENTION_DAYS and BATON_PRUNE_BATCH reach the
    housekeeping pass, which prunes old finished runs, keeps recent and paused ones, and sweeps
    the blobs only the pruned runs referenced once their grace is over."""
    from bot.retention import SWEEP_GRACE
    from core.store.records import RunStatus
    from tests.factories import create_run

    configured = settings.model_copy(update={"run_retention_days": 30.0, "prune_batch": 2})
    baton = build_baton(configured)
    try:
        housekeeping = baton.housekeeping
        assert housekeeping is not None and housekeeping.pruner is not None
        assert housekeeping.pruner.batch == 2
        store = baton.store
        made: dict[str, list[str]] = {"old": [], "recent": [], "paused": []}
        for name, count, status in (("old", 5, RunStatus.COMPLETED), ("paused", 1, RunStatus.PAUSED),
                                    ("recent", 1, RunStatus.COMPLETED)):
            for i in range(count):
                run = create_run(store, workflow="w", platform="console", conversation="c", thread=None,
                                 requester="console:a", args_digest=store.blobs.put_blob(
                                     f"{name}{i}".encode()
                                 ))
                for step in (RunStatus.RUNNING, status):
                    store.runs.transition(Transition(run.id, step, actor="t", lease_owner="t"))
                made[name].append(run.id)
        now = store.runs.get_run(made["recent"][0]).updated_at
        for run_id in made["old"] + made["paused"]:  # last changed 40 days before `now`
            with store._engine.begin() as conn:  # type: ignore[attr-defined]
                conn.exec_driver_sql(f"UPDATE runs SET created_at = {now - 41 * DAY}, "
                                     f"updated_at = {now - 40 * DAY} WHERE id = '{run_id}'")
        housekeeping._clock = lambda: now
        housekeeping.pruner._clock = lambda: now
        assert housekeeping.sweep().runs == 5  # three batches of at most two
        assert {r.id for r in store.runs.recent_runs(limit=100)} == set(made["paused"] + made["recent"])
        housekeeping.pruner._clock = lambda: now + SWEEP_GRACE + 1
        housekeeping.pruner.prune()
        for i in range(5):
            with pytest.raises(KeyError):
                store.blobs.get_blob(hashlib.sha256(f"old{i}".encode()).hexdigest())
        assert store.blobs.get_blob(store.runs.get_run(made["recent"][0]).args_digest) == b"recent0"
    finally:
        baton.close()
