"""Discord adapter (discord.py): `/workflow` application command, persistent buttons, and
approval replies in a run's thread. See docs/discord.md for the application setup.

    client = build_client(baton, settings)      # tests drive this one with gateway payloads
    await serve(baton, settings)                # runs until `baton.stopping` is set
"""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

with warnings.catch_warnings():
    # discord.py imports the stdlib `audioop` for voice, which Baton does not use; on 3.11 that
    # import warns (DeprecationWarning), which the test suite turns into an error.
    warnings.filterwarnings("ignore", message="'audioop' is deprecated", category=DeprecationWarning)
    import discord

from adapters.discord.client import BatonClient
from core.config import Settings
from core.errors import ConfigurationError

__all__ = ["BatonClient", "build_client", "serve"]


def build_client(baton: Any, settings: Settings, **options: Any) -> BatonClient:
    """A client wired to `baton.handler` (and `baton.store` for long button commands)."""
    return BatonClient(
        handler=baton.handler,
        get_blob=baton.store.get_blob,
        put_blob=baton.store.put_blob,
        guild_id=settings.discord_guild_id,
        **options,
    )


async def serve(baton: Any, settings: Settings) -> None:
    """Connect to Discord and take input until `baton.stopping` is set (or the task is cancelled)."""
    if settings.discord_token is None:
        raise ConfigurationError("BATON_DISCORD_TOKEN is not set.")
    client = build_client(baton, settings)
    async with client:
        running = asyncio.create_task(client.start(settings.discord_token.get_secret_value()))
        stopping = asyncio.create_task(baton.stopping.wait())
        try:
            await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            await client.close()  # sends pending progress edits, then disconnects
            await asyncio.wait({running})
    if running.cancelled() or running.exception() is None:
        return
    exc = running.exception()
    if isinstance(exc, discord.LoginFailure):
        raise ConfigurationError(
            "BATON_DISCORD_TOKEN was rejected by Discord.",
            hint="Copy the bot token again from the Developer Portal (Bot → Reset Token).",
        ) from exc
    if isinstance(exc, discord.PrivilegedIntentsRequired):
        raise ConfigurationError(
            "Discord refused the Message Content intent.",
            hint="Enable it in the Developer Portal (Bot → Privileged Gateway Intents).",
        ) from exc
    raise exc  # type: ignore[misc]
