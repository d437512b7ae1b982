"""`/workflow` as subcommands through the real CommandTree: typed options, autocomplete, forms
as modals, intents, command sync only when the tree changed, and failures told to the user."""

from __future__ import annotations

import time

import discord

from adapters.discord.client import intents
from core.config import Settings
from tests.e2e.discord.fake_discord import CHANNEL_ID, FakeDiscord, text_channel, thread_channel
from tests.e2e.discord.gateway import (
    ANA,
    BOB,
    MALLORY,
    bot_mention,
    button_click,
    dispatch_interaction,
    dispatch_message,
    message_create,
    modal_submit,
)
from tests.e2e.discord.harness import DiscordBot, custom_ids, discord_bot

OTHER_CHANNEL = "1100000000000000099"


async def test_run_with_typed_options_is_the_command_they_spell(bot: DiscordBot) -> None:
    payload = bot.subcommand("run", name="flaky", message='say "hi"  twice', force=True)

    (answer,) = await bot.answers(payload)
    assert "Started" in answer.content
    [run] = bot.baton.store.runs.recent_runs(platform="discord")
    assert bot.baton.engine.args_of(run) == {"message": 'say "hi"  twice'}  # exactly as typed
    audit = [e.details for e in bot.baton.store.events.audit_log(run.id) if e.action == "command"]
    assert audit[0]["text"] == 'run flaky --force "say \\"hi\\"  twice"'
    await bot.rested(run.id)


async def test_set_option_and_the_other_subcommands_reach_the_core_as_typed(bot: DiscordBot) -> None:
    (told,) = await bot.answers(bot.subcommand("run", name="deploy", set="service=web replicas=03"))
    assert told.json["flags"] & 64 and "input `replicas` must be an integer" in told.content

    (usage,) = await bot.answers(bot.subcommand("help", command="abandon"))
    assert "/workflow abandon <run> [reason]" in usage.content


async def test_workflow_names_are_offered_to_whoever_may_run_them(bot: DiscordBot) -> None:
    offered = await bot.choices("run", "name", name="fl")

    assert offered[0]["value"] == "flaky" and offered[0]["name"].startswith("flaky — ")
    assert await bot.choices("run", "name", who=MALLORY, name="") == []  # may run nothing


async def test_run_ids_offered_are_this_channels_runs_the_user_may_see_and_the_command_acts_on(
    bot: DiscordBot,
) -> None:
    paused, _, _ = await bot.start('run gated "v1"')
    done, _, _ = await bot.start('run notes "n"')
    bot.fake.channels[OTHER_CHANNEL] = text_channel(OTHER_CHANNEL)
    bot.client._connection.parse_channel_create(text_channel(OTHER_CHANNEL))  # type: ignore[arg-type]
    elsewhere, _, _ = await bot.start('run notes "elsewhere"', channel_id=OTHER_CHANNEL)

    approvable = [c["value"] for c in await bot.choices("approve", "run", run="")]
    viewable = [c["value"] for c in await bot.choices("status", "run", run="")]
    typed = [c["value"] for c in await bot.choices("status", "run", run=done[:4])]

    assert approvable == [paused]  # only a paused run can be approved
    assert viewable == [done, paused] and elsewhere not in viewable  # this channel's, newest first
    assert typed == [done]
    assert await bot.choices("status", "run", who=MALLORY, run="") == []  # may see none of them
    assert [c["value"] for c in await bot.choices("status", "run", channel_id=OTHER_CHANNEL, run="")] == [
        elsewhere]


async def test_a_run_missing_inputs_opens_a_modal_and_its_submission_starts_it(bot: DiscordBot) -> None:
    payload = bot.subcommand("run", name="deploy", message="go", set="replicas=3")

    modal = await bot.acknowledged(payload)
    assert modal.json["type"] == 9  # MODAL: the first answer, no "thinking…" first
    inputs = {c["custom_id"]: c for row in modal.json["data"]["components"] for c in row["components"]}
    assert list(inputs) == ["field:service", "field:replicas", "field:environment"]
    assert inputs["field:service"]["required"] and inputs["field:replicas"]["value"] == "3"
    assert inputs["field:environment"]["placeholder"] == "one of: staging, production"

    refused = bot.submit({"service": "web", "replicas": "3", "environment": "prod"})
    told = (await bot.acknowledged(refused)).json  # the answer itself (type 4), for Ana alone
    assert told["type"] == 4 and told["data"]["flags"] & 64
    assert "environment: input `environment` must be one of" in told["data"]["content"]
    assert [b for b in custom_ids(told["data"]["components"]) if b.startswith("baton:form:")]  # Run… again
    assert bot.baton.store.runs.recent_runs(platform="discord") == []

    await bot.acknowledged(bot.subcommand("run", name="deploy", message="go", set="replicas=3", who=BOB))
    values = {"service": "web", "replicas": "3", "environment": "production"}
    (started,) = await bot.answers(bot.submit(values, who=BOB))
    assert "Started" in started.content
    [run] = bot.baton.store.runs.recent_runs(platform="discord")
    assert run.requester == f"discord:{BOB['id']}"
    assert bot.baton.engine.args_of(run) == {"service": "web", "replicas": 3, "environment": "production",
                                             "message": "go"}
    await bot.rested(run.id)


