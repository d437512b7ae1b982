"""Approvals through Discord: which gate a reply addresses, and the gate's buttons once it is
decided. Gateway payloads into the real discord.py client; what Discord received, from the fake."""

from __future__ import annotations

from typing import Any

from core.store.records import RunStatus
from tests.e2e.discord.fake_discord import BOT_USER, CHANNEL_ID
from tests.e2e.discord.gateway import ANA, BOB, bot_mention
from tests.e2e.discord.harness import DEADLINE, DiscordBot, custom_ids, menus

DECIDED = "Approved the gate"


def mention(bot: DiscordBot, channel_id: str, text: str, *, who: dict[str, Any] = BOB) -> None:
    bot.say(channel_id, f"{bot_mention()} {text}", who=who, mentions=[BOT_USER])


async def withdrawn(bot: DiscordBot, message_id: str, said: str) -> dict[str, Any]:
    """The message, once edited to say who decided its gate and to offer no buttons."""
    def edited(_: object) -> dict[str, Any] | None:
        message = bot.fake.messages[message_id]
        return message if said in message["content"] and not message["components"] else None

    return await bot.fake.wait_for(edited, DEADLINE)


async def paused(bot: DiscordBot, text: str) -> tuple[str, str, str]:
    """(run id, thread, id of its gate message) of a run that waits at its gate."""
    run_id, thread, run = await bot.start(text)
    assert run.status == "paused"
    await bot.posted_in(thread, "waits for approval")
    gate = bot.message_with(thread, "waits for approval")
    assert len(custom_ids(gate["components"], enabled=True)) == 2
    return run_id, thread, gate["id"]


async def test_a_mention_or_reply_in_another_runs_thread_never_decides_this_run(bot: DiscordBot) -> None:
    hello, hello_thread, done = await bot.start('run notes "hi"')
    assert done.status == "completed"
    deploy, deploy_thread, _ = await paused(bot, 'run gated "v1"')
    mark = len(bot.fake.calls)

    bot.say(hello_thread, "lgtm", who=BOB)
    mention(bot, hello_thread, "lgtm")
    await bot.posted_in(hello_thread, "Nothing waits")  # the answer to the mention, in that thread
    probe = bot.command(f"status {deploy}")
    (status,) = await bot.answers(probe)
    assert "paused" in status.content
    assert bot.baton.store.runs.get_run(deploy).status is RunStatus.PAUSED
    assert not [c for c in bot.fake.calls[mark:] if DECIDED in c.content or "shipped" in c.content]

    mention(bot, deploy_thread, "lgtm")
    decided = await bot.posted_in(deploy_thread, DECIDED)
    assert deploy in decided.content
    assert (await bot.rested(deploy)).status is RunStatus.COMPLETED
    assert not [c for c in bot.fake.calls[mark:] if DECIDED in c.content and hello_thread in c.path]
    assert hello != deploy


async def test_the_gate_message_loses_its_buttons_after_a_decision_by_reply(bot: DiscordBot) -> None:
    run_id, thread, gate = await paused(bot, 'run gated "v1"')
    bot.say(thread, "what does it ship?", who=BOB)
    await bot.posted_in(thread, "could not tell")
    question = bot.message_with(thread, "could not tell")
    assert len(custom_ids(question["components"], enabled=True)) == 2

    bot.say(thread, "lgtm 👍", who=BOB)

    said = f"Approved by <@{BOB['id']}>"
    await withdrawn(bot, gate, said)
    await withdrawn(bot, question["id"], said)
    assert (await bot.rested(run_id)).status is RunStatus.COMPLETED


async def test_the_gate_message_loses_its_buttons_after_a_decision_by_command(bot: DiscordBot) -> None:
    approved, _, approved_gate = await paused(bot, 'run gated "v1"')
    rejected, _, rejected_gate = await paused(bot, 'run gated "v2" --force')

    bot.command(f"approve {approved}", who=BOB)
    bot.command(f"reject {rejected} not this one", who=BOB)

    edited = await withdrawn(bot, approved_gate, f"Approved by <@{BOB['id']}>")
    assert "Reply here" not in edited["content"]
    await withdrawn(bot, rejected_gate, f"Rejected by <@{BOB['id']}>")
    assert (await bot.rested(approved)).status is RunStatus.COMPLETED
    assert (await bot.rested(rejected)).status is RunStatus.CANCELLED


async def test_six_waiting_gates_are_a_select_menu_and_a_choice_decides_one(bot: DiscordBot) -> None:
    runs = [(await paused(bot, f'run gated "v{i}" --force')) for i in range(6)]

    mention(bot, CHANNEL_ID, "lgtm", who=ANA)  # in the channel: every gate waiting here

    await bot.posted_in(CHANNEL_ID, "6 runs wait for approval here")
    which = bot.message_with(CHANNEL_ID, "6 runs wait for approval here")
    assert [c for c in custom_ids(which["components"]) if c.startswith("baton:")] == []  # no buttons
    [select] = menus(which["components"])
    assert sorted(bot.commands_of(select)) == sorted(f"approve {run_id}" for run_id, _, _ in runs)

    third, third_thread, third_gate = runs[2]
    bot.choose(which["id"], 0, f"approve {third}", who=ANA)

    await bot.posted_in(third_thread, "shipped")
    assert (await bot.rested(third)).status is RunStatus.COMPLETED
    said = f"Approved by <@{ANA['id']}>"

    def left(_: object) -> dict[str, Any] | None:
        message = bot.fake.messages[which["id"]]
        return message if said in message["content"] else None

    edited = await bot.fake.wait_for(left, DEADLINE)
    [select] = menus(edited["components"])
    assert sorted(bot.commands_of(select)) == sorted(f"approve {r}" for r, _, _ in runs if r != third)
    await withdrawn(bot, third_gate, said)
    statuses = [bot.baton.store.runs.get_run(r).status for r, _, _ in runs]
    assert statuses.count(RunStatus.PAUSED) == 5
