"""Before a run starts from a channel, Baton checks the interaction's app permissions and
context (real interaction payloads through discord.py): where it cannot post, nothing starts
and the user alone is told what to ask for."""

from __future__ import annotations

import discord
import pytest

from tests.e2e.discord.gateway import ALL_PERMISSIONS
from tests.e2e.discord.harness import DiscordBot


def _without(*names: str) -> str:
    granted = discord.Permissions(int(ALL_PERMISSIONS))
    for name in names:
        setattr(granted, name, False)
    return str(granted.value)


async def _refused(bot: DiscordBot, **place: object) -> str:
    payload = bot.command('run gated "v1"', **place)
    answer = await bot.acknowledged(payload)
    body = answer.json
    assert body["type"] == 4 and body["data"]["flags"] & 64  # answered at once, to the user alone
    assert not [c for c in bot.fake.calls if c.path.endswith("/threads") or c.path.endswith("/messages")]
    assert bot.baton.store.runs.recent_runs(platform="discord") == []  # nothing started
    text: str = body["data"]["content"]
    assert len(text.splitlines()) == 2  # cause, then next step
    return text


@pytest.mark.parametrize(
    ("missing", "says"),
    [
        (("send_messages",), "Send Messages"),  # 50013 on every post: caught before the run
        (("view_channel", "send_messages"), "View Channel, Send Messages"),  # 50001 Missing Access
        (("attach_files",), "Attach Files"),  # long outputs would be lost (413 / 50013)
    ],
)
async def test_missing_permissions_start_nothing_and_name_what_to_ask_for(
    bot: DiscordBot, missing: tuple[str, ...], says: str
) -> None:
    text = await _refused(bot, app_permissions=_without(*missing))
    assert says in text and "Edit Channel" in text


async def test_a_conversation_between_people_is_not_told_to_invite_anyone(bot: DiscordBot) -> None:
    text = await _refused(bot, context=2)  # a DM or group DM where Baton is a user's app
    assert "conversation between people" in text and "permission" not in text.lower()


async def test_without_the_thread_permission_a_run_still_starts_and_reports_in_the_channel(
    bot: DiscordBot,
) -> None:
    bot.fake.refuse_threads = True
    bot.command('run gated "v1"', app_permissions=_without("create_public_threads"))
    run = await bot.fake.wait_for(lambda _: bot.baton.store.runs.recent_runs(platform="discord"))
    assert run
