from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.console.cli import BatonCli


@pytest.fixture
def baton(tmp_path: Path, migrated_sqlite_url: str) -> BatonCli:
    """`baton` on a SQLite database (its schema at head, as after a first start) with the
    fixture workflows."""
    return BatonCli.create(tmp_path, migrated_sqlite_url)


@pytest.fixture
def new_baton(tmp_path: Path, sqlite_url: str) -> BatonCli:
    """`baton` on a new SQLite database, no schema yet (the first start creates it)."""
    return BatonCli.create(tmp_path, sqlite_url)


@pytest.fixture
def baton_any_db(tmp_path: Path, database_url: str) -> BatonCli:
    """`baton` on a fresh SQLite database and on a fresh PostgreSQL database."""
    return BatonCli.create(tmp_path, database_url)
