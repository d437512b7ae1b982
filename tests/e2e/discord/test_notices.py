"""Notices on Discord (discord.py with gateway payloads, the fake API, `build_baton`): a run that
fails in one channel is told once in the channel subscribed to its workflow and never in its
own channel or thread; `unsubscribe` stops it."""

from __future__ import annotations

from typing import Any

from tests.e2e.discord.fake_discord import CHANNEL_ID, text_channel
from tests.e2e.discord.harness import DiscordBot

ALERTS = "1100000000000000099"
NOTICE = "started by"  # every notice's line says who started the run


def _notices(bot: DiscordBot) -> list[dict[str, Any]]:
    return [m for m in bot.fake.messages.values() if NOTICE in m["content"]]


async def test_a_failure_is_told_once_in_the_subscribed_channel_until_unsubscribed(bot: DiscordBot) -> None:
    bot.fake.channels[ALERTS] = text_channel(ALERTS)
    subscribed = bot.command("subscribe flaky failed", channel_id=ALERTS)
    [answer] = await bot.answers(subscribed)
    assert "now hears about runs of **flaky**" in answer.json["content"]
    bot.command("subscribe flaky failed")  # the run's own channel: never echoed
    run_id, thread, run = await bot.start("run flaky please fail")
    assert run.status.value == "failed"
    await bot.posted_in(ALERTS, NOTICE)
    await bot.baton.handler.drain()
    [notice] = _notices(bot)
    assert notice["channel_id"] == ALERTS and thread != ALERTS
    assert f"run `{run_id}` failed at **check**" in notice["content"]
    assert "asked to fail" in notice["content"] and f"<#{thread}>" in notice["content"]  # where it reports

    gone = bot.command("unsubscribe flaky", channel_id=ALERTS)
    [answer] = await bot.answers(gone)
    assert "no longer hears about **flaky**" in answer.json["content"]
    again, _, rested = await bot.start("run flaky --force fail again")
    assert rested.status.value == "failed" and again != run_id
    await bot.baton.handler.drain()
    assert _notices(bot) == [notice] and CHANNEL_ID != ALERTS
