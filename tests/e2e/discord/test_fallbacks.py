"""When the run's thread cannot take a state-carrying message, it goes to the next place that
can (the channel, the follow-up of the command that started the run while its token lives,
then a direct message to whoever started the run), and the first one there says so; an
attachment Discord refuses as too large becomes messages. The fake Discord answers each
failure as Discord does."""

from __future__ import annotations

from tests.e2e.discord.fake_discord import CHANNEL_ID, Call
from tests.e2e.discord.gateway import ANA, BOB
from tests.e2e.discord.harness import DiscordBot

DELETED = (404, 10003)
NO_PERMISSION = (403, 50013)
NO_ACCESS = (403, 50001)


def _created(bot: DiscordBot, channel_id: str, text: str, after: int = 0) -> list[Call]:
    return [c for c in bot.fake.calls[after:] if c.method == "POST"
            and c.path == f"channels/{channel_id}/messages" and text in c.content]


async def _approve_after_losing_the_thread(
    bot: DiscordBot, *fails: tuple[str, tuple[int, int]]
) -> tuple[str, int]:
    run_id, thread, paused = await bot.start('run gated "v1"')
    assert paused.status == "paused"
    for channel, failure in fails:
        bot.fake.fail_channels[channel.replace("THREAD", thread)] = failure
    mark = len(bot.fake.calls)
    bot.command(f"approve {run_id}", who=BOB)
    await bot.fake.wait_for(lambda _: bot.baton.store.runs.get_run(run_id).status == "completed")
    return run_id, mark


async def test_a_deleted_thread_sends_the_completion_to_the_channel_and_says_so_once(
    bot: DiscordBot,
) -> None:
    run_id, mark = await _approve_after_losing_the_thread(bot, ("THREAD", DELETED))

    done = await bot.fake.wait_for(lambda _: _created(bot, CHANNEL_ID, "completed in", mark))
    notes = _created(bot, CHANNEL_ID, "could not post in the thread", mark)
    assert len(done) == 1 and len(notes) == 1 and notes[0].at <= done[0].at
    assert run_id in notes[0].content and "this channel" in notes[0].content


async def test_a_refused_progress_edit_goes_on_in_a_new_message_in_the_channel_told_once(
    bot: DiscordBot,
) -> None:
    run_id, thread, _ = await bot.start('run gated "v1"')
    await bot.baton.handler.drain()
    # only editing the progress message is refused (posting in the thread still works)
    bot.fake.fail_next("PATCH", f"channels/{thread}/messages", 403, code=50013, content="— **")
    mark = len(bot.fake.calls)
    bot.command(f"approve {run_id}", who=BOB)
    await bot.fake.wait_for(lambda _: bot.baton.store.runs.get_run(run_id).status == "completed")

    done = await bot.fake.wait_for(lambda _: _created(bot, CHANNEL_ID, "completed in", mark))
    notes = _created(bot, CHANNEL_ID, "could not post in the thread", mark)
    assert len(notes) == 1 and run_id in notes[0].content and notes[0].at <= done[0].at
    progress = [c for c in bot.fake.calls[mark:] if c.status < 300 and "— **completed**" in c.content]
    assert progress and all(f"channels/{CHANNEL_ID}/messages" in c.path for c in progress)  # a new one there


def _followups(bot: DiscordBot, token: str, text: str, after: int) -> list[Call]:
    """Messages sent through the follow-up webhook of the interaction with `token`."""
    return [c for c in bot.fake.calls[after:] if c.method == "POST" and c.status < 300
            and c.path.startswith("webhooks/") and token in c.path and text in c.content]


async def test_no_permission_in_thread_or_channel_answers_through_the_commands_follow_up(
    bot: DiscordBot,
) -> None:
    started = bot.command('run gated "v1"')
    run_id, thread = await bot.thread_of_next_run(0)
    await bot.rested(run_id)
    await bot.baton.handler.drain()
    bot.fake.fail_channels[thread] = NO_PERMISSION
    bot.fake.fail_channels[CHANNEL_ID] = NO_ACCESS
    mark = len(bot.fake.calls)
    bot.command(f"approve {run_id}", who=BOB)
    await bot.fake.wait_for(lambda _: bot.baton.store.runs.get_run(run_id).status == "completed")

    token = started["token"]  # the run's own command, still within its 15 minutes
    (done,) = await bot.fake.wait_for(lambda _: _followups(bot, token, "completed in", mark))
    (note,) = _followups(bot, token, "could not post in the thread", mark)
    assert note.at <= done.at and run_id in note.content and "in replies to your command" in note.content
    assert not [c for c in bot.fake.calls[mark:] if c.path.startswith("users/@me/channels")]  # no DM


async def test_no_permission_anywhere_and_the_token_expired_sends_it_to_the_requester_directly(
    bot: DiscordBot,
) -> None:
    run_id, thread, _ = await bot.start('run gated "v1"')
    await bot.baton.handler.drain()
    bot.fake.token_ttl = 0.0  # the run's command is more than 15 minutes old: its token expired
    bot.fake.fail_channels[thread] = NO_PERMISSION
    bot.fake.fail_channels[CHANNEL_ID] = NO_ACCESS
    mark = len(bot.fake.calls)
    bot.command(f"approve {run_id}", who=BOB)
    await bot.fake.wait_for(lambda _: bot.baton.store.runs.get_run(run_id).status == "completed")

    def direct(calls: list[Call]) -> list[Call]:
        return [c for c in calls[mark:] if c.method == "POST" and c.path.startswith("channels/")
                and c.path.split("/")[1] in bot.fake.channels
                and bot.fake.channels[c.path.split("/")[1]].get("type") == 1 and "completed in" in c.content]

    (done,) = await bot.fake.wait_for(direct)
    dm = done.path.split("/")[1]
    assert str(bot.fake.channels[dm]["recipients"][0]["id"]) == ANA["id"]  # who started the run
    assert len(_created(bot, dm, "a direct message from now on", mark)) == 1


async def test_an_attachment_refused_as_too_large_is_sent_as_messages(bot: DiscordBot) -> None:
    bot.fake.max_upload = 1_000
    _, thread, run = await bot.start("run bigoutput")
    assert run.status == "completed"

    sent = await bot.fake.wait_for(lambda calls: [
        c for c in calls if c.path == f"channels/{thread}/messages" and "2400" in c.content])
    assert sent
    received = "".join(c.content for c in bot.fake.calls if c.path == f"channels/{thread}/messages")
    numbers = {int(line) for line in received.splitlines() if line.strip().isdigit()}
    assert numbers == set(range(1, 2401))  # nothing lost
