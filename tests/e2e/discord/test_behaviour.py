"""What Discord receives beyond the acceptance cases: deadlines, refusals, restarts, long
output, duplicates, threads, edits in place and mentions."""

from __future__ import annotations

import time

from core.config import Settings
from tests.e2e.discord.fake_discord import APP_ID, BOT_ID, BOT_USER, CHANNEL_ID, GUILD_ID, FakeDiscord, user
from tests.e2e.discord.gateway import ANA, BOB, MALLORY, bot_mention, dispatch_message
from tests.e2e.discord.harness import DiscordBot, custom_ids, discord_bot

NO_MENTIONS = {"parse": []}


async def test_commands_are_deferred_within_three_seconds_then_answered(bot: DiscordBot) -> None:
    dispatched = time.monotonic()
    payload = bot.command("help")

    ack = await bot.acknowledged(payload)
    (answer,) = await bot.answers(payload)

    assert ack.json == {"type": 5} and ack.at - dispatched < 3.0
    assert "run" in answer.content and answer.json["allowed_mentions"] == NO_MENTIONS


async def test_a_run_lives_in_a_thread_with_one_progress_message_edited_in_place(bot: DiscordBot) -> None:
    run_id, thread, run = await bot.start('run gated "v1"')
    assert run.status == "paused"
    assert bot.fake.channels[thread]["parent_id"] == CHANNEL_ID  # opened from the command's answer

    await bot.posted_in(thread, "Ship v1?")
    await bot.posted_in(thread, "— **paused**")  # the progress table, already in the thread
    (approved,) = await bot.answers(bot.command(f"approve {run_id}", channel_id=thread))
    assert "approved" in approved.content.lower()
    final = await bot.posted_in(thread, "— **completed**")  # the progress table's last state
    progress_posts = [c for c in bot.fake.find("POST", f"channels/{thread}/messages", "— **")
                      if run_id in c.content]
    assert len(progress_posts) == 1  # posted once …
    (progress_id,) = [m["id"] for m in bot.fake.messages.values()
                      if m["channel_id"] == thread and "— **" in m["content"]]
    assert (final.method, final.path) == ("PATCH", f"channels/{thread}/messages/{progress_id}")  # … edited
    in_channel = [c for c in bot.fake.calls if c.path == f"channels/{CHANNEL_ID}/messages"]
    assert not in_channel  # nothing but the command's answer in the channel


async def test_a_command_typed_in_a_run_thread_belongs_to_the_channel_conversation(bot: DiscordBot) -> None:
    paused, thread, _ = await bot.start('run gated "v1"')

    (answer,) = await bot.answers(bot.command('run gated "v2"', channel_id=thread))

    assert f"baton:approve:{paused}" in custom_ids(answer.json["components"])  # the prompt, not a run
    assert [r.id for r in bot.baton.store.runs.recent_runs(platform="discord")] == [paused]


async def test_an_unauthorized_click_is_refused_privately_and_nothing_resumes(bot: DiscordBot) -> None:
    paused, thread, _ = await bot.start('run gated "v1"')
    await bot.posted_in(thread, "Ship v1?")

    click = bot.click(f"baton:approve:{paused}", who=MALLORY)

    ack = await bot.acknowledged(click)
    (refusal,) = await bot.answers(click)
    assert ack.json == {"type": 6}
    assert refusal.json["flags"] & 64  # ephemeral: only Mallory sees it
    assert "approver" in refusal.content
    # Mallory shown as a mention, never pinged: the message allows no mentions
    assert f"<@{MALLORY['id']}> is not an approver" in refusal.content
    assert refusal.json["allowed_mentions"] == NO_MENTIONS
    assert not [c for c in bot.fake.calls if c.method == "PATCH" and click["token"] in c.path]
    assert bot.baton.store.runs.get_run(paused).status == "paused"
    assert f"baton:approve:{paused}" in bot.buttons_in(paused)  # still usable by an approver


async def test_a_button_still_works_after_a_restart(fake_discord: FakeDiscord, settings: Settings) -> None:
    async with discord_bot(fake_discord, settings) as first:
        failed, _, _ = await first.start('run flaky "A fail"')
        (answer,) = await first.answers(first.command('run flaky "B"'))
        (force,) = [cid for cid in custom_ids(answer.json["components"]) if cid.startswith("baton:force:")]

    async with discord_bot(fake_discord, settings) as second:  # a new process on the same database
        mark = len(fake_discord.calls)
        second.click(force, who=BOB)
        fresh, thread = await second.thread_of_next_run(mark)
        run = await second.rested(fresh)

        assert fresh != failed and run.status == "completed"
        assert second.baton.engine.args_of(run)["message"] == "B"
        await second.posted_in(thread, "got B")


