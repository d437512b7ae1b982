"""Schedules on Discord (gateway payloads into the real discord.py client, what the fake
Discord received): `/workflow schedule action:add rest:notes every 2s` fires while the bot
serves; each run opens its own thread from "⏰ Schedule … started …" in the channel where it
was added, and reports there (its progress saying which schedule started it); pause stops it."""

from __future__ import annotations

import re

from tests.e2e.discord.fake_discord import CHANNEL_ID
from tests.e2e.discord.harness import DiscordBot

_ID = re.compile(r"Schedule `(notes-[0-9a-f]{4})` added")


async def test_a_schedule_added_in_a_channel_reports_each_run_in_its_own_thread(bot: DiscordBot) -> None:
    (added,) = await bot.answers(bot.subcommand("schedule", action="add", rest="notes every 2s nightly"))
    found = _ID.search(added.content)
    assert found, added.content
    sid = found.group(1)
    mark = len(bot.fake.calls)
    run_id, thread = await bot.thread_of_next_run(mark)
    announced = await bot.posted_in(CHANNEL_ID, f"Schedule `{sid}` started")
    assert run_id in announced.content
    await bot.rested(run_id)
    await bot.posted_in(thread, "completed in")
    await bot.posted_in(thread, f"started by schedule `{sid}`")  # the progress message
    second, other = await bot.thread_of_next_run(len(bot.fake.calls))
    assert (second, other) != (run_id, thread)
    await bot.rested(second)

    (paused,) = await bot.answers(bot.subcommand("schedule", action="pause", rest=sid))
    assert "paused by" in paused.content
    await bot.baton.handler.drain()
    runs = [r for r in bot.baton.store.runs.recent_runs(limit=50) if r.started_by == f"schedule:{sid}"]
    assert len(runs) >= 2 and len({r.thread for r in runs}) == len(runs)
    assert all(r.platform == "discord" and r.conversation == CHANNEL_ID for r in runs)
    for run in runs:
        await bot.rested(run.id)
