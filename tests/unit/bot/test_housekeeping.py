"""Housekeeping (`bot/housekeeping.py`) on real stores, SQLite and PostgreSQL: old event ids
and adapters' values go, recent ones stay; a pass runs when the engine starts, then every
interval, and the task ends with the engine."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.app import build_baton
from bot.housekeeping import DAY, HOUR, Housekeeping, Swept
from core.config import Settings
from core.store.repository import SqlStore

NOW = 2_000_000_000.0


class Clock:
    """The time of the store's writes and of housekeeping's cut-offs; `ticked` is set when
    it has been read `wanted` times (one read per housekeeping pass)."""

    def __init__(self, now: float, wanted: int = 0) -> None:
        self.now = now
        self.reads = 0
        self.wanted = wanted
        self.ticked = asyncio.Event()

    def __call__(self) -> float:
        self.reads += 1
        if self.wanted and self.reads >= self.wanted:
            self.ticked.set()
        return self.now


def seed(url: str, at: float, name: str) -> None:
    """An event id and two adapter values written at `at` (by another process)."""
    with SqlStore(url, clock=lambda: at) as store:
        store.migrate()
        assert store.claim_event("slack", f"ev-{name}")
        store.finish_event("slack", f"ev-{name}")
        store.put_state("slack", f"ref:{name}", f"run deploy --force {name!r}")
        store.put_state("discord", f"message:progress:{name}", "10 20")


def kept(store: SqlStore, name: str) -> tuple[bool, bool, bool]:
    """(event id still known, slack value kept, discord value kept)."""
    known = not store.claim_event("slack", f"ev-{name}")
    return (
        known,
        store.get_state("slack", f"ref:{name}") is not None,
        store.get_state("discord", f"message:progress:{name}") is not None,
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
    clock = Clock(NOW)
    housekeeping = Housekeeping(
        baton.store, every=0.05, event_retention=24 * HOUR, state_retention=30 * DAY, clock=clock
    )
    baton = dataclasses.replace(baton, housekeeping=housekeeping)  # a short interval, our clock
    try:
        with caplog.at_level(logging.INFO, logger="baton.housekeeping"):
            async with baton.running(grace=1.0, handle_signals=False):
                assert housekeeping.passes == 1  # done before `running()` yields
                assert kept(baton.store, "before-start") == (False, False, False)
                seed(settings.database_url, NOW - 31 * DAY, "while-running")
                clock.reads, clock.wanted = 0, 1  # the next read is the first periodic pass
                await asyncio.wait_for(clock.ticked.wait(), timeout=10)  # sweep() is synchronous:
                assert housekeeping.passes >= 2  # it had finished when the event was set
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
