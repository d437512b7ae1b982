"""One Baton process with its Discord client, driven by gateway payloads and observed through
the fake Discord's recorded HTTP calls."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.discord import BatonClient, build_client
from bot.app import Baton, build_baton
from core.config import Access, Settings
from core.delivery.button_refs import command_of, parse
from core.store.records import Run
from tests.e2e.discord.fake_discord import CHANNEL_ID, GUILD_ID, Call, FakeDiscord
from tests.e2e.discord.gateway import (
    ANA,
    BOB,
    autocomplete,
    button_click,
    dispatch_interaction,
    dispatch_message,
    guild_create,
    message_create,
    modal_submit,
    select_choice,
    slash_command,
    subcommand,
)

WORKFLOWS = Path(__file__).parent / "workflows"
DEADLINE = 30.0
_THREAD_NAME = re.compile(r"· (?P<run>\S+)$")


def settings_for(tmp_path: Path, database_url: str) -> Settings:
    """Ana and Bob may run and approve; anyone else (Mallory) may not."""
    workflows = tmp_path / "workflows"
    if not workflows.exists():
        shutil.copytree(WORKFLOWS, workflows)
    people = [f"discord:{ANA['id']}", f"discord:{BOB['id']}"]
    return Settings(
        database_url=database_url,
        workflow_dirs=[workflows],
        data_dir=tmp_path / "data",
        tool_modules=[],
        prompt_provider="fake",
        discord_guild_id=int(GUILD_ID),
        access=Access(run={"*": people}, approve={"*": people}),
        _env_file=None,  # type: ignore[call-arg]
    )


@dataclass
class DiscordBot:
    fake: FakeDiscord
    baton: Baton
    client: BatonClient

    # -- input: what Discord's gateway delivers ---------------------------------------------
    def command(
        self, text: str, *, who: dict[str, Any] = ANA, channel_id: str = CHANNEL_ID, **place: Any
    ) -> dict[str, Any]:
        payload = slash_command(self.fake, text, who=who, channel_id=channel_id, **place)
        dispatch_interaction(self.client, payload)
        return payload

    def subcommand(self, sub: str, /, *, who: dict[str, Any] = ANA, channel_id: str = CHANNEL_ID,
                   **options: Any) -> dict[str, Any]:
        """`/workflow <sub>` with typed options."""
        payload = subcommand(self.fake, sub, options, who=who, channel_id=channel_id)
        dispatch_interaction(self.client, payload)
        return payload

    async def choices(self, sub: str, focused: str, /, *, who: dict[str, Any] = ANA,
                      channel_id: str = CHANNEL_ID, **options: Any) -> list[dict[str, Any]]:
        """What autocomplete offers while option `focused` of `/workflow <sub>` is typed."""
        payload = autocomplete(self.fake, sub, options, focused, who=who, channel_id=channel_id)
        dispatch_interaction(self.client, payload)
        callback = await self.acknowledged(payload)
        assert callback.json["type"] == 8, callback.json  # APPLICATION_COMMAND_AUTOCOMPLETE_RESULT
        return list(callback.json["data"]["choices"])

    def modal_of(self, who: dict[str, Any]) -> str:
        """The custom_id of the newest modal Baton opened for `who` (an interaction callback of
        type 9 answering one of their interactions)."""
        opened = [c.json["data"]["custom_id"] for c in self.fake.calls
                  if c.method == "POST" and c.path.startswith("interactions/")
                  and (c.json or {}).get("type") == 9
                  and self.fake.tokens.get(c.path.split("/")[2], {}).get("user") == who["id"]]
        assert opened, f"no modal was opened for {who['username']}"
        return str(opened[-1])

    def submit(self, values: dict[str, str], *, who: dict[str, Any] = ANA,
               channel_id: str = CHANNEL_ID) -> dict[str, Any]:
        """Submit the form modal Baton opened for `who` ({field name: text})."""
        payload = modal_submit(self.fake, self.modal_of(who), {f"field:{k}": v for k, v in values.items()},
                               who=who, channel_id=channel_id)
        dispatch_interaction(self.client, payload)
        return payload

    def redeliver(self, payload: dict[str, Any]) -> None:
        dispatch_interaction(self.client, payload)

    def click(self, custom_id: str, *, who: dict[str, Any] = ANA) -> dict[str, Any]:
        """Click the newest message that shows a button with this custom_id."""
        holders = [m for m in self.fake.messages.values() if custom_id in custom_ids(m["components"])]
        assert holders, f"no message shows a button {custom_id!r}"
        payload = button_click(self.fake, holders[-1]["id"], custom_id, who=who)
        dispatch_interaction(self.client, payload)
        return payload

    def commands_of(self, select: dict[str, Any]) -> dict[str, str]:
        """A select menu's options as {command: value}, decoded as any Baton process would."""
        return {command_of(parse(o["value"]), self.client.interactions._kept): o["value"]  # type: ignore[arg-type]
                for o in select["options"]}

    def choose(self, message_id: str, menu: int, command: str, *, who: dict[str, Any] = ANA) -> None:
        """Pick, in select menu `menu` of a message, the option that runs `command`."""
        select = menus(self.fake.messages[message_id]["components"])[menu]
        value = self.commands_of(select)[command]
        payload = select_choice(self.fake, message_id, select["custom_id"], value, who=who)
        dispatch_interaction(self.client, payload)

    def message_with(self, channel_id: str, text: str) -> dict[str, Any]:
        """The newest message the bot has in `channel_id` whose content contains `text`."""
        found = [m for m in self.fake.messages.values()
                 if m["channel_id"] == channel_id and text in m["content"]]
        assert found, f"no message in {channel_id} contains {text!r}"
        return found[-1]

    def say(self, channel_id: str, text: str, *, who: dict[str, Any] = ANA,
            mentions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        payload = message_create(self.fake, channel_id, text, who=who, mentions=mentions)
        dispatch_message(self.client, payload)
        return payload

    # -- output: what Discord received ---------------------------------------------------------
    async def acknowledged(self, payload: dict[str, Any]) -> Call:
        """The interaction callback (type 4/5/6) Discord received for this interaction."""
        part = f"interactions/{payload['id']}/"
        return (await self.fake.wait_for(lambda calls: [c for c in calls if part in c.path], DEADLINE))[0]

    async def answers(self, payload: dict[str, Any], count: int = 1) -> list[Call]:
        """The first `count` messages sent with this interaction's token (original + followups)."""
        token = payload["token"]

        def found(calls: list[Call]) -> list[Call] | None:
            sent = [c for c in calls if token in c.path and c.path.startswith("webhooks/")
                    and c.method in ("POST", "PATCH") and "content" in (c.json or {})]
            return sent[:count] if len(sent) >= count else None

        return await self.fake.wait_for(found, DEADLINE)

    async def thread_of_next_run(self, after: int) -> tuple[str, str]:
        """(run id, thread id) of the first thread created after call number `after`."""
        call = (await self.fake.wait_for(
            lambda calls: [c for c in calls[after:] if c.method == "POST" and c.path.endswith("/threads")],
            DEADLINE))[0]
        run = _THREAD_NAME.search(call.json["name"])
        assert run is not None, call.json
        thread = next(t for t in self.fake.channels.values() if t.get("name") == call.json["name"])
        return run["run"], thread["id"]

    async def start(self, text: str, *, who: dict[str, Any] = ANA,
                    channel_id: str = CHANNEL_ID) -> tuple[str, str, Run]:
        """`/workflow do command: run …` that starts a run: (run id, thread id, run at rest)."""
        mark = len(self.fake.calls)
        self.command(text, who=who, channel_id=channel_id)
        run_id, thread = await self.thread_of_next_run(mark)
        return run_id, thread, await self.rested(run_id)

    async def rested(self, run_id: str) -> Run:
        return await self.baton.engine.wait(run_id, timeout=DEADLINE)

    async def posted_in(self, channel_id: str, text: str) -> Call:
        """A message created or edited in `channel_id` whose content contains `text`."""
        return (await self.fake.wait_for(lambda calls: [
            c for c in calls if f"channels/{channel_id}/messages" in c.path and text in c.content
            and c.method in ("POST", "PATCH")], DEADLINE))[0]

    def buttons_in(self, run_id: str) -> set[str]:
        """Enabled buttons of every message, restricted to those about `run_id`."""
        return {cid for m in self.fake.messages.values() for cid in custom_ids(m["components"], enabled=True)
                if run_id in cid or "=" in cid or "#" in cid}


def menus(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The select menus (component type 3) of a message."""
    return [c for row in rows for c in row.get("components", []) if c.get("type") == 3]


def custom_ids(rows: list[dict[str, Any]], *, enabled: bool = False) -> list[str]:
    return [b["custom_id"] for row in rows for b in row.get("components", [])
            if "custom_id" in b and not (enabled and b.get("disabled"))]


@asynccontextmanager
async def discord_bot(
    fake: FakeDiscord, settings: Settings, *, environ: Mapping[str, str] | None = None, **options: Any
) -> AsyncIterator[DiscordBot]:
    """A Baton process (engine running) with a logged-in Discord client that has seen its guild;
    `environ`: the operator's environment its runtime is assembled from (this process's by default)."""
    baton = build_baton(settings, environ=environ)
    try:
        async with baton.running(handle_signals=False):
            client = build_client(baton, settings, **options)  # sync="changed" unless told
            await client.login("test-token")  # GET /users/@me, application info, command sync
            client._connection.parse_guild_create(guild_create())  # type: ignore[arg-type]
            try:
                yield DiscordBot(fake, baton, client)
            finally:
                await client.close()
    finally:
        baton.close()


def since(start: float) -> float:
    return time.monotonic() - start
