"""One Baton process serving Slack and Discord at once (`build_baton`, the real Bolt app over
HTTP to the mock Slack Web API, the real discord.py client to the fake Discord): a gate's
reminder reaches each approver directly on their own platform, which need not be the run's.
Once the gate is decided, every message that offered its buttons stops offering them on the
platform it was sent on: a Slack run's reminder DM'd on Discord, a Discord run's DM'd on Slack.
Deadlines are fired with a controlled time (`GateDeadlines.tick(now)`), as the bot's loop does."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from adapters.discord import build_client, discord
from adapters.slack import build_bridge
from adapters.slack.http import SlackEndpoint
from bot.app import build_baton
from bot.http import bind
from bot.serve import http_server
from core.commands.deadlines import GateDeadlines
from core.config import Access, Settings
from core.delivery.button_refs import command_of, parse
from core.store.records import GateStatus, RunStatus
from tests.e2e.discord.fake_discord import GUILD_ID, Call, FakeDiscord
from tests.e2e.discord.gateway import BOB, dispatch_interaction, dm_button_click, guild_create
from tests.e2e.discord.harness import DEADLINE, DiscordBot, custom_ids
from tests.e2e.slack.conftest import BOT_TOKEN, SIGNING_SECRET, SlackE2E
from tests.e2e.slack.harness import ANA, SlackHarness
from tests.e2e.slack.mock_slack import Call as SlackCall
from tests.e2e.slack.mock_slack import MockSlack, dm_of
from tests.e2e.slack.steps import COMPLETED, WAITING, start, wait_in_thread

CAROL = "U0CAROL"  # a Slack approver
HOUR = 3600.0
NAGGED = """
name: nagged
nodes:
  - id: review
    approval:
      question: "Ship it?"
      approvers: [group:sre]
      timeout: 4h
      remind: [1h]
  - id: ship
    depends_on: [review]
    bash: printf shipped
    replay: pure
