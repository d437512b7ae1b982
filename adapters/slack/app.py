"""The Bolt `AsyncApp`'s listeners: each acknowledges, translates Slack's body (`inbound.py`)
and hands it to the core's `Requests` (`core.commands.requests`), which answers it.

    /workflow <text>             -> Requests.command (a `run` first checked: `core.commands.preflight`)
    button click / choice        -> Requests.click
    view_submission (form)       -> Requests.form (its errors on its fields: `forms.block_errors`)
    message (thread/DM), mention -> Requests.process; bots, edits and joins ignored
    app_home_opened              -> Requests.home_opened

`process_before_response=False` (Bolt's default): Bolt answers Slack as soon as `ack()` is
called, well within Slack's 3 seconds, and the listener goes on in the background.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack import forms as slack_forms
from adapters.slack import inbound
from adapters.slack.blocks import ACTION_PREFIX
from adapters.slack.formatting import FORMAT
from adapters.slack.sender import RESPONSE_URL_TTL, RESPONSE_URL_USES, SlackSender
from adapters.slack.web_api import with_retries
from core.commands.preflight import Preflight
from core.commands.requests import Host, Requests
from core.config import Settings


@dataclass(frozen=True)
class SlackBridge:
    """The Bolt app and the sender it posts through (tests wait on `sender.delivery.idle()`)."""

    app: AsyncApp
    sender: SlackSender
    preflight: Preflight
    #: the core's answers to Slack's requests (commands, clicks, forms, messages)
    requests: Requests

    async def on_command(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        message, origin = inbound.slash_command(body)
        await self.requests.command(message, origin, ack, refusal=lambda: self.preflight.refusal(
            origin.channel, body.get("channel_name")))

    async def on_action(self, ack: AsyncAck, body: dict[str, Any], action: dict[str, Any]) -> None:
        name, value, label = inbound.chosen(action)
        withdraw = functools.partial(self.sender.mark_chosen, body.get("message"))
        await self.requests.click(value, lambda command: inbound.button_click(body, action, command), ack,
                                  name, label, withdraw)

    async def on_form(self, ack: AsyncAck, body: dict[str, Any], view: dict[str, Any]) -> None:
        """A form submitted: its errors go back onto its fields (the modal stays open)."""
        async def refuse(errors: Mapping[str, str]) -> None:
            await ack(response_action="errors", errors=slack_forms.block_errors(errors, view))

        await self.requests.form(str(view.get("private_metadata", "")), lambda place: inbound.form_submission(
            body, place.command, place.channel, place.thread), slack_forms.submitted(view), refuse, ack)

    async def on_home(self, event: dict[str, Any]) -> None:
        """`app_home_opened`, sent for the app's Messages tab too (`tab`)."""
        if event.get("tab") in (None, "home") and event.get("user"):
            await self.requests.home_opened(str(event["user"]))

    async def on_message(self, event: dict[str, Any], context: AsyncBoltContext) -> None:
        """A `message` or an `app_mention` (both deliveries of one message are one event)."""
        mentioned = event.get("type") == "app_mention"
        parsed = inbound.chat_event(event, bot_user_id=context.bot_user_id, mentioned=mentioned)
        if parsed is not None:
            await self.requests.process(*parsed)


def _secret(value: Any) -> str | None:
    return value.get_secret_value() if value is not None else None


def build_bridge(
    baton: Host, settings: Settings, *, client: AsyncWebClient | None = None
) -> SlackBridge:
    """Wire an `AsyncApp` to the core (the sender registers Slack's transport with the handler)."""
    token = _secret(settings.slack_bot_token)
    client = with_retries(client or AsyncWebClient(token=token, base_url=settings.slack_api_url))
    app = AsyncApp(
        client=client,
        signing_secret=_secret(settings.slack_signing_secret) or "",
        process_before_response=False,
        logger=logging.getLogger("baton.slack.bolt"),
    )
    sender = SlackSender(client, baton.handler)
    requests = Requests(baton.handler, sender.delivery, sender, FORMAT, sender.names,
                        follow_up=(RESPONSE_URL_TTL, RESPONSE_URL_USES),
                        form_place_limit=slack_forms.METADATA_LIMIT, home=sender.publish_home)
    preflight = Preflight(sender.conversation, FORMAT)
    bridge = SlackBridge(app=app, sender=sender, preflight=preflight, requests=requests)
    app.command(re.compile(r"^/workflow"))(bridge.on_command)
    app.action(re.compile("^" + re.escape(ACTION_PREFIX)))(bridge.on_action)
    app.view(slack_forms.CALLBACK_ID)(bridge.on_form)
    app.event("message")(bridge.on_message)
    app.event("app_mention")(bridge.on_message)
    app.event("app_home_opened")(bridge.on_home)
    return bridge


__all__: Sequence[str] = ("SlackBridge", "build_bridge")
