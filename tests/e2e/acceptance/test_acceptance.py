"""DESIGN.md's five acceptance cases, once, on every platform (console, Slack, Discord) and both
databases, each typed as a person would and checked on what they see and on the store."""

from __future__ import annotations

import pytest

from core.commands.model import RunCommand
from core.commands.parser import parse
from tests.e2e.acceptance.drivers import Chat

FIXED_FLAKY = """\
name: flaky
description: Echo the message, fixed so that it no longer fails
nodes:
  - id: check
    bash: echo checked
    replay: pure
  - id: echo
    depends_on: [check]
    bash: echo got {{ inputs.message }}
    replay: pure
"""


async def failed_run(chat: Chat, message: str = "A fail") -> str:
    run = await chat.start(f'run flaky "{message}"')
    assert run.status == "failed", run
    return run.id


async def test_1_a_fresh_run_with_a_failed_run_prompts_and_executes_nothing(chat: Chat) -> None:
    failed = await failed_run(chat)

    prompt = await chat.prompted('run flaky "B"')

    assert f"resume {failed}" in prompt.commands
    assert f"run flaky --replace {failed} B" in prompt.commands  # abandon it, then run "B"
    (force,) = [c for c in prompt.commands if "--force" in c]
    assert parse(force) == RunCommand(workflow="flaky", message="B", force=True)  # "B" survives
    assert force in prompt.text  # copyable, not only a button
    assert len(prompt.commands) == 3
    assert chat.prompts_shown() == 1
    assert [r.id for r in chat.runs()] == [failed]  # nothing executed
    assert chat.runs()[0].status == "failed"


async def test_2_force_starts_a_fresh_run_and_leaves_the_failed_one(chat: Chat) -> None:
    failed = await failed_run(chat)
    (before,) = chat.runs()

    fresh = await chat.start('run flaky --force "B"')

    assert fresh.id != failed and fresh.status == "completed"
    assert fresh.thread != before.thread or before.thread is None  # its own thread
    assert chat.args_of(fresh)["message"] == "B"
    await chat.shown(fresh.id, "got B")
    after = next(r for r in chat.runs() if r.id == failed)
    assert (after.status, after.version) == (before.status, before.version)
    assert chat.prompts_shown() == 0


async def test_3_abandon_cancels_the_failed_run_and_the_next_run_does_not_prompt(chat: Chat) -> None:
    failed = await failed_run(chat)

    answer = await chat.command(f"abandon {failed}")

    assert failed in answer and "cancelled" in answer
    assert (await chat.status(failed, "cancelled")).status == "cancelled"
    fresh = await chat.start('run flaky "B"')
    assert fresh.id != failed and fresh.status == "completed"
    assert chat.prompts_shown() == 0


@pytest.mark.parametrize("how", ["reply", "command"])
async def test_4_approval_continues_the_paused_run_without_prompt_or_fresh_run(chat: Chat, how: str) -> None:
    paused = await chat.start('run gated "v1"')
    assert paused.status == "paused"

    if how == "reply":
        await chat.reply(paused.id, "lgtm, ship it")
    else:
        await chat.command(f"approve {paused.id}")

    assert (await chat.status(paused.id, "completed")).status == "completed"
    await chat.shown(paused.id, "shipped")
    assert [r.id for r in chat.runs()] == [paused.id]  # no fresh run
    assert chat.prompts_shown() == 0


async def test_5_resume_continues_that_run_without_prompt_or_fresh_run(chat: Chat) -> None:
    failed = await failed_run(chat)
    (chat.workflows / "flaky.yaml").write_text(FIXED_FLAKY)  # the fix takes effect on resume

    await chat.command(f"resume {failed}")

    run = await chat.status(failed, "completed")
    await chat.shown(failed, "got A fail")
    assert [r.id for r in chat.runs()] == [failed]
    assert chat.args_of(run)["message"] == "A fail"  # its own input
    assert chat.prompts_shown() == 0
