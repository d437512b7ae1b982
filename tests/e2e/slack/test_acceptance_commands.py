"""DESIGN.md's five acceptance cases, typed as `/workflow` slash commands, plus approval by a
reply in the run's thread. Asserted on what Baton posted to (the mock) Slack."""

from __future__ import annotations

import shlex

from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.harness import ANA, CHANNEL
from tests.e2e.slack.steps import (
    COMPLETED,
    FAILED,
    PROMPT,
    STARTED,
    WAITING,
    command,
    failed_run,
    fix_flaky,
    posts,
    run_id_of,
    start,
    wait_in_thread,
)


async def test_1_a_fresh_run_with_a_failed_run_prompts_and_executes_nothing(e2e: SlackE2E) -> None:
    failed = await failed_run(e2e)

    mark = await command(e2e, 'run flaky "B"')

    prompt = await e2e.mock.wait_call("chat.postMessage", PROMPT, after=mark)
    assert prompt.body["channel"] == CHANNEL
    assert failed.run_id in prompt.text
    assert prompt.button("resume")["value"] == f"resume {failed.run_id}"
    assert prompt.button("abandon")["value"] == f"run flaky --replace {failed.run_id} B"
    force = prompt.button("force")["value"]
    assert shlex.split(force) == ["run", "flaky", "--force", "B"]  # "B" survives in option 3
    assert f"/workflow {force}" in prompt.text  # copyable as well as clickable
    await e2e.settle()
    assert len(posts(e2e, STARTED)) == 1  # nothing executed: no second run
    assert posts(e2e, FAILED, thread=failed.thread)[-1] is failed.rest  # the failed run is untouched


async def test_2_force_starts_a_fresh_run_and_leaves_the_failed_one(e2e: SlackE2E) -> None:
    failed = await failed_run(e2e)
    mark = len(e2e.mock.calls)

    fresh = await start(e2e, 'run flaky --force "B"', rests_with=FAILED)

    assert fresh.run_id != failed.run_id and fresh.thread != failed.thread
    started = posts(e2e, STARTED, thread=None)[-1]
    assert "“B”" in started.text
    assert not [c for c in e2e.mock.calls[mark:] if PROMPT in c.text]
    assert not [c for c in e2e.mock.calls[mark:] if c.body.get("thread_ts") == failed.thread]


async def test_3_abandon_cancels_the_failed_run_and_the_next_run_does_not_prompt(e2e: SlackE2E) -> None:
    failed = await failed_run(e2e)

    mark = await command(e2e, f"abandon {failed.run_id}")
    cancelled = await e2e.mock.wait_call("chat.postMessage", "cancelled", after=mark)
    assert failed.run_id in cancelled.text

    mark = len(e2e.mock.calls)
    fresh = await start(e2e, 'run flaky "B"', rests_with=FAILED)
    assert fresh.run_id != failed.run_id
    assert not [c for c in e2e.mock.calls[mark:] if PROMPT in c.text]


async def test_4_approve_command_continues_the_paused_run_without_a_prompt(e2e: SlackE2E) -> None:
    paused = await start(e2e, 'run gated "v1"', rests_with=WAITING)
    assert paused.rest.button("approve")["value"] == f"approve {paused.run_id}"

    mark = await command(e2e, f"approve {paused.run_id}")

    done = await wait_in_thread(e2e, paused.thread, COMPLETED, after=mark)
    assert run_id_of(done) == paused.run_id
    assert not [c for c in e2e.mock.calls[mark:] if PROMPT in c.text or STARTED in c.text]


async def test_4_a_reply_in_the_thread_approves_the_gate(e2e: SlackE2E) -> None:
    paused = await start(e2e, 'run gated "v1"', rests_with=WAITING)
    mark = len(e2e.mock.calls)

    answer = await e2e.slack.event(e2e.slack.message_event("lgtm, ship it", thread_ts=paused.thread))
    assert answer.status == 200

    done = await wait_in_thread(e2e, paused.thread, COMPLETED, after=mark)
    assert run_id_of(done) == paused.run_id
    assert not [c for c in e2e.mock.calls[mark:] if PROMPT in c.text or STARTED in c.text]


async def test_channel_chatter_never_approves(e2e: SlackE2E) -> None:
    paused = await start(e2e, 'run gated "v1"', rests_with=WAITING)
    mark = len(e2e.mock.calls)

    await e2e.slack.event(e2e.slack.message_event("lgtm", user=ANA))  # not in the thread, no mention
    await e2e.slack.event(e2e.slack.message_event("approve", thread_ts=paused.thread, bot_id="B0OTHER"))
    probe = await command(e2e, f"status {paused.run_id}")

    status = await e2e.mock.wait_call("chat.postMessage", paused.run_id, after=probe)
    assert "paused" in status.text
    assert not [c for c in e2e.mock.calls[mark:] if COMPLETED in c.text]


async def test_5_resume_continues_that_run_in_its_thread(e2e: SlackE2E) -> None:
    failed = await failed_run(e2e)
    fix_flaky(e2e)

    mark = await command(e2e, f"resume {failed.run_id}")

    done = await wait_in_thread(e2e, failed.thread, COMPLETED, after=mark)
    assert run_id_of(done) == failed.run_id
    assert "checked" in done.text
    await e2e.settle()
    later = e2e.mock.calls[mark:]
    assert not [c for c in later if PROMPT in c.text or STARTED in c.text]  # no prompt, no fresh run
    assert len([c for c in later if COMPLETED in c.text and c.method == "chat.postMessage"]) == 1  # no loop
