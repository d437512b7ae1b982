"""DESIGN.md's acceptance cases on Discord by button (the prompt's three choices, the approve
button), through the real discord.py client and the real core. Typed as commands and as a
reply in the run's thread, on every platform: tests/e2e/acceptance/."""

from __future__ import annotations

from core.config import Settings
from core.delivery.button_refs import command_of, parse
from core.store.records import Run
from tests.e2e.discord.gateway import ANA, BOB
from tests.e2e.discord.harness import DiscordBot, custom_ids

FIXED_FLAKY = """\
name: flaky
description: "Echo the message (fixed: no longer fails)"
nodes:
  - id: check
    bash: echo checked
    replay: pure
  - id: echo
    depends_on: [check]
    bash: echo got {{ inputs.message }}
    replay: pure
"""


def decoded(bot: DiscordBot, custom_id: str) -> str:
    """The command a button runs, as any Baton process would rebuild it from the custom_id."""
    ref = parse(custom_id)
    assert ref is not None, custom_id
    return command_of(ref, bot.client.interactions._kept)


async def failed_run(bot: DiscordBot, message: str = "A fail") -> str:
    run_id, thread, run = await bot.start(f'run flaky "{message}"')
    assert run.status == "failed"
    await bot.posted_in(thread, "failed at")  # its reply (with a Resume button) is in the thread
    await bot.baton.handler.drain()  # its failure reply (with its own resume button) is out
    return run_id


async def prompt_buttons(bot: DiscordBot, text: str) -> dict[str, str]:
    """Send a `run` that must prompt; its buttons as {command: custom_id}. Nothing may start."""
    mark = len(bot.fake.calls)
    payload = bot.command(text)
    (answer,) = await bot.answers(payload)
    ids = custom_ids(answer.json["components"])
    assert len(ids) == 3, answer.json
    assert not [c for c in bot.fake.calls[mark:] if c.path.endswith("/threads")]  # no run began
    return {decoded(bot, cid): cid for cid in ids}


def run_ids(bot: DiscordBot) -> list[str]:
    return [r.id for r in bot.baton.store.runs.recent_runs(platform="discord")]


# -- 2 ---------------------------------------------------------------------------------------
async def test_2_force_by_button_carries_a_long_new_message(bot: DiscordBot) -> None:
    failed = await failed_run(bot)
    message = "B " + "and a much longer new input " * 5  # too long for a literal custom_id
    buttons = await prompt_buttons(bot, f'run flaky "{message.strip()}"')
    (force,) = [cid for cmd, cid in buttons.items() if "--force" in cmd]
    assert force.startswith("baton:force:#") and len(force) <= 100

    mark = len(bot.fake.calls)
    bot.click(force)
    fresh, _ = await bot.thread_of_next_run(mark)
    run = await bot.rested(fresh)

    assert fresh != failed and run.status == "completed"
    assert bot.baton.engine.args_of(run)["message"] == message.strip()
    assert bot.baton.store.runs.get_run(failed).status == "failed"


# -- 3 ---------------------------------------------------------------------------------------
async def test_3_abandon_by_button_disables_the_prompt_and_shows_who_chose(bot: DiscordBot) -> None:
    failed = await failed_run(bot)
    buttons = await prompt_buttons(bot, 'run flaky "B"')

    mark = len(bot.fake.calls)
    click = bot.click(buttons[f"run flaky --replace {failed} B"], who=ANA)  # her own run
    original = f"{click['token']}/messages/@original"
    edit = (await bot.fake.wait_for(lambda calls: [
        c for c in calls if c.method == "PATCH" and c.path.endswith(original)]))[0]

    shown = [b for row in edit.json["components"] for b in row["components"]]
    assert all(b["disabled"] for b in shown)
    chosen = next(b for b in shown if b["custom_id"] == buttons[f"run flaky --replace {failed} B"])
    assert chosen["label"].endswith("· ana")
    assert bot.baton.store.runs.get_run(failed).status == "cancelled"
    fresh, _ = await bot.thread_of_next_run(mark)  # …and the click started "B" at once
    run = await bot.rested(fresh)
    assert fresh != failed and run.status == "completed"
    assert bot.baton.engine.args_of(run)["message"] == "B"


# -- 4 ---------------------------------------------------------------------------------------
async def test_4_the_approve_button_continues_the_run_without_prompt(bot: DiscordBot) -> None:
    paused, thread, run = await bot.start('run gated "v1"')
    assert run.status == "paused"
    await bot.posted_in(thread, "Ship v1?")

    bot.click(f"baton:approve:{paused}", who=BOB)

    await bot.posted_in(thread, "shipped")
    assert (await bot.rested(paused)).status == "completed"
    assert run_ids(bot) == [paused]


# -- 5 ---------------------------------------------------------------------------------------
async def test_5_the_resume_button_of_the_prompt_continues_that_run(
    bot: DiscordBot, settings: Settings
) -> None:
    failed = await failed_run(bot)
    (settings.workflow_dirs[0] / "flaky.yaml").write_text(FIXED_FLAKY)
    buttons = await prompt_buttons(bot, 'run flaky "B"')

    bot.click(buttons[f"resume {failed}"])

    run = await bot.fake.wait_for(lambda _: _resting(bot, failed, "completed"))
    assert run_ids(bot) == [failed]
    assert bot.baton.engine.args_of(run)["message"] == "A fail"
    await bot.posted_in(run.thread or "", "Resumed")  # the prompt was in the channel: told in the thread


def _resting(bot: DiscordBot, run_id: str, status: str) -> Run | None:
    run = bot.baton.store.runs.get_run(run_id)
    return run if run.status == status else None

