"""Slack's mechanics: signatures, retries, mentions, progress edits, long outputs, Web API errors."""

from __future__ import annotations

import itertools
import time

from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.harness import ANA, CHANNEL
from tests.e2e.slack.mock_slack import BOT_USER, Call
from tests.e2e.slack.steps import (
    COMPLETED,
    WAITING,
    command,
    posts,
    run_id_of,
    start,
    wait_in_thread,
)


async def test_a_bad_signature_is_rejected_and_nothing_is_handled(e2e: SlackE2E) -> None:
    body = "command=%2Fworkflow&text=run+gated&user_id=U0ANA&channel_id=C0OPS&trigger_id=t1"
    headers = e2e.slack.signed_headers(body, "application/x-www-form-urlencoded")
    forged = {**headers, "X-Slack-Signature": "v0=" + "0" * 64}
    old = int(time.time()) - 600
    stale = e2e.slack.signed_headers(body, "application/x-www-form-urlencoded", timestamp=old)

    assert (await e2e.slack.post(body, forged)).status == 401
    assert (await e2e.slack.post(body, stale)).status == 401
    assert (await e2e.slack.post(body + "&text=tampered", headers)).status == 401

    probe = await command(e2e, "runs")  # a good request right after is served
    await e2e.mock.wait_for(lambda calls: len(calls) > probe)
    assert posts(e2e, "Started") == []


async def test_a_retried_event_is_processed_once(e2e: SlackE2E) -> None:
    paused = await start(e2e, 'run gated "v1"', rests_with=WAITING)
    mark = len(e2e.mock.calls)
    reply = e2e.slack.message_event("approve", thread_ts=paused.thread)

    first = await e2e.slack.event(reply, event_id="Ev0RETRY1")
    retry = await e2e.slack.event(reply, event_id="Ev0RETRY1", retry_num=1)

    assert (first.status, retry.status) == (200, 200)
    await wait_in_thread(e2e, paused.thread, COMPLETED, after=mark)
    await e2e.settle()
    later = e2e.mock.calls[mark:]
    decided = [c for c in later if c.method == "chat.postMessage" and "approved" in c.text.lower()]
    assert len(decided) == 1
    assert len([c for c in later if c.method == "chat.postMessage" and COMPLETED in c.text]) == 1


async def test_a_mention_delivered_as_message_and_app_mention_counts_once(e2e: SlackE2E) -> None:
    paused = await start(e2e, 'run gated "v1"', rests_with=WAITING)
    mark = len(e2e.mock.calls)
    said = e2e.slack.message_event(f"<@{BOT_USER}> lgtm")  # in the channel, not the thread

    await e2e.slack.event(said)
    await e2e.slack.event({**said, "type": "app_mention"})

    await wait_in_thread(e2e, paused.thread, COMPLETED, after=mark)
    await e2e.settle()
    completions = [c for c in e2e.mock.calls[mark:] if c.method == "chat.postMessage" and COMPLETED in c.text]
    assert len(completions) == 1


async def test_progress_is_one_message_edited_in_place_and_throttled(e2e: SlackE2E) -> None:
    run = await start(e2e, 'run gated "v1"', rests_with=WAITING)
    mark = len(e2e.mock.calls)
    await command(e2e, f"approve {run.run_id}")
    await wait_in_thread(e2e, run.thread, COMPLETED, after=mark)
    await e2e.settle()

    progress = [c for c in e2e.mock.calls if run.run_id in c.text and "—" in c.text]
    first, edits = progress[0], progress[1:]
    assert first.method == "chat.postMessage" and first.body.get("thread_ts") == run.thread
    assert edits and all(c.method == "chat.update" and c.body["ts"] == first.ts for c in edits)
    assert "completed" in edits[-1].text  # the final state is always sent
    # between two edits showing the run still moving, about one second at least
    gaps = [b.at - a.at for a, b in itertools.pairwise(progress) if moving(a) and moving(b)]
    assert all(gap >= 0.9 for gap in gaps), gaps


def moving(call: Call) -> bool:
    """A progress message showing its run still moving (its first line: `… — *running* · …`)."""
    head = call.text.split("\n", 1)[0]
    return "— *running*" in head or "— *pending*" in head