async def test_a_10_kb_output_reaches_discord_whole(bot: DiscordBot) -> None:
    _, thread, run = await bot.start("run bigoutput")
    assert run.status == "completed"

    sent = await bot.fake.wait_for(lambda calls: [
        c for c in calls if c.path == f"channels/{thread}/messages" and (c.files or "2400" in c.content)])
    received = "".join(c.content + "".join(f.decode() for f in c.files.values()) for c in sent)
    assert all(len(c.content) <= 2000 for c in bot.fake.calls)
    numbers = {int(line) for line in received.splitlines() if line.strip().isdigit()}
    assert numbers == set(range(1, 2401))  # nothing lost


async def test_a_redelivered_interaction_is_processed_once(bot: DiscordBot) -> None:
    payload = bot.command('run gated "v1"')
    run_id, _ = await bot.thread_of_next_run(0)
    await bot.rested(run_id)

    bot.redeliver(payload)  # the gateway sends the same INTERACTION_CREATE again
    refused = await bot.fake.wait_for(lambda calls: [
        c for c in calls if f"interactions/{payload['id']}/" in c.path][1:])
    assert refused  # Discord refuses the second acknowledgement (40060)
    (status,) = await bot.answers(bot.command(f"status {run_id}"))  # later traffic still flows

    assert [r.id for r in bot.baton.store.runs.recent_runs(platform="discord")] == [run_id]
    assert len([c for c in bot.fake.calls if c.path.endswith("/threads")]) == 1
    assert len(bot.fake.find("PATCH", f"{payload['token']}/messages/@original")) == 1
    assert run_id in status.content


async def test_thread_replies_from_bots_are_ignored_and_mentions_are_stripped(bot: DiscordBot) -> None:
    paused, thread, _ = await bot.start('run gated "v1"')
    other_bot = user("3300000000000000001", "otherbot", bot=True)

    bot.say(thread, "approve", who=other_bot)
    bot.say(thread, "approve", who=BOT_USER)
    bot.say(thread, f"{bot_mention()} lgtm", who=BOB, mentions=[BOT_USER])

    await bot.posted_in(thread, "shipped")
    gate = bot.baton.store.gates.get_gate(paused, "review")
    assert gate.decided_by == f"discord:{BOB['id']}"
    assert BOT_ID not in (gate.comment or "")


async def test_the_same_thread_message_redelivered_decides_once(bot: DiscordBot) -> None:
    paused, thread, _ = await bot.start('run gated "v1"')
    reply = bot.say(thread, "lgtm")

    dispatch_message(bot.client, reply)  # gateway redelivery after a resume

    await bot.posted_in(thread, "shipped")
    await bot.rested(paused)
    decided = [e for e in bot.baton.store.events.audit_log(paused) if "approve" in e.action]
    assert len(decided) == 1, decided


async def test_nothing_the_bot_posts_can_ping(bot: DiscordBot) -> None:
    await bot.start('run flaky "@everyone <@2200000000000000002> fail"')

    posted = [c for c in bot.fake.calls if isinstance(c.json, dict) and "content" in c.json]
    assert posted
    assert all(c.json.get("allowed_mentions") == NO_MENTIONS for c in posted)  # so nothing pings:
    # mentions are shown as written, with no zero-width space breaking them
    assert any("@everyone" in c.content for c in posted)
    assert not any("\u200b" in c.content for c in posted)


async def test_the_command_is_synced_to_the_guild_when_configured(bot: DiscordBot) -> None:
    (sync,) = bot.fake.find("PUT", "/commands")

    assert sync.path == f"applications/{APP_ID}/guilds/{GUILD_ID}/commands"
    (command,) = sync.json
    assert command["name"] == "workflow"
    subcommands = {o["name"]: o for o in command["options"]}
    assert all(o["type"] == 1 for o in subcommands.values())  # /workflow <subcommand> …
    wanted = {"do", "run", "resume", "approve", "reject", "abandon", "status", "plan", "help"}
    assert wanted <= set(subcommands)
    verbatim = subcommands["do"]["options"]  # any chat command, as typed
    assert [(o["name"], o["type"], o["required"]) for o in verbatim] == [("command", 3, True)]


async def test_the_command_is_synced_globally_without_a_guild(
    fake_discord: FakeDiscord, settings: Settings
) -> None:
    async with discord_bot(fake_discord, settings.model_copy(update={"discord_guild_id": None})):
        (sync,) = fake_discord.find("PUT", "/commands")

    assert sync.path == f"applications/{APP_ID}/commands"


async def test_where_no_thread_can_be_opened_the_run_reports_in_the_channel_at_once(bot: DiscordBot) -> None:
    bot.fake.refuse_threads = True  # e.g. the bot lacks "Create Public Threads" there
    bot.baton.handler.progress.thread_wait = 120.0  # far beyond DEADLINE: only the adapter may release
    mark = len(bot.fake.calls)

    (answer,) = await bot.answers(bot.command('run gated "v1"'))

    assert "Started" in answer.content
    refused = await bot.fake.wait_for(lambda calls: [c for c in calls[mark:] if c.path.endswith("/threads")])
    assert refused
    waiting = await bot.posted_in(CHANNEL_ID, "Ship v1?")  # in the channel, well before thread_wait
    assert waiting.json["allowed_mentions"] == NO_MENTIONS
    run = bot.baton.store.runs.recent_runs(platform="discord")[0]
    assert run.thread is None and run.status == "paused"


