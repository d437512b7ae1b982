"""`bot.testing.build`: the production wiring (`bot.app.wire`) for tests, in memory by
default, with the parts a test swaps given as parameters."""

from __future__ import annotations

from pathlib import Path

from bot import testing
from core.commands.voting import AccessApprovers
from core.config import Access
from core.engine.tools import ToolRegistry
from core.store.memory import MemoryStore
from core.store.repository import SqlStore


def test_the_default_is_a_memory_store_the_fake_provider_and_the_tests_directories(tmp_path: Path) -> None:
    baton = testing.build(tmp_path)
    assert isinstance(baton.store, MemoryStore)
    assert baton.settings.workflow_dirs == [tmp_path / "workflows"]
    assert baton.engine.config.data_dir == tmp_path / "data"
    assert baton.engine.providers.default == "fake"
    assert isinstance(baton.engine.gates.approvers, AccessApprovers)  # from the wiring, never patched
    assert baton.outbox is not None and baton.deadlines is not None  # the loops `running()` starts
    assert baton.handler.engine is baton.engine


def test_settings_fields_and_swapped_parts_reach_what_is_wired(tmp_path: Path) -> None:
    store, tools = MemoryStore(), ToolRegistry()
    access = Access(run={"*": ["console:ana"]}, approve={})

    def clock() -> float:
        return 42.0

    baton = testing.build(tmp_path, store=store, tools=tools, clock=clock, access=access, replica_id="r7",
                          lease_seconds=2.0, group_commit=3600.0)  # fmt: skip
    assert baton.store is store and baton.engine.readiness.tools is tools
    assert baton.handler.clock is clock and baton.handler.access == access
    config = baton.engine.config
    assert (config.replica_id, config.lease_seconds, config.group_commit) == ("r7", 2.0, 3600.0)


def test_a_database_url_is_opened_and_migrated(tmp_path: Path) -> None:
    baton = testing.build(tmp_path, database_url=f"sqlite:///{tmp_path / 'db' / 'baton.db'}")
    try:
        assert isinstance(baton.store, SqlStore)
        assert baton.store.runs.recent_runs() == []  # the tables exist
    finally:
        baton.close()