async def test_where_no_modal_opens_the_reply_says_what_to_type_and_run_opens_it(bot: DiscordBot) -> None:
    bot.fake.fail_modals = 1

    (told,) = await bot.answers(bot.subcommand("run", name="deploy"))

    assert told.json["flags"] & 64 and "/workflow run deploy --set service=…" in told.content
    [run_button] = [cid for cid in custom_ids(told.json["components"]) if cid.startswith("baton:form:")]
    click = bot.click(run_button)
    modal = await bot.acknowledged(click)
    assert modal.json["type"] == 9 and modal.json["data"]["title"] == "Run deploy"
    assert bot.baton.store.runs.recent_runs(platform="discord") == []


async def test_a_failed_answer_is_told_to_the_user_never_left_thinking(bot: DiscordBot) -> None:
    bot.fake.fail_answers = 1  # Discord refuses the first edit of the "thinking…" placeholder

    payload = bot.command("help")

    original = f"webhooks/{payload['application_id']}/{payload['token']}/messages/@original"
    told = await bot.fake.wait_for(lambda calls: [
        c for c in calls if c.method == "PATCH" and c.path == original and "unexpected" in c.content])
    assert told[0].content.startswith("⚠️ Something unexpected went wrong")


def test_the_intents_are_what_baton_uses_and_no_more() -> None:
    wanted = intents()

    assert wanted == discord.Intents(guilds=True, guild_messages=True, dm_messages=True, message_content=True)
    assert not (wanted.typing or wanted.voice_states or wanted.presences or wanted.members)


async def test_commands_are_synced_only_when_the_tree_changed(
    fake_discord: FakeDiscord, settings: Settings
) -> None:
    async with discord_bot(fake_discord, settings) as first:
        assert first.client.synced is not None
    assert len(fake_discord.find("PUT", "/commands")) == 1

    async with discord_bot(fake_discord, settings) as again:  # a restart: nothing changed
        assert again.client.synced is None
    assert len(fake_discord.find("PUT", "/commands")) == 1

    async with discord_bot(fake_discord, settings, sync="always"):  # `baton discord sync`
        pass
    assert len(fake_discord.find("PUT", "/commands")) == 2


async def test_chatter_in_a_thread_without_a_run_leaves_nothing_behind(bot: DiscordBot) -> None:
    thread = thread_channel(bot.fake.snowflake(), CHANNEL_ID, "chatter")
    bot.fake.channels[thread["id"]] = thread
    bot.client._connection.parse_thread_create(thread)  # type: ignore[arg-type]
    bot.baton.store.events.forget_events(time.time() + 60)  # nothing kept so far

    for n in range(200):
        dispatch_message(bot.client, message_create(bot.fake, thread["id"], f"chatter {n}", who=ANA))
    dispatch_message(bot.client, message_create(bot.fake, thread["id"], f"{bot_mention()} hi", who=ANA))
    await bot.posted_in(thread["id"], "")  # the mention is answered: the chatter before it is done

    assert bot.baton.store.events.forget_events(time.time() + 60) == 1  # the mention's; none of the 200


async def test_a_click_or_form_baton_cannot_act_on_is_still_answered_privately(bot: DiscordBot) -> None:
    """A button of another app, a malformed `baton:` one, and a form no longer open (opened before
    a restart): each told privately, never left as "This interaction failed"."""
    await bot.answers(bot.command("help"))
    message = next(iter(bot.fake.messages))  # a message of the bot's, showing buttons Baton
    foreign = ("poll:vote:3", "baton:approve:not a run!", "baton:approve:#abc")  # cannot act on
    bot.fake.messages[message]["components"] = [{"type": 1, "components": [
        {"type": 2, "style": 2, "label": "?", "custom_id": cid} for cid in foreign]}]
    for custom_id in (*foreign, "baton:resume:not-on-the-message"):
        payload = button_click(bot.fake, message, custom_id)
        dispatch_interaction(bot.client, payload)
        told = (await bot.acknowledged(payload)).json
        assert told["type"] == 4 and told["data"]["flags"] & 64, custom_id  # answered, privately
        assert "not one Baton can act on" in told["data"]["content"]
    closed = modal_submit(bot.fake, "baton-form:0123abcd", {"field:service": "web"})
    dispatch_interaction(bot.client, closed)
    told = (await bot.acknowledged(closed)).json
    assert told["type"] == 4 and told["data"]["flags"] & 64
    assert "This form is no longer open" in told["data"]["content"]
    assert bot.baton.store.runs.recent_runs(platform="discord") == []
