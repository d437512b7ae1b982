"""A real Baton (SQLite, engine, handler) behind the real Bolt app over HTTP (mounted at
/slack/events on the process's one HTTP server, as `baton run` mounts it), talking to a
recording mock of Slack's Web API. Nothing of ours is mocked."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack import SlackBridge, build_bridge
from adapters.slack.http import SlackEndpoint
from bot.app import Baton, build_baton
from bot.http import bind
from bot.serve import http_server
from core.config import Access, Settings
from tests.e2e.slack.harness import SlackHarness
from tests.e2e.slack.mock_slack import MockSlack

WORKFLOWS = Path(__file__).parent / "workflows"
SIGNING_SECRET = "e2e-signing-secret"
BOT_TOKEN = "xoxb-e2e-not-a-real-token"


@dataclass
class SlackE2E:
    """What a test holds: Slack's side (`slack`), the recorded Web API calls (`mock`), the app."""

    slack: SlackHarness
    mock: MockSlack
    bridge: SlackBridge
    baton: Baton
    tmp: Path

    async def settle(self) -> None:
        """Wait until every background reply so far has been sent to the mock."""
        await self.baton.handler.drain()
        await self.bridge.sender.delivery.idle()


@pytest.fixture
async def mock_slack() -> AsyncIterator[MockSlack]:
    mock = MockSlack()
    await mock.start()
    try:
        yield mock
    finally:
        await mock.stop()


@pytest.fixture
def access() -> Access:
    return Access.everyone()


@pytest.fixture
def settings(tmp_path: Path, migrated_sqlite_url: str, access: Access) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        database_url=migrated_sqlite_url,
        workflow_dirs=[WORKFLOWS],
        data_dir=tmp_path / "data",
        tool_modules=[],
        access=access,
        slack_bot_token=BOT_TOKEN,  # type: ignore[arg-type]
        slack_signing_secret=SIGNING_SECRET,  # type: ignore[arg-type]
        # the chat flows under test make steps that look at marker files the test writes in
        # its own /tmp directory, which the step sandbox hides (it is tested through the same
        # wiring in tests/e2e/console/test_sandbox.py and the worker tests)
        step_sandbox="none",
    )


@asynccontextmanager
async def slack_baton(
    settings: Settings, mock: MockSlack, tmp_path: Path, *, environ: Mapping[str, str] | None = None
) -> AsyncIterator[SlackE2E]:
    """One Baton process with its Slack app over HTTP; a second one on the same database and
    the same mock Slack is the same bot after a restart. `environ`: the operator's environment
    the runtime is assembled from (this process's by default)."""
    baton = build_baton(settings, environ=environ)
    try:
        async with baton.running(handle_signals=False, grace=2.0):
            token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else BOT_TOKEN
            signing = settings.slack_signing_secret
            client = AsyncWebClient(token=token, base_url=mock.base_url)
            bridge = build_bridge(baton, settings, client=client)
            endpoint = SlackEndpoint(bridge)
            endpoint.open()  # `serve` opens it once the token is checked
            async with http_server(baton, settings, bind("127.0.0.1", 0), slack=endpoint) as port:
                secret = signing.get_secret_value() if signing else SIGNING_SECRET
                harness = SlackHarness(f"http://127.0.0.1:{port}/slack/events", secret, mock)
                try:
                    yield SlackE2E(harness, mock, bridge, baton, tmp_path)
                finally:
                    await harness.close()
            await bridge.sender.delivery.idle()
    finally:
        baton.close()


@pytest.fixture
async def e2e(settings: Settings, mock_slack: MockSlack, tmp_path: Path) -> AsyncIterator[SlackE2E]:
    async with slack_baton(settings, mock_slack, tmp_path) as e2e:
        yield e2e
