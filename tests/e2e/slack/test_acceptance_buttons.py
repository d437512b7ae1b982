"""DESIGN.md's five acceptance cases through Block Kit buttons: each click runs the command the
button stands for, as the clicking user; the clicked message then shows who chose what and
has no buttons left."""

from __future__ import annotations

import asyncio

from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.harness import ANA, BOB
from tests.e2e.slack.mock_slack import Call
from tests.e2e.slack.steps import (
    ACK_LIMIT,
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


async def click(e2e: SlackE2E, message: Call, action: str, *, user: str = ANA) -> int:
    mark = len(e2e.mock.calls)
    answer = await e2e.slack.click(message, action, user=user)
    assert answer.status == 200, answer
    assert answer.seconds < ACK_LIMIT, answer.stalls
    return mark


async def chosen(e2e: SlackE2E, message: Call, label: str, *, user: str = ANA, after: int = 0) -> Call:
    """The edit of `message` that replaced its buttons with who chose what."""
    def found(calls: list[Call]) -> Call | None:
        for call in calls[after:]:
            if call.method == "chat.update" and call.body.get("ts") == message.ts and "chose" in call.text:
                return call
        return None

    update: Call = await e2e.mock.wait_for(found)
    assert f"name-of-{user} chose *{label}*" in update.text
    assert update.buttons == []
    return update


async def settled(e2e: SlackE2E, message: Call, *, by: str, approved: bool = True, after: int = 0) -> Call:
    """The edit of a message offering a gate once it was decided: who decided, no buttons."""
    said = f"{'✅ Approved' if approved else '❌ Rejected'} by name-of-{by}"

    def found(calls: list[Call]) -> Call | None:
        for call in calls[after:]:
            if call.method == "chat.update" and call.body.get("ts") == message.ts and said in call.text:
                return call
        return None

    update: Call = await e2e.mock.wait_for(found)
    assert update.buttons == []
    return update


async def prompt_for_b(e2e: SlackE2E) -> Call:
    mark = await command(e2e, 'run flaky "B"')
    return await e2e.mock.wait_call("chat.postMessage", PROMPT, after=mark)


async def test_1_prompt_resume_button_continues_the_old_run_with_its_input(e2e: SlackE2E) -> None:
    failed = await failed_run(e2e)
    prompt = await prompt_for_b(e2e)
    fix_flaky(e2e)

    mark = await click(e2e, prompt, "resume")

    await chosen(e2e, prompt, prompt.button("resume")["text"]["text"], after=mark)
    done = await wait_in_thread(e2e, failed.thread, COMPLETED, after=mark)
    assert run_id_of(done) == failed.run_id
    assert "checked A" in done.text  # the old run's own input, not "B"
    assert len(posts(e2e, STARTED)) == 1
    assert posts(e2e, "Resumed", thread=failed.thread)  # told in the run's thread, not the root
    assert not [c for c in posts(e2e, "Resumed") if c.body.get("thread_ts") != failed.thread]


async def test_2_prompt_force_button_starts_a_fresh_run_with_the_new_input(e2e: SlackE2E) -> None:
    failed = await failed_run(e2e)
    prompt = await prompt_for_b(e2e)

    mark = await click(e2e, prompt, "force")

    await chosen(e2e, prompt, prompt.button("force")["text"]["text"], after=mark)
    started = await e2e.mock.wait_call("chat.postMessage", STARTED, after=mark)
    assert "“B”" in started.text
    assert run_id_of(started) != failed.run_id
    assert started.ts is not None
    await wait_in_thread(e2e, started.ts, FAILED, after=mark)
    assert not [c for c in e2e.mock.calls[mark:] if c.body.get("thread_ts") == failed.thread]


async def test_3_abandon_button_cancels_and_the_next_run_does_not_prompt(e2e: SlackE2E) -> None:
    failed = await failed_run(e2e)

    mark = await click(e2e, failed.rest, "abandon")

    await chosen(e2e, failed.rest, "Abandon", after=mark)
    await e2e.mock.wait_call("chat.postMessage", "cancelled", after=mark)
    mark = len(e2e.mock.calls)
    fresh = await start(e2e, 'run flaky "B"', rests_with=FAILED)
    assert fresh.run_id != failed.run_id
    assert not [c for c in e2e.mock.calls[mark:] if PROMPT in c.text]


async def test_the_prompts_abandon_button_abandons_then_starts_the_new_message(e2e: SlackE2E) -> None:
    failed = await failed_run(e2e)
    prompt = await e2e.mock.wait_call("chat.postMessage", PROMPT, after=await command(e2e, 'run flaky "B"'))

    mark = await click(e2e, prompt, "abandon")

    await chosen(e2e, prompt, "Abandon it, then run again", after=mark)
    first = await e2e.mock.wait_call("chat.postMessage", STARTED, after=mark)
    assert "Message: “B”" in first.text and first.ts is not None
    await wait_in_thread(e2e, first.ts, FAILED, after=mark)  # "B" fails like "A": flaky is not fixed
    assert e2e.baton.store.runs.get_run(failed.run_id).status == "cancelled"


async def test_4_approve_button_continues_the_paused_run(e2e: SlackE2E) -> None:
    paused = await start(e2e, 'run gated "v1"', rests_with=WAITING)

    mark = await click(e2e, paused.rest, "approve", user=BOB)

    await settled(e2e, paused.rest, by=BOB, after=mark)
    done = await wait_in_thread(e2e, paused.thread, COMPLETED, after=mark)
    assert run_id_of(done) == paused.run_id
    assert not [c for c in e2e.mock.calls[mark:] if PROMPT in c.text or STARTED in c.text]


async def test_5_resume_button_on_the_failure_continues_that_run(e2e: SlackE2E) -> None:
    failed = await failed_run(e2e)
    fix_flaky(e2e)

    mark = await click(e2e, failed.rest, "resume")

    await chosen(e2e, failed.rest, "Resume", after=mark)
    done = await wait_in_thread(e2e, failed.thread, COMPLETED, after=mark)
    assert run_id_of(done) == failed.run_id
    assert not [c for c in e2e.mock.calls[mark:] if PROMPT in c.text or STARTED in c.text]


async def test_two_concurrent_clicks_resume_the_run_exactly_once(e2e: SlackE2E) -> None:
    paused = await start(e2e, 'run gated "v1"', rests_with=WAITING)
    mark = len(e2e.mock.calls)

    answers = await asyncio.gather(
        e2e.slack.click(paused.rest, "approve", user=ANA),
        e2e.slack.click(paused.rest, "approve", user=BOB),
    )

    assert [a.status for a in answers] == [200, 200]
    await wait_in_thread(e2e, paused.thread, COMPLETED, after=mark)
    await e2e.settle()
    later = e2e.mock.calls[mark:]
    completions = [c for c in later if c.method == "chat.postMessage" and COMPLETED in c.text]
    assert len(completions) == 1
    marks = [c for c in later if c.method == "chat.update" and c.body.get("ts") == paused.rest.ts]
    assert len(marks) == 1, "only the winning click edits the message"
    winner = ANA if f"Approved by name-of-{ANA}" in marks[0].text else BOB
    assert f"Approved by name-of-{winner}" in marks[0].text and marks[0].buttons == []
    (told,) = [c for c in later if c.method == "chat.postEphemeral"]
    assert told.body["user"] == ({ANA, BOB} - {winner}).pop()
    assert f"already approved by name-of-{winner}" in told.text  # who won, by name (no ping)
