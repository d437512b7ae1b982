"""`chat`: Baton on one platform (console, Slack, Discord) and one database (SQLite, PostgreSQL)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.e2e.acceptance.drivers import Chat, console_chat, discord_chat, slack_chat


@pytest.fixture(params=["console", "slack", "discord"])
async def chat(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    migrated_database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Chat]:
    database_url = migrated_database_url
    if request.param == "console":
        async with console_chat(tmp_path, database_url) as console:
            yield console
    elif request.param == "slack":
        async with slack_chat(tmp_path, database_url) as slack:
            yield slack
    else:
        async with discord_chat(tmp_path, database_url, monkeypatch) as discord:
            yield discord
