"""Chatter in a channel never approves a gate. DESIGN.md's five acceptance cases, typed as
`/workflow` commands and as a reply in the run's thread, are in tests/e2e/acceptance/ (every
platform); the prompt's buttons are in test_acceptance_buttons.py."""

from __future__ import annotations

from tests.e2e.slack.conftest import SlackE2E
from tests.e2e.slack.harness import ANA
from tests.e2e.slack.steps import COMPLETED, WAITING, command, start


async def test_channel_chatter_never_approves(e2e: SlackE2E) -> None:
    paused = await start(e2e, 'run gated "v1"', rests_with=WAITING)
    mark = len(e2e.mock.calls)

    await e2e.slack.event(e2e.slack.message_event("lgtm", user=ANA))  # not in the thread, no mention
    await e2e.slack.event(e2e.slack.message_event("approve", thread_ts=paused.thread, bot_id="B0OTHER"))
    probe = await command(e2e, f"status {paused.run_id}")

    status = await e2e.mock.wait_call("chat.postMessage", paused.run_id, after=probe)
    assert "paused" in status.text
    assert not [c for c in e2e.mock.calls[mark:] if COMPLETED in c.text]


