"""How long a state-carrying reply takes to reach Discord: from the engine's "the run came to
rest" to the message that shows the completion, over several runs."""

from __future__ import annotations

from tests.e2e.discord.harness import DiscordBot
from tests.e2e.latency import Rested, percentiles

RUNS = 12


async def test_a_completion_reaches_discord_at_once(bot: DiscordBot) -> None:
    rested = Rested(bot.baton.engine)
    samples = []
    for index in range(RUNS):
        run_id, thread, _ = await bot.start(f'run notes "v{index}"')
        shown = await bot.posted_in(thread, "completed in")
        assert run_id in shown.content
        samples.append(shown.at - rested.at[run_id])
        await bot.baton.handler.drain()
        await bot.client.sender.delivery.idle()
    p50, p99 = percentiles(samples)
    print(f"\ndiscord delivery latency (run at rest -> completion posted), {RUNS} runs: "
          f"p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    assert p50 < 250, samples
