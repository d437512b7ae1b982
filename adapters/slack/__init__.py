"""Baton on Slack (slack-bolt): `/workflow`, buttons, run threads, approvals by reply.

    await serve(baton, settings)     # until baton.stopping is set (or the task is cancelled)

Socket Mode (bot token + app-level token) by default; HTTP mode when there is no app token:
`http_endpoint(baton, settings)` is `/slack/events`, mounted by the composition root on the
process's one HTTP server (BATON_WEB_PORT, bot/http.py; Bolt verifies the request signatures
with the signing secret), and `serve(baton, settings, endpoint=…)` opens it once the token is
checked. The adapter only translates: `inbound` (Slack -> ChatMessage), `blocks` and `forms`
(what the core laid out -> Block Kit, a modal), `sender` (Slack's calls: posting, editing,
uploading, telling the asker), `web_api` (Slack's errors), `app` (the listeners), `http` (the
events route), `formatting` (mrkdwn); the core decides (`core.commands.requests`,
`core.commands.preflight`, `core.commands.block_transport`, `core.delivery`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.app import SlackBridge, build_bridge
from adapters.slack.formatting import FORMAT
from adapters.slack.web_api import verify_token
from core.commands.lifecycle import stopped
from core.commands.requests import Host
from core.config import Settings

if TYPE_CHECKING:  # starlette: only in HTTP mode
    from adapters.slack.http import SlackEndpoint

log = logging.getLogger("baton.slack")

EVENTS_PATH = "/slack/events"


def http_endpoint(baton: Host, settings: Settings, *, client: AsyncWebClient | None = None) -> SlackEndpoint:
    """HTTP mode: the bridge and its `/slack/events` route, for the process's one HTTP server."""
    from adapters.slack.http import SlackEndpoint

    return SlackEndpoint(build_bridge(baton, settings, client=client))


async def serve(baton: Host, settings: Settings, *, client: AsyncWebClient | None = None,
                endpoint: SlackEndpoint | None = None) -> None:
    """Take Slack input until `baton.stopping` is set; then let queued replies go out.
    `endpoint`: HTTP mode's route (`http_endpoint`), served by the process's HTTP server."""
    if not settings.slack_enabled or settings.slack_bot_token is None:
        raise stopped(FORMAT, "not_configured")
    if settings.slack_app_token is None and endpoint is None:
        raise stopped(FORMAT, "http_mode_off")
    bridge = endpoint.bridge if endpoint is not None else build_bridge(baton, settings, client=client)
    bot_user = await verify_token(bridge.app.client)  # a revoked token stops here, in either mode
    try:
        if settings.slack_app_token is not None:
            socket = AsyncSocketModeHandler(bridge.app, settings.slack_app_token.get_secret_value())
            await socket.connect_async()
            baton.watch_platform("slack", socket.client.is_connected)
            log.info("slack connected (socket mode)",
                     extra={"action": "slack_started", "mode": "socket", "bot_user": bot_user})
            try:
                await baton.stopping.wait()
            finally:
                await socket.close_async()
        elif endpoint is not None:  # its route answers 503 once stopping (bot/http.py)
            endpoint.open()
            baton.watch_platform("slack", endpoint.listening)
            log.info("slack listening on port %d%s", settings.web_port, EVENTS_PATH,
                     extra={"action": "slack_started", "mode": "http", "port": settings.web_port,
                            "bot_user": bot_user})
            await baton.stopping.wait()
    finally:  # progress edits waiting for their turn: now; Slack's Web API still takes replies
        await baton.handler.wind_down(bridge.sender.delivery, close=False)


__all__ = ["EVENTS_PATH", "SlackBridge", "build_bridge", "http_endpoint", "serve"]
