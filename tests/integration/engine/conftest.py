"""Engine fixtures: a real engine on SQLite (`harness`) or on both databases (`db_harness`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration.engine.harness import Harness, make_harness


@pytest.fixture
async def harness(tmp_path: Path, migrated_sqlite_url: str) -> AsyncIterator[Harness]:
    h = make_harness(tmp_path, migrated_sqlite_url)
    yield h
    await h.engine.stop(grace=5)
    h.store.close()


@pytest.fixture
async def db_harness(tmp_path: Path, migrated_database_url: str) -> AsyncIterator[Harness]:
    h = make_harness(tmp_path, migrated_database_url)
    yield h
    await h.engine.stop(grace=5)
    h.store.close()