async def test_a_progress_message_deleted_in_slack_is_posted_again(e2e: SlackE2E) -> None:
    run = await start(e2e, 'run gated "v1"', rests_with=WAITING)
    await e2e.settle()
    mark = len(e2e.mock.calls)
    [shown] = [c for c in e2e.mock.of("chat.postMessage") if run.run_id in c.text and "—" in c.text]
    # someone deleted the progress message
    e2e.mock.fail_next("chat.update", "message_not_found", only={"ts": shown.ts})

    await command(e2e, f"approve {run.run_id}")
    await wait_in_thread(e2e, run.thread, COMPLETED, after=mark)
    await e2e.settle()

    progress = [c for c in e2e.mock.calls[mark:] if run.run_id in c.text and "—" in c.text]
    methods = [c.method for c in progress]
    assert methods[:2] == ["chat.update", "chat.postMessage"], methods
    assert progress[1].body["thread_ts"] == run.thread
    assert "completed" in progress[-1].text


async def test_a_50kb_output_is_uploaded_whole_in_the_thread(e2e: SlackE2E) -> None:
    run = await start(e2e, "run bigoutput", rests_with=COMPLETED)

    upload = await e2e.mock.wait_call("files.completeUploadExternal")
    assert upload.body.get("channel_id") == CHANNEL
    assert upload.body.get("thread_ts") == run.thread
    assert "attached" in run.rest.text  # the message says where the rest is
    assert all(len(b["text"]["text"]) <= 3000 for b in _sections(run.rest))
    (content,) = [data for data in e2e.mock.uploads.values() if data]
    lines = content.decode().splitlines()
    numbers = [line for line in lines if line.isdigit()]
    assert numbers == [str(n) for n in range(1, 11001)]  # nothing lost, nothing reordered


async def test_rate_limited_calls_are_retried_after_retry_after(e2e: SlackE2E) -> None:
    e2e.mock.fail_next("chat.postMessage", "ratelimited", status=429, headers={"Retry-After": "1"})

    mark = await command(e2e, "runs")

    def two_posts(calls: list[Call]) -> list[Call] | None:
        found = [c for c in calls[mark:] if c.method == "chat.postMessage"]
        return found if len(found) >= 2 else None

    limited, retried = (await e2e.mock.wait_for(two_posts))[:2]
    assert retried.body["text"] == limited.body["text"]
    assert retried.at - limited.at >= 0.95


async def test_not_in_channel_tells_the_user_to_invite_the_bot(e2e: SlackE2E) -> None:
    e2e.mock.fail_next("chat.postMessage", "not_in_channel")

    mark = await command(e2e, "runs")

    notice: Call = await e2e.mock.wait_call("response_url", "Invite the bot", after=mark)
    assert notice.body["response_type"] == "ephemeral"
    assert f"<#{CHANNEL}>" in notice.body["text"]


async def test_missing_scope_is_reported_with_the_scope(e2e: SlackE2E) -> None:
    e2e.mock.fail_next("chat.postMessage", "missing_scope", needed="chat:write")

    mark = await command(e2e, "runs", user=ANA)

    notice = await e2e.mock.wait_call("response_url", "chat:write", after=mark)
    assert "reinstall" in notice.body["text"]


async def test_an_unreachable_slack_is_reported_and_the_run_reports_in_the_channel(e2e: SlackE2E) -> None:
    """The run's first message never reaches Slack (the connection drops): the user is told,
    and the run does not wait for a thread that will not come."""
    e2e.baton.handler.progress.thread_wait = 120.0  # far beyond the deadline: only the adapter releases
    e2e.mock.fail_next("chat.postMessage", "", drop=True, times=2)  # slack_sdk retries a dropped call once

    mark = await command(e2e, 'run gated "v1"')

    notice = await e2e.mock.wait_call("response_url", "did not get through", after=mark)
    assert notice.body["response_type"] == "ephemeral"
    assert "Do not start it again" in notice.body["text"]  # the run did start
    waiting = await e2e.mock.wait_call("chat.postMessage", WAITING, after=mark, timeout=10)
    assert "thread_ts" not in waiting.body  # in the channel, where the command was typed


async def test_started_run_id_is_in_its_first_message(e2e: SlackE2E) -> None:
    run = await start(e2e, 'run gated "v1"', rests_with=WAITING)
    assert run_id_of(run.rest) == run.run_id
    assert run.rest.body["thread_ts"] == run.thread


def _sections(call: Call) -> list[dict[str, object]]:
    blocks = call.body.get("blocks") or []
    return [b for b in blocks if isinstance(b, dict) and b.get("type") == "section"]
