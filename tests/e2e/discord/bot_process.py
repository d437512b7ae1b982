"""A Discord Baton as a process of its own, for the fault matrix's process rows:

    python -m tests.e2e.discord.bot_process <api base> <database url> <dir> [interaction.json]

It wires Baton as `baton run` does (`build_baton`, `baton.running()` with its signal handling,
the Discord client) against the fake HTTP API, sees its guild, and dispatches the interaction
the test wrote (the fake has no gateway: events reach the client as the in-process harness
hands them). On SIGTERM it stops as `serve_all` does: settle (steps' grace, outbox flushed)
while the client can still send, then close the client. SIGKILL is SIGKILL.
`OUTBOX_LEASE_SECONDS` in its environment: the outbox lease (3 s unless set).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from adapters.discord import build_client, discord
from bot.app import build_baton
from tests.e2e.discord.gateway import dispatch_interaction, guild_create
from tests.e2e.discord.harness import settings_for


async def main(api: str, database_url: str, where: Path, interaction: Path | None) -> None:
    discord.http.Route.BASE = api
    # OUTBOX_LEASE_SECONDS: a trial of the default lease (how long a dead process's claim holds)
    outbox_lease = float(os.environ.get("OUTBOX_LEASE_SECONDS", "3"))
    settings = settings_for(where, database_url).model_copy(update={
        "lease_seconds": 2.0, "outbox_lease_seconds": outbox_lease, "outbox_poll_seconds": 0.5,
        "shutdown_grace": 20.0,
    })
    baton = build_baton(settings)
    try:
        async with baton.running():
            client = build_client(baton, settings)
            await client.login("test-token")
            client._connection.parse_guild_create(guild_create())  # type: ignore[arg-type]
            print("action=discord_ready", flush=True)
            if interaction is not None:
                dispatch_interaction(client, json.loads(interaction.read_text()))
            await baton.stopping.wait()
            await baton.settle()
            await client.close()
    finally:
        baton.close()


if __name__ == "__main__":
    given = sys.argv[1:]
    asyncio.run(main(given[0], given[1], Path(given[2]), Path(given[3]) if len(given) > 3 else None))
