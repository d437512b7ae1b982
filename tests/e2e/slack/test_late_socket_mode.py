"""Socket Mode: an envelope acknowledged, then the process killed before it handled the command.
Slack never sends an acknowledged envelope again, so Baton records the command before the ack
leaves. A real `baton run` in Socket Mode (an app token) asks the mock Web API for its socket
(`apps.connections.open` answers the mock's `ws://` URL), connects, and gets a `slash_commands`
envelope; the moment its ack arrives on the socket, the process is killed with SIGKILL (its
handling waits on `conversations.info`, the check that it may post in the channel, so nothing
of the command was done yet). After a restart the command is handled exactly once and the user
is told, in the channel it was typed in, that it was handled after a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.store.repository import SqlStore
from tests.e2e.process import BatonProcess
from tests.e2e.slack.harness import ANA, CHANNEL
from tests.e2e.slack.mock_slack import TEAM, Call, MockSlack
from tests.e2e.slack.steps import COMPLETED
from tests.e2e.slack.test_process import slack_env

pytestmark = pytest.mark.timeout(240)

LATE = "handled after a restart"
APP_TOKEN = "xapp-e2e-not-a-real-token"


def _envelope(mock: MockSlack, envelope_id: str, text: str) -> dict[str, object]:
    """What Slack sends over the socket for `/workflow <text>` (its slash_commands envelope)."""
    return {
        "envelope_id": envelope_id, "type": "slash_commands", "accepts_response_payload": True,
        "retry_attempt": 0, "retry_reason": "",
        "payload": {"token": "legacy", "team_id": TEAM, "team_domain": "baton-test", "channel_id": CHANNEL,
                    "channel_name": "ops", "user_id": ANA, "user_name": "ana", "command": "/workflow",
                    "text": text, "api_app_id": "A0BATON", "trigger_id": f"{envelope_id}.trigger",
                    "response_url": mock.response_url(envelope_id)},
    }  # fmt: skip


async def _connected(env: dict[str, str], cwd: Path, mock: MockSlack) -> BatonProcess:
    """A `baton run` in Socket Mode, once its socket is up (the mock saw one more connection)."""
    sockets = len(mock.of("socket.connect"))
    baton = await BatonProcess.start(env, cwd=cwd)
    await baton.wait_log(r"action=slack_started .*mode=socket")
    await mock.wait_for(lambda calls: len([c for c in calls if c.method == "socket.connect"]) > sockets, 30)
    return baton


def _acks(calls: list[Call], envelope_id: str) -> list[Call]:
    return [c for c in calls if c.method == "socket.ack" and c.body.get("envelope_id") == envelope_id]


async def test_an_envelope_killed_right_after_its_ack_is_handled_once_after_the_restart(
    mock_slack: MockSlack, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'baton.db'}"
    env = slack_env(mock_slack, tmp_path, url)
    env.update(BATON_SLACK_APP_TOKEN=APP_TOKEN, BATON_EVENT_STALE_SECONDS="1",
               BATON_OUTBOX_POLL_SECONDS="0.5")
    first = await _connected(env, tmp_path, mock_slack)
    opened = [c for c in mock_slack.calls if c.method == "apps.connections.open"]
    assert opened, "the socket's URL comes from apps.connections.open on the Web API"
    mock_slack.hold("conversations.info", "")  # the command waits here, after its ack
    try:
        typed = 'run notes "typed before the crash"'
        await mock_slack.send_envelope(_envelope(mock_slack, "env-killed", typed))
        await mock_slack.wait_for(lambda calls: _acks(calls, "env-killed"), 30)
        first.kill()  # the moment the ack is in: Slack will never send this envelope again
        await first.exited()
    finally:
        mock_slack.release()
    with SqlStore(url) as store:
        assert store.runs.recent_runs(limit=10) == []  # nothing started: the command is lost, so far
        [open_event] = store.events.open_events(before=2e9)
        assert open_event.payload["text"] == 'run notes "typed before the crash"'

    second = await _connected(env, tmp_path, mock_slack)  # nothing is sent again on its socket
    try:
        posted = await mock_slack.wait_for(
            lambda calls: [c for c in calls if c.method == "chat.postMessage" and LATE in c.text], 60
        )
        await mock_slack.wait_for(
            lambda calls: [c for c in calls if c.method == "chat.postMessage" and COMPLETED in c.text], 60
        )
        await asyncio.sleep(2)  # two more ticks of the late-event loop: nothing is handled twice
    finally:
        assert await second.stop() == 0, second.output
    late = [c for c in mock_slack.calls if c.method == "chat.postMessage" and LATE in c.text]
    assert len(late) == 1, [c.text for c in late]
    assert posted[0].body["channel"] == CHANNEL  # where it was typed
    completed = [c for c in mock_slack.calls if c.method == "chat.postMessage" and COMPLETED in c.text]
    assert len(completed) == 1, [c.text for c in completed]
    with SqlStore(url) as store:
        runs = store.runs.recent_runs(limit=10)
        assert len(runs) == 1 and runs[0].workflow == "notes"
        assert store.events.open_events(before=2e9) == []
    assert second.output.count("action=late_event") == 1, second.output
    assert len(_acks(mock_slack.calls, "env-killed")) == 1  # one envelope, acknowledged once
