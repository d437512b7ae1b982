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
from adapters.discord.formatting import FORMAT
from adapters.discord.outbound import TRANSIENT
from core.commands.lifecycle import stopped, until_settled
from core.config import Settings
from core.delivery.failures import CallFailed

__all__ = ["BatonClient", "build_client", "serve", "sync_commands"]


def build_client(baton: Any, settings: Settings, **options: Any) -> BatonClient:
    """A client wired to `baton.handler` (its edit component and its store of long button commands)."""
    return BatonClient(
        handler=baton.handler,
        guild_id=settings.discord_guild_id,
        **options,
    )


def _token(settings: Settings) -> str:
    if settings.discord_token is None:
        raise stopped(FORMAT, "token_unset")
    if settings.discord_api_url:  # discord.py reads its base URL from this class attribute
        discord.http.Route.BASE = settings.discord_api_url.rstrip("/")
    return settings.discord_token.get_secret_value()


async def sync_commands(baton: Any, settings: Settings) -> int:
    """`baton discord sync`: register the application commands now, changed or not; how many."""
    token = _token(settings)
    client = build_client(baton, settings, sync="always")
    async with client:
        try:
            await client.login(token)  # the setup hook syncs
        except discord.LoginFailure as exc:
            raise stopped(FORMAT, "token_refused") from exc
        except TRANSIENT as exc:
            raise _unreachable(exc) from exc
    return client.synced or 0


def _unreachable(exc: BaseException) -> CallFailed:
    """Discord could not be reached (DNS, refused, a 5xx): one line, and a restart may help."""
    error = type(exc).__name__
    return CallFailed(FORMAT.said("unreachable", error), method="login", error=error, channel=None,
                      transient=True)


async def serve(baton: Any, settings: Settings) -> None:
    """Connect to Discord and take input until `baton.stopping` is set (or the task is cancelled)."""
    token = _token(settings)
    client = build_client(baton, settings)

    async def connected() -> bool:  # the gateway session is up (READY, not closed)
        return client.is_ready() and not client.is_closed()

    baton.watch_platform("discord", connected)
    async with client:
        running = asyncio.create_task(client.start(token))
        await until_settled(baton, running, client.close)  # close: pending progress edits, disconnect
    if running.cancelled() or running.exception() is None:
        return
    exc = running.exception()
    if isinstance(exc, discord.LoginFailure):
        raise stopped(FORMAT, "token_refused") from exc
    if isinstance(exc, discord.PrivilegedIntentsRequired):
        raise stopped(FORMAT, "intent_refused") from exc
    if isinstance(exc, TRANSIENT):  # exit 1: systemd or --supervise tries again
        raise _unreachable(exc) from exc
    raise exc  # type: ignore[misc]