"""


@dataclass
class Both:
    slack: SlackE2E
    discord: DiscordBot

    def deadlines(self) -> GateDeadlines:
        assert self.slack.baton.deadlines is not None
        return self.slack.baton.deadlines.deadlines


@pytest.fixture
def settings(tmp_path: Path, sqlite_url: str) -> Settings:
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    (workflows / "nagged.yaml").write_text(textwrap.dedent(NAGGED))
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=sqlite_url, workflow_dirs=[workflows], data_dir=tmp_path / "data", tool_modules=[],
        prompt_provider="fake", discord_guild_id=int(GUILD_ID),
        access=Access.model_validate({
            "groups": {"sre": [f"discord:{BOB['id']}", f"slack:{CAROL}"]},
            "run": {"*": [f"slack:{ANA}", f"discord:{BOB['id']}"]}}),
        slack_bot_token=BOT_TOKEN,  # type: ignore[arg-type]
        slack_signing_secret=SIGNING_SECRET,  # type: ignore[arg-type]
    )  # fmt: skip


@asynccontextmanager
async def both_platforms(settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                         ) -> AsyncIterator[Both]:
    fake, mock = FakeDiscord(), MockSlack()
    monkeypatch.setattr(discord.http.Route, "BASE", await fake.start())
    await mock.start()
    baton = build_baton(settings)
    try:
        async with baton.running(handle_signals=False, grace=2.0):
            web = AsyncWebClient(token=BOT_TOKEN, base_url=mock.base_url)
            bridge = build_bridge(baton, settings, client=web)
            endpoint = SlackEndpoint(bridge)
            endpoint.open()
            async with http_server(baton, settings, bind("127.0.0.1", 0), slack=endpoint) as port:
                harness = SlackHarness(f"http://127.0.0.1:{port}/slack/events", SIGNING_SECRET, mock)
                client = build_client(baton, settings)
                await client.login("test-token")
                client._connection.parse_guild_create(guild_create())  # type: ignore[arg-type]
                try:
                    slack = SlackE2E(harness, mock, bridge, baton, tmp_path)
                    yield Both(slack, DiscordBot(fake, baton, client))
                finally:
                    await client.close()
                    await harness.close()
            await bridge.sender.delivery.idle()
    finally:
        baton.close()
        await mock.stop()
        await fake.stop()
    assert not fake.violations, f"sent without AllowedMentions.none(): {fake.violations}"


@pytest.fixture
async def both(settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Both]:
    async with both_platforms(settings, tmp_path, monkeypatch) as running:
        yield running


def _button(bot: DiscordBot, message: dict[str, Any], command: str) -> str:
    for cid in custom_ids(message["components"], enabled=True):
        ref = parse(cid)
        if ref is not None and command_of(ref, bot.baton.store.blobs.get_blob) == command:
            return cid
    raise AssertionError(f"no button runs {command!r}")


async def _discord_dm(bot: DiscordBot, who: dict[str, Any], text: str, after: int) -> dict[str, Any]:
    """The message the bot posted to `who` in their Discord DM after call `after`, as Discord holds it."""
    def found(calls: list[Call]) -> dict[str, Any] | None:
        dms = {i for i, ch in bot.fake.channels.items()
               if ch.get("type") == 1 and str(ch["recipients"][0]["id"]) == who["id"]}
        posted = [c for c in calls[after:] if c.method == "POST" and c.path.split("/")[1] in dms
                  and c.path.endswith("/messages") and text in c.content]
        return next((m for m in bot.fake.messages.values() if posted and m["channel_id"] in dms
                     and text in m["content"]), None)

    return await bot.fake.wait_for(found, DEADLINE)


async def test_a_slack_runs_reminder_dmed_on_discord_is_withdrawn_when_the_gate_is_approved_in_slack(
    both: Both,
) -> None:
    slack, bot = both.slack, both.discord
    paused = await start(slack, "run nagged", rests_with=WAITING)
    run = slack.baton.store.runs.get_run(paused.run_id)
    assert run.platform == "slack"
    gate = slack.baton.store.gates.get_gate(paused.run_id, "review")

    slack_mark, discord_mark = len(slack.mock.calls), len(bot.fake.calls)
    [reminded] = await both.deadlines().tick(now=gate.created_at + HOUR)
    assert reminded.to == (f"discord:{BOB['id']}", f"slack:{CAROL}")

    def reminders(calls: list[SlackCall]) -> list[SlackCall] | None:
        found = [c for c in calls[slack_mark:] if c.method == "chat.postMessage" and "Reminder" in c.text]
        return found if len(found) >= 2 else None

    slack_offers: list[SlackCall] = [paused.rest, *await slack.mock.wait_for(reminders)]
    assert {str(c.body["channel"]) for c in slack_offers} == {"C0OPS", CAROL}
    dm = await _discord_dm(bot, BOB, "Reminder", discord_mark)
    assert _button(bot, dm, f"approve {paused.run_id}")  # Bob is offered the decision on Discord

    # Carol approves with the gate message's button, in Slack
    mark = len(slack.mock.calls)
    clicked = await slack.slack.click(paused.rest, "approve", user=CAROL)
    assert clicked.status == 200
    await wait_in_thread(slack, paused.thread, COMPLETED, after=mark)
    decided = slack.baton.store.gates.get_gate(paused.run_id, "review")
    assert (decided.status, decided.decided_by) == (GateStatus.APPROVED, f"slack:{CAROL}")

    def withdrawn_on_discord(_: object) -> dict[str, Any] | None:
        now = bot.fake.messages[dm["id"]]
        return now if not custom_ids(now["components"], enabled=True) else None

    now = await bot.fake.wait_for(withdrawn_on_discord, DEADLINE)
    assert f"Approved by slack:{CAROL}" in now["content"]  # who decided, from the other platform

    def withdrawn_on_slack(calls: list[SlackCall]) -> list[SlackCall] | None:
        edits = {c.body.get("ts"): c for c in calls[mark:]
                 if c.method == "chat.update" and f"Approved by name-of-{CAROL}" in c.text}
        return [edits[c.ts] for c in slack_offers] if all(c.ts in edits for c in slack_offers) else None

    for message, edit in zip(slack_offers, await slack.mock.wait_for(withdrawn_on_slack), strict=True):
        assert edit.buttons == [] and edit.menus == []
        assert edit.body["channel"] == dm_of(message.body["channel"])


async def test_a_discord_runs_reminder_dmed_on_slack_is_withdrawn_when_the_gate_is_approved_on_discord(
    both: Both,
) -> None:
    slack, bot = both.slack, both.discord
    run_id, thread, run = await bot.start("run nagged", who=BOB)
    assert (run.status, run.platform) == (RunStatus.PAUSED, "discord")
    await bot.posted_in(thread, "waits for approval")
    gate_message = bot.message_with(thread, "waits for approval")
    gate = slack.baton.store.gates.get_gate(run_id, "review")

    slack_mark, discord_mark = len(slack.mock.calls), len(bot.fake.calls)
    [reminded] = await both.deadlines().tick(now=gate.created_at + HOUR)
    assert reminded.to == (f"discord:{BOB['id']}", f"slack:{CAROL}")
    to_carol = await slack.mock.wait_call("chat.postMessage", "Reminder", after=slack_mark)
    assert to_carol.body["channel"] == CAROL and to_carol.button("approve")["value"] == f"approve {run_id}"
    await bot.posted_in(thread, "Reminder")
    dm = await _discord_dm(bot, BOB, "Reminder", discord_mark)

    # Bob approves with the button of his Discord DM
    mark = len(slack.mock.calls)
    click = dm_button_click(bot.fake, dm["id"], _button(bot, dm, f"approve {run_id}"), who=BOB)
    dispatch_interaction(bot.client, click)
    await bot.acknowledged(click)
    await bot.posted_in(thread, " completed in ")
    assert slack.baton.store.gates.get_gate(run_id, "review").decided_by == f"discord:{BOB['id']}"

    def withdrawn_on_discord(_: object) -> list[dict[str, Any]] | None:
        now = [bot.fake.messages[m["id"]] for m in (gate_message, dm)]
        return now if all(not custom_ids(m["components"], enabled=True) for m in now) else None

    for message in await bot.fake.wait_for(withdrawn_on_discord, DEADLINE):
        assert f"Approved by <@{BOB['id']}>" in message["content"]
    edit = await slack.mock.wait_call("chat.update", "Approved by", after=mark)
    assert (edit.body["channel"], edit.body["ts"]) == (dm_of(CAROL), to_carol.ts)
    assert edit.buttons == [] and edit.menus == []
