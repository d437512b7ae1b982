"""A reply crosses from the core to the adapter once (#27): from `/workflow run` to the run's
delivered completion, every call between `core/` and `adapters/discord/` is recorded; the adapter
never calls a delivery decision (places, edits, threads, follow-ups) back in the core, nor
anything while it posts (its buttons come laid out, their custom_ids made), and the core calls
it once per message it posts or edits."""

from __future__ import annotations

from tests.e2e.crossings import recorded
from tests.e2e.discord.harness import DiscordBot


async def test_a_run_to_its_completion_crosses_to_the_adapter_once_per_reply(bot: DiscordBot) -> None:
    mark = len(bot.fake.calls)
    with recorded("adapters.discord") as crossings:
        run_id, thread, _ = await bot.start('run notes "v2"')
        await bot.posted_in(thread, "completed in")
        await bot.baton.handler.drain()
        await bot.client.sender.delivery.idle()
    assert run_id
    sent = [c for c in bot.fake.calls[mark:] if c.method in ("POST", "PATCH") and "/messages" in c.path
            and c.content]
    assert crossings.decisions() == {}, crossings.callbacks()
    # the adapter hands the interaction to the core once (its command spelled from the typed
    # options) and calls nothing back: the answer, the buttons' custom_ids, are the core's
    assert crossings.callbacks() == {"core.commands.options.spell": 1,
                                     "core.commands.interactions.Interactions.command": 1}
    transport = crossings.to_adapter("adapters.discord.outbound.DiscordSender")
    assert transport.get("post", 0) + transport.get("edit", 0) == len(sent), (
        transport, [(c.method, c.path) for c in sent])
    print(f"\ndiscord: {len(sent)} messages; core -> adapter {transport}; "
          f"adapter -> core {crossings.callbacks()}")
