"""The "Open run" button on Discord: the clicker gets their own link, privately; the button stays."""

from __future__ import annotations

import re

from tests.e2e.discord.gateway import ANA, BOB
from tests.e2e.discord.harness import DiscordBot

LINK = re.compile(r"\[Open run\]\(<(http://[^>]+/r/[\w.\-]+)>\)")


async def link_for(bot: DiscordBot, run_id: str, who: dict[str, object]) -> str:
    click = bot.click(f"baton:open:{run_id}", who=who)
    token = click["token"]
    calls = await bot.fake.wait_for(lambda calls: [
        c for c in calls
        if token in c.path and c.method == "POST" and LINK.search(str(c.json.get("content")))])
    answer = calls[0].json
    assert answer.get("flags", 0) & 64, answer  # ephemeral: only the clicker sees it
    edits = [c for c in bot.fake.calls if token in c.path and c.method == "PATCH"
             and any(b.get("disabled") for row in c.json.get("components", []) for b in row["components"])]
    assert edits == []  # the button was not used up
    match = LINK.search(str(answer["content"]))
    assert match is not None
    return match.group(1)


async def test_each_clicker_gets_their_own_link_and_the_button_stays(bot: DiscordBot) -> None:
    run_id, _, run = await bot.start('run gated "v1"')
    assert run.status == "paused"
    mine = await link_for(bot, run_id, ANA)
    theirs = await link_for(bot, run_id, BOB)
    assert mine != theirs
