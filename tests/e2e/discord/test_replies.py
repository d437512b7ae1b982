"""The message a run's thread gets when the run comes to rest, as Discord receives it: what ran,
what came from the cache and why, time and tokens; or the failing step, its error and what next."""

from __future__ import annotations

import re

from tests.e2e.discord.harness import DiscordBot, custom_ids


async def test_completion_then_a_resume_from_it_served_from_the_cache(bot: DiscordBot) -> None:
    run_id, thread, run = await bot.start('run notes "v1"')
    assert run.status == "completed"
    text = (await bot.posted_in(thread, " completed in ")).content
    assert "Ran: **collect** (no earlier result), **draft** (no earlier result)" in text
    used = int(re.search(r"Tokens: (\d+) used, 0 saved", text).group(1))  # type: ignore[union-attr]
    assert used > 0

    _, again_thread, _ = await bot.start(f'run notes --resume-from {run_id} "v1"')
    again = (await bot.posted_in(again_thread, " completed in ")).content
    assert "Ran: nothing" in again
    assert re.search(r"From cache: \*\*collect\*\* \([^)]+\), \*\*draft\*\* \([^)]+\)", again)
    assert f"Tokens: 0 used, {used} saved by the cache." in again


async def test_a_failure_names_the_step_its_error_and_what_to_do_next(bot: DiscordBot) -> None:
    run_id, thread, run = await bot.start('run flaky "please fail"')
    assert run.status == "failed"
    failed = await bot.posted_in(thread, "Next: fix the step")

    assert "failed at **check**" in failed.content
    assert "asked to fail" in failed.content  # the tail of the step's stderr
    for command in ("resume", "plan", "abandon"):
        assert f"`/workflow {command} {run_id}`" in failed.content
        assert f"baton:{command}:{run_id}" in custom_ids(failed.json["components"])
