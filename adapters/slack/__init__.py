"""Baton on Slack (slack-bolt): `/workflow`, buttons, run threads, approvals by reply.

    await serve(baton, settings)     # until baton.stopping is set (or the task is cancelled)

Socket Mode (bot token + app-level token) by default; HTTP mode (Bolt verifies the request
signatures with the signing secret) on `settings.slack_port` when there is no app token.
The adapter only translates: `inbound` (Slack -> ChatMessage), `blocks` (Reply -> Block Kit),
`sender` (posting, editing, uploading), `web_api` (Slack's errors), `app` (the listeners).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.app import Baton, SlackBridge, build_app, build_bridge
from adapters.slack.web_api import verify_token
from core.config import Settings
from core.errors import ConfigurationError

#: Seconds `serve` waits, when it stops, for the progress edits and replies still being sent.
CLOSE_GRACE = 5.0
log = logging.getLogger("baton.slack")

EVENTS_PATH = "/slack/events"


async def start_http(app: AsyncApp, *, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Serve Bolt's aiohttp app (signature verification included); returns the bound port."""
    runner = web.AppRunner(app.web_app(path=EVENTS_PATH, port=port), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = port
    for address in runner.addresses:
        if isinstance(address, tuple):
            bound = int(address[1])
            break
    return runner, bound


def _listening(runner: web.AppRunner) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return bool(runner.sites) and runner.server is not None

    return probe


async def serve(baton: Baton, settings: Settings, *, client: AsyncWebClient | None = None) -> None:
    """Take Slack input until `baton.stopping` is set; then let queued replies go out."""
    if not settings.slack_enabled or settings.slack_bot_token is None:
        raise ConfigurationError(
            "Slack is not configured: BATON_SLACK_BOT_TOKEN and BATON_SLACK_APP_TOKEN "
            "(or BATON_SLACK_SIGNING_SECRET) are needed",
            hint="Set them as described in docs/slack.md and start Baton again.",
        )
    bridge = build_bridge(baton, settings, client=client)
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
        else:
            runner, port = await start_http(bridge.app, host="0.0.0.0", port=settings.slack_port)
            baton.watch_platform("slack", _listening(runner))
            log.info("slack listening on port %d%s", port, EVENTS_PATH,
                     extra={"action": "slack_started", "mode": "http", "port": port, "bot_user": bot_user})
            try:
                await baton.stopping.wait()
            finally:
                await runner.cleanup()
    finally:
        baton.handler.progress.hurry()  # progress edits waiting for their turn: now
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(baton.handler.drain(), CLOSE_GRACE)
        await bridge.sender.idle()


__all__ = ["EVENTS_PATH", "SlackBridge", "build_app", "build_bridge", "serve", "start_http"]
