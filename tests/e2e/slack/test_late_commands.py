"""A command acknowledged, then the process killed before it could handle it: Slack never
redelivers an acknowledged command, so Baton records it before the acknowledgement. After a
restart (two replicas here, on one database) the command is handled exactly once and its
answer posted where it was typed, saying it was handled after a restart. A real `baton run`
(Slack over HTTP, the mock Web API) is killed with SIGKILL while the command waits on Slack's
`conversations.info` (the check that it may post in the channel), i.e. after the ack."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.store.repository import SqlStore
from tests.e2e.slack.harness import ANA, CHANNEL
from tests.e2e.slack.mock_slack import MockSlack
from tests.e2e.slack.steps import COMPLETED
from tests.e2e.slack.test_fault_processes import _serve
from tests.e2e.slack.test_process import slack_env

pytestmark = pytest.mark.timeout(240)

LATE = "handled after a restart"


def _open_events(url: str) -> int:
    with SqlStore(url) as store:
        return len(store.events.open_events(before=2e9))


async def test_a_command_killed_after_its_ack_is_handled_once_after_the_restart(
    mock_slack: MockSlack, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'baton.db'}"
    env = slack_env(mock_slack, tmp_path, url)
    env.update(BATON_EVENT_STALE_SECONDS="1", BATON_OUTBOX_POLL_SECONDS="0.5")
    mock_slack.hold("conversations.info", "")  # the command waits here, acknowledged
    first, slack = await _serve(env, tmp_path, mock_slack)
    try:
        answer = await slack.command('run notes "typed before the crash"')
        assert answer.status == 200  # Slack has its acknowledgement: it will never send it again
        await mock_slack.wait_for(lambda _: mock_slack.held, 60)
        first.kill()
        await first.exited()
    finally:
        await slack.close()
        mock_slack.release()
    with SqlStore(url) as store:
        assert store.runs.recent_runs(limit=10) == []  # nothing started: the command was lost, so far
        [open_event] = store.events.open_events(before=2e9)
        assert open_event.payload["text"] == 'run notes "typed before the crash"'

    replicas = [await _serve(env, tmp_path, mock_slack) for _ in range(2)]
    try:
        for _, unused in replicas:
            await unused.close()  # nothing is typed again
        posted = await mock_slack.wait_for(
            lambda calls: [c for c in calls if c.method == "chat.postMessage" and LATE in c.text], 60
        )
        await mock_slack.wait_for(
            lambda calls: [c for c in calls if c.method == "chat.postMessage" and COMPLETED in c.text], 60
        )
        async with asyncio.timeout(30):  # the event closed: no replica can claim it again
            while _open_events(url):
                await asyncio.sleep(0.05)
        # a negative check, as short as the late-event loop allows: one more tick of both
        # replicas (every max(1, stale/2) = 1 s) finds nothing to handle twice
        await asyncio.sleep(1.0)
    finally:
        for process, _ in replicas:
            assert await process.stop() == 0, process.output
    late = [c for c in mock_slack.calls if c.method == "chat.postMessage" and LATE in c.text]
    assert len(late) == 1, [c.text for c in late]
    assert posted[0].body["channel"] == CHANNEL  # where it was typed
    assert posted[0].text.startswith(f"⏱️ <@{ANA}>, your")  # addressed to who typed it: a real ping
    with SqlStore(url) as store:
        runs = store.runs.recent_runs(limit=10)
        assert len(runs) == 1 and runs[0].workflow == "notes"
        assert store.events.open_events(before=2e9) == []
    handled = sum(p.output.count("action=late_event") for p, _ in replicas)
    assert handled == 1, "\n".join(p.output for p, _ in replicas)
