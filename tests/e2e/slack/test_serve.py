"""`serve()`: Socket Mode end to end against the mock's WebSocket, and its configuration check."""

from __future__ import annotations

import asyncio
import time

import pytest
from pydantic import SecretStr
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack import serve
from bot.app import build_baton
from core.config import Settings
from core.errors import ConfigurationError
from tests.e2e.slack.conftest import BOT_TOKEN
from tests.e2e.slack.harness import ANA, CHANNEL
from tests.e2e.slack.mock_slack import TEAM, MockSlack


async def test_socket_mode_acknowledges_a_slash_command_and_answers(settings: Settings,
                                                                   mock_slack: MockSlack) -> None:
    settings = settings.model_copy(update={"slack_app_token": SecretStr("xapp-e2e-not-a-real-token")})
    baton = build_baton(settings)
    try:
        async with baton.running(handle_signals=False, grace=2.0):
            client = AsyncWebClient(token=BOT_TOKEN, base_url=mock_slack.base_url)
            baton.health.expect(["slack"])
            serving = asyncio.create_task(serve(baton, settings, client=client))
            await mock_slack.wait_call("socket.connect")

            sent = time.monotonic()
            await mock_slack.send_envelope({
                "envelope_id": "env-1", "type": "slash_commands", "accepts_response_payload": True,
                "payload": {"team_id": TEAM, "channel_id": CHANNEL, "user_id": ANA, "command": "/workflow",
                            "text": "run gated v1", "trigger_id": "socket.trigger.1",
                            "response_url": mock_slack.response_url("socket-1")},
            })

            ack = await mock_slack.wait_for(
                lambda calls: next((c for c in calls if c.method == "socket.ack"), None))
            assert ack.body["envelope_id"] == "env-1"
            assert ack.at - sent < 3.0
            started = await mock_slack.wait_call("chat.postMessage", "Started")
            await mock_slack.wait_for(lambda calls: [
                c for c in calls if c.body.get("thread_ts") == started.ts and "waits for approval" in c.text])

            ready, checks = await baton.health.ready()  # the readiness check sees the socket up
            assert ready and checks["slack"].detail == "connected", checks

            baton.request_stop()
            await asyncio.wait_for(serving, 10)
    finally:
        baton.close()


async def test_serve_without_tokens_names_the_missing_settings(settings: Settings) -> None:
    bare = settings.model_copy(update={"slack_bot_token": None})
    baton = build_baton(bare)
    try:
        with pytest.raises(ConfigurationError, match="BATON_SLACK_BOT_TOKEN"):
            await serve(baton, bare)
    finally:
        baton.close()


async def test_socket_mode_records_a_command_before_acknowledging_its_envelope(
    settings: Settings, mock_slack: MockSlack
) -> None:
    """Slack never sends an acknowledged envelope again: when the ack leaves, the command is in
    the store, open (a process dying now leaves it to the next one: test_late_commands.py), and
    it is closed once handled."""
    settings = settings.model_copy(update={"slack_app_token": SecretStr("xapp-e2e-not-a-real-token")})
    baton = build_baton(settings)
    try:
        async with baton.running(handle_signals=False, grace=2.0):
            client = AsyncWebClient(token=BOT_TOKEN, base_url=mock_slack.base_url)
            serving = asyncio.create_task(serve(baton, settings, client=client))
            await mock_slack.wait_call("socket.connect")
            mock_slack.hold("conversations.info", "")  # handling waits after the ack
            await mock_slack.send_envelope({
                "envelope_id": "env-late", "type": "slash_commands", "accepts_response_payload": True,
                "payload": {"team_id": TEAM, "channel_id": CHANNEL, "user_id": ANA, "command": "/workflow",
                            "text": "run gated recorded", "trigger_id": "socket.trigger.2",
                            "response_url": mock_slack.response_url("socket-2")},
            })  # fmt: skip
            await mock_slack.wait_for(lambda calls: [c for c in calls if c.method == "socket.ack"])
            [recorded] = baton.store.events.open_events(before=time.time() + 60)
            assert recorded.payload["text"] == "run gated recorded" and recorded.platform == "slack"
            mock_slack.release()
            await mock_slack.wait_call("chat.postMessage", "Started")
            assert baton.store.events.open_events(before=time.time() + 60) == []  # handled: closed
            baton.request_stop()
            await asyncio.wait_for(serving, 10)
    finally:
        baton.close()