async def test_where_the_answer_cannot_be_posted_the_run_starts_its_thread_from_the_channel(
    bot: DiscordBot,
) -> None:
    progress = bot.baton.handler.progress
    progress.thread_wait = 120.0  # far beyond DEADLINE: only the adapter may release
    bot.fake.refuse_answers = True  # e.g. the interaction token expired meanwhile

    bot.command('run gated "v1"')

    started = await bot.posted_in(CHANNEL_ID, "Started")  # the run's first message, in the channel
    assert started.json["allowed_mentions"] == NO_MENTIONS
    run_id, thread = await bot.thread_of_next_run(0)
    await bot.posted_in(thread, "Ship v1?")  # its story in its thread, well before thread_wait
    run = bot.baton.store.runs.get_run(run_id)
    assert run.thread == thread and run.status == "paused"
    assert progress._expected == set()  # no thread awaited for good


def _progress_messages(fake: FakeDiscord, thread: str) -> list[dict[str, object]]:
    return [m for m in fake.messages.values() if m["channel_id"] == thread and "— **" in m["content"]]


async def test_after_a_restart_the_progress_message_is_edited_in_place(
    fake_discord: FakeDiscord, settings: Settings
) -> None:
    async with discord_bot(fake_discord, settings) as first:
        run_id, thread, _ = await first.start('run gated "v1"')
        await first.posted_in(thread, "— **paused**")

    async with discord_bot(fake_discord, settings) as second:  # a new process on the same database
        (approved,) = await second.answers(second.command(f"approve {run_id}"))
        assert "approved" in approved.content.lower()
        final = await second.posted_in(thread, "— **completed**")

    (progress,) = _progress_messages(fake_discord, thread)
    assert (final.method, final.path) == ("PATCH", f"channels/{thread}/messages/{progress['id']}")


async def test_a_progress_message_deleted_in_discord_is_posted_again(bot: DiscordBot) -> None:
    run_id, thread, _ = await bot.start('run gated "v1"')
    await bot.posted_in(thread, "— **paused**")
    (deleted,) = _progress_messages(bot.fake, thread)
    del bot.fake.messages[str(deleted["id"])]  # someone deleted it in Discord

    await bot.answers(bot.command(f"approve {run_id}"))
    await bot.posted_in(thread, "— **completed")  # posted again, or posted again and edited

    (again,) = _progress_messages(bot.fake, thread)
    assert again["id"] != deleted["id"] and "completed" in str(again["content"])


async def test_two_concurrent_clicks_continue_the_run_once(bot: DiscordBot) -> None:
    paused, thread, _ = await bot.start('run gated "v1"')
    await bot.posted_in(thread, "Ship v1?")

    clicks = [bot.click(f"baton:approve:{paused}", who=who) for who in (ANA, BOB)]  # before either runs
    answers = [(await bot.answers(click))[0] for click in clicks]

    assert (await bot.rested(paused)).status == "completed"
    gate = bot.baton.store.gates.get_gate(paused, "review")
    winner, loser = (ANA, BOB) if gate.decided_by == f"discord:{ANA['id']}" else (BOB, ANA)
    assert gate.decided_by == f"discord:{winner['id']}"
    (refusal,) = [a for a in answers if a.json.get("flags", 0) & 64]  # only the loser, privately
    assert refusal.path.split("/")[2] == clicks[[ANA, BOB].index(loser)]["token"]
    assert f"already approved by <@{winner['id']}>" in refusal.content  # told who won, as a mention
    assert [r.id for r in bot.baton.store.runs.recent_runs(platform="discord")] == [paused]  # no second run


async def test_progress_messages_kept_in_memory_are_bounded_and_a_forgotten_one_is_still_edited(
    bot: DiscordBot,
) -> None:
    edits = bot.baton.handler.edits  # the core's edit component keeps where each message is
    edits.memory = 2
    paused, thread, _ = await bot.start('run gated "v1"')  # its progress message: posted first
    await bot.posted_in(thread, "— **paused**")
    later = []
    for n in range(3):
        run_id, other, _ = await bot.start(f'run notes "n{n}"')
        await bot.posted_in(other, "— **completed**")
        later.append(run_id)
    sender = bot.client.sender.delivery
    await bot.baton.handler.drain()
    await sender.idle()

    def kept() -> list[str]:
        return [key for platform, key in edits._posted if platform == "discord"]

    assert kept() == [f"progress:{run_id}" for run_id in later[-2:]]  # the newest two
    assert edits._locks == {}  # no lock outlives its holders

    await bot.answers(bot.command(f"approve {paused}"))  # forgotten here; its ids are in the store
    final = await bot.posted_in(thread, "— **completed**")
    (progress,) = _progress_messages(bot.fake, thread)  # no second progress message …
    assert (final.method, final.path) == ("PATCH", f"channels/{thread}/messages/{progress['id']}")  # edited
    await bot.baton.handler.drain()
    await sender.idle()
    assert len(edits._posted) == 2 and edits._locks == {}
