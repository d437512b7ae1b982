from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.discord import discord  # imported there without the stdlib `audioop` warning
from core.config import Settings
from tests.e2e.discord.fake_discord import FakeDiscord
from tests.e2e.discord.harness import DiscordBot, discord_bot, settings_for


@pytest.fixture
async def fake_discord(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    """Discord's HTTP API on 127.0.0.1; discord.py (REST and interaction webhooks) points at it."""
    fake = FakeDiscord()
    base = await fake.start()
    monkeypatch.setattr(discord.http.Route, "BASE", base)
    yield fake
    await fake.stop()
    assert not fake.violations, f"sent without AllowedMentions.none(): {fake.violations}"


@pytest.fixture
def settings(tmp_path: Path, migrated_sqlite_url: str) -> Settings:
    return settings_for(tmp_path, migrated_sqlite_url)


@pytest.fixture
async def bot(fake_discord: FakeDiscord, settings: Settings) -> AsyncIterator[DiscordBot]:
    async with discord_bot(fake_discord, settings) as running:
        yield running
