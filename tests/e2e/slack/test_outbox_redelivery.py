"""An outbox row's message on Slack, which has no idempotency key: the message carries the row
in its metadata; a redelivery after Slack took the message but before the row was settled
finds it in the run's thread (`conversations.replies` with `include_all_metadata`) and posts
nothing; a first delivery looks for nothing; a look-up that fails posts (at least once)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import tenacity

from core.store.records import Delivery
from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.harness import CHANNEL
from tests.e2e.slack.mock_slack import BOT_ID
from tests.e2e.slack.steps import COMPLETED, STARTED, command, start

DEADLINE = 20.0
READS = ("conversations.replies", "conversations.history")


def _completions(e2e: SlackE2E, thread: str | None) -> list[dict[str, Any]]:
    """The completion messages Slack holds in `thread` (None: in the channel), taken whether or
    not Baton heard back."""
    return [m for m in e2e.mock.messages if m["thread_ts"] == thread and COMPLETED in (m["text"] or "")]


async def _answer_lost(
    e2e: SlackE2E, *, in_channel: bool = False, taken: bool = True,
    meanwhile: Callable[[str | None, Delivery], None] | None = None,
) -> tuple[str | None, Delivery]:
    """A run completes; Slack takes its completion but never answers, so the deliverer's send
    times out and the row is not settled (as after a crash between Slack's answer and the
    settle); then it is delivered again. The run's thread (None: `in_channel`, its first
    message never reached Slack, so it reports in the channel) and its row, once settled."""
    deliverer = e2e.baton.handler.progress.deliverer
    deliverer.lease_seconds = 2.0  # the send gives up after 1.6 s
    deliverer.wait = tenacity.wait_fixed(0)  # the retry is due at once
    e2e.mock.hold("chat.postMessage", COMPLETED, taken=taken, times=1)
    if in_channel:
        e2e.mock.fail_next("chat.postMessage", "", drop=True, times=2)  # slack_sdk retries a drop once
    mark = await command(e2e, 'run notes "twice?"')
    first = await e2e.mock.wait_call("chat.postMessage", STARTED, after=mark)
    assert (first.ts is None) is in_channel
    await e2e.mock.wait_for(lambda _: e2e.mock.held, DEADLINE)
    [row] = e2e.baton.store.outbox.deliveries(_run_id(e2e))
    if meanwhile is not None:  # before the row is delivered again
        meanwhile(first.ts, row)

    async def settled() -> Delivery:
        while (now := e2e.baton.store.outbox.deliveries(row.run_id)[0]).delivered_at is None:
            await deliverer.deliver_due()
            await asyncio.sleep(0.05)
        return now

    try:
        return first.ts, await asyncio.wait_for(settled(), DEADLINE)
    finally:
        e2e.mock.release()


def _run_id(e2e: SlackE2E) -> str:
    return e2e.baton.store.runs.recent_runs(platform="slack")[0].id


async def test_a_completion_slack_took_before_its_row_was_settled_is_posted_once(e2e: SlackE2E) -> None:
    thread, row = await _answer_lost(e2e)
    assert row.attempts == 2  # delivered again …
    [looked] = e2e.mock.of("conversations.replies")
    assert looked.body["ts"] == thread and looked.body["include_all_metadata"] == "true"
    [message] = _completions(e2e, thread)  # … yet one completion in the thread
    assert message["metadata"] == {"event_type": "baton_outbox",
                                   "event_payload": {"key": f"outbox:{row.id}", "row": row.id}}


async def test_a_completion_in_the_channel_is_looked_for_in_its_history(e2e: SlackE2E) -> None:
    _, row = await _answer_lost(e2e, in_channel=True)
    assert row.attempts == 2 and e2e.mock.of("conversations.replies") == []
    [looked] = e2e.mock.of("conversations.history")
    assert looked.body["channel"] == CHANNEL and looked.body["include_all_metadata"] == "true"
    assert float(looked.body["oldest"]) < row.created_at  # since the row was written (and a margin)
    [message] = _completions(e2e, None)
    assert message["metadata"]["event_payload"] == {"key": f"outbox:{row.id}", "row": row.id}


async def test_a_first_delivery_posts_with_the_rows_metadata_and_looks_for_nothing(e2e: SlackE2E) -> None:
    run = await start(e2e, 'run notes "once"', rests_with=COMPLETED)
    await e2e.settle()
    [row] = e2e.baton.store.outbox.deliveries(run.run_id)
    assert row.delivered_at is not None and row.attempts == 1
    assert run.rest.body["metadata"] == {"event_type": "baton_outbox",
                                         "event_payload": {"key": f"outbox:{row.id}", "row": row.id}}
    assert e2e.mock.of(*READS) == []  # the normal path costs no extra call


async def test_a_redelivery_whose_look_up_fails_posts_again(e2e: SlackE2E) -> None:
    e2e.mock.fail_next("conversations.replies", "missing_scope", needed="channels:history")
    thread, row = await _answer_lost(e2e)
    assert row.attempts == 2
    [refused] = e2e.mock.of("conversations.replies")
    assert refused.body["ts"] == thread
    assert len(_completions(e2e, thread)) == 2  # at least once: a second copy, never none


async def test_a_message_of_another_app_carrying_the_rows_metadata_is_not_taken_for_ours(
    e2e: SlackE2E,
) -> None:
    # Slack never took Baton's completion; another app (or a bot token of someone else) posted a
    # message with the row's `baton_outbox` metadata in the run's thread: not Baton's, so posted
    def impostor(thread: str | None, row: Delivery) -> None:
        metadata = {"event_type": "baton_outbox", "event_payload": {"key": f"outbox:{row.id}", "row": row.id}}
        for bot_id, app_id in (("BOTHER", "A0OTHER"), ("BOTHER", "A0BATON")):
            e2e.mock.plant(CHANNEL, thread, f"{COMPLETED} (fake)", metadata, bot_id=bot_id, app_id=app_id)

    thread, row = await _answer_lost(e2e, taken=False, meanwhile=impostor)
    assert row.attempts == 2
    assert e2e.mock.of("conversations.replies") and e2e.mock.of("auth.test")  # looked, then asked who it is
    ours = [m for m in _completions(e2e, thread) if m["bot_id"] == BOT_ID]
    assert len(ours) == 1 and "(fake)" not in (ours[0]["text"] or "")  # posted, once
