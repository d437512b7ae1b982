"""Slack's HTTP mode: `/slack/events` as a route of the process's one HTTP server (bot/http.py).

Bolt's own Starlette adapter translates the request and the response; Bolt verifies every
request's signature (and its timestamp) with BATON_SLACK_SIGNING_SECRET and answers 401 to a
bad one before any listener runs. The route answers 503 until `serve` has checked the bot
token (`open()`): Slack retries, so nothing is handled by a process about to refuse its token.
"""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager, nullcontext

from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from adapters.slack import EVENTS_PATH
from adapters.slack.app import SlackBridge
from adapters.slack.formatting import FORMAT


class SlackEndpoint:
    """The events route of one `SlackBridge`."""

    def __init__(self, bridge: SlackBridge) -> None:
        self.bridge = bridge
        self._bolt = AsyncSlackRequestHandler(bridge.app)
        self._open = asyncio.Event()

    def open(self) -> None:
        """Take events from now on (the bot token was accepted)."""
        self._open.set()

    async def listening(self) -> bool:
        """The /readyz probe of Slack in HTTP mode."""
        return self._open.is_set()

    @property
    def routes(self) -> list[BaseRoute]:
        return [Route(EVENTS_PATH, self.events, methods=["POST"])]

    def running(self) -> AbstractAsyncContextManager[None]:
        return nullcontext()  # nothing lives with the route

    async def events(self, request: Request) -> Response:
        if not self._open.is_set():
            return PlainTextResponse(FORMAT.said("not_connected"), status_code=503)
        return await self._bolt.handle(request)
