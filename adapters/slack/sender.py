"""Slack's calls for the core: the wire of its block transport (`core.commands.block_transport`)
and the asker of its requests (`core.commands.requests`). Slack's own mechanics here:

- A message is `text` (the notification) and Block Kit `blocks` (`blocks.py`); one posted to a
  user id lands in their DM (`D…`), the id chat.update needs.
- A message of an outbox row carries the row in its metadata (`baton_outbox`): Slack has no
  idempotency key, so a redelivery lists the thread or channel (`recent`) for it first.
- Text too long for a message's blocks is uploaded whole as a file snippet in its thread.
- The asker is told through the request's `response_url` (30 minutes, 5 uses), kept as a run's
  follow-up, else with an ephemeral message.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from adapters.slack import forms as slack_forms
from adapters.slack import inbound
from adapters.slack.blocks import RULES, build_message, chosen_blocks, home_view
from adapters.slack.formatting import FORMAT
from adapters.slack.inbound import PLATFORM
from adapters.slack.web_api import CHANNEL_ERRORS, call, display_names
from core.commands.block_messages import Layout, blocks
from core.commands.block_transport import BlockTransport
from core.commands.handler import Handler
from core.commands.messages import Form
from core.commands.preflight import Conversation
from core.commands.requests import Origin
from core.delivery.edits import Posted
from core.delivery.failures import CallFailed
from core.delivery.names import Names
from core.delivery.redelivery import Seen

log = logging.getLogger("baton.slack")

STALE_MESSAGE = frozenset({"message_not_found", "cant_update_message", "edit_window_closed"})
USER_IDS = r"[UW][A-Z0-9]{2,}"  # a person's immutable id: their name is looked up, never pinged
#: A slash command's response URL: "up to five times within thirty minutes of receipt".
RESPONSE_URL_TTL = 30 * 60.0
RESPONSE_URL_USES = 5
#: the metadata event type of an outbox row's messages (`core.delivery.redelivery`)
OUTBOX_EVENT = "baton_outbox"


class SlackSender:
    #: the bot removed, the channel archived or gone: the service tries the next place
    refusals = CHANNEL_ERRORS

    def __init__(self, client: AsyncWebClient, handler: Handler, *, threads: bool = True) -> None:
        self._client = client
        #: people's names, so a message names them without pinging them (`core.delivery.names`)
        self.names = Names(PLATFORM, USER_IDS, functools.partial(display_names, client))
        #: the core's delivery service for Slack: background replies and answers go through it
        compose = blocks(FORMAT, RULES, handler.redactor, self.names, handler.buttons)
        transport = BlockTransport(self, FORMAT)
        self.delivery = handler.register_transport(transport, threads=threads, compose=compose)

    # -- the wire (`core.commands.block_transport.Wire`) ---------------------------------------
    async def post(self, channel: str, thread: str | None, layout: Layout) -> tuple[str, str]:
        once = layout.once
        metadata = None if once is None else {"event_type": OUTBOX_EVENT, "event_payload": once}
        response = await call(self._client, "chat.postMessage", channel=channel, thread_ts=thread,
                              unfurl_links=False, metadata=metadata, **build_message(layout))
        return str(response.get("channel") or channel), str(response["ts"])

    async def edit(self, channel: str, kept: Posted, layout: Layout) -> bool:
        """chat.update; a reply to a user id (`U…`/`W…`) shows in the DM (`D…`) it landed in."""
        if kept.place != channel and not (channel[:1] in ("U", "W") and kept.place[:1] == "D"):
            return False
        try:
            await call(self._client, "chat.update", channel=kept.place, ts=kept.ids[0],
                       **build_message(layout))
        except CallFailed as exc:
            if exc.error not in STALE_MESSAGE:
                raise
            return False
        return True

    async def upload(self, channel: str, root: str, layout: Layout) -> None:
        """The whole text as a snippet (`upload`), and the file the reply carries, in its thread."""
        if layout.upload is not None:
            await call(self._client, "files.uploadV2", channel=channel, thread_ts=root, content=layout.upload,
                       filename=layout.filename, title=layout.filename, snippet_type="text")
        if layout.file is not None:  # a file the reply carries (`audit --since`), in the same thread
            await call(self._client, "files.uploadV2", channel=channel, thread_ts=root,
                       content=(layout.file.content or b"").decode("utf-8"), filename=layout.file.name,
                       title=layout.file.name)

    async def respond(self, url: str, layout: Layout | str) -> bool:
        """Post through a response URL, visible in the channel."""
        kwargs = {"text": layout} if isinstance(layout, str) else build_message(layout)
        return await _hook(url, response_type="in_channel", replace_original=False, **kwargs)

    async def say(self, channel: str, text: str) -> None:
        await call(self._client, "chat.postMessage", channel=channel, text=text)

    async def recent(self, place: str, thread: str | None, oldest: float, limit: int,
                     cursor: str | None) -> tuple[list[Seen], str | None] | None:
        """`conversations.replies` (in a thread) or `.history`; a DM by user id has no `D…` id yet."""
        if place[:1] in ("U", "W"):
            return None
        response = await call(self._client, "conversations.replies" if thread else "conversations.history",
                              as_query=True, channel=place, ts=thread, cursor=cursor, oldest=f"{oldest:.6f}",
                              limit=limit, include_all_metadata=True)
        seen = [_seen(message) for message in response.get("messages") or []]
        return seen, (response.get("response_metadata") or {}).get("next_cursor") or None

    async def own(self) -> tuple[str, str]:
        """(bot_id, app_id) of this bot (`auth.test`)."""
        response = await call(self._client, "auth.test")
        return str(response.get("bot_id") or ""), str(response.get("app_id") or "")

    # -- the asker of a request (`core.commands.requests.Asker`) -----------------------------
    async def tell(self, origin: Origin, text: str) -> None:
        """Tell the asking user only: through the response URL, else an ephemeral message."""
        if origin.follow_up:
            await _hook(origin.follow_up, text=text, response_type="ephemeral", replace_original=False)
            return
        try:
            await call(self._client, "chat.postEphemeral", channel=origin.channel, user=origin.user,
                       text=text, thread_ts=origin.thread)
        except CallFailed as exc:
            log.warning("could not tell the user: %s", exc.error,
                        extra={"action": "slack_tell_failed", "channel": origin.channel})

    async def open_form(self, form: Form, origin: Origin, place: str) -> bool:
        """A modal, opened with the request's trigger id (valid 3 s)."""
        try:
            await call(self._client, "views.open", trigger_id=origin.trigger,
                       view=slack_forms.modal(form, place))
        except CallFailed:
            return False  # logged where it was translated (e.g. expired_trigger_id)
        return True

    async def ephemeral(self, origin: Origin, channel: str, thread: str | None, layout: Layout) -> None:
        """chat.postEphemeral; where the bot is not a member, the request's response URL."""
        message = build_message(layout)
        try:
            await call(self._client, "chat.postEphemeral", channel=channel, user=origin.user,
                       thread_ts=thread, **message)
        except CallFailed as exc:
            if exc.error not in CHANNEL_ERRORS or not origin.follow_up:
                raise
            await _hook(origin.follow_up, response_type="ephemeral", replace_original=False, **message)

    async def mark_chosen(self, clicked: Mapping[str, Any] | None, origin: Origin, note: str) -> None:
        """Show who chose what (`note`) on the `clicked` message and remove its buttons, so they
        cannot be used twice; an ephemeral message has no `ts`: only its response URL edits it."""
        try:
            if clicked and clicked.get("ts"):
                blocks = chosen_blocks(clicked.get("blocks") or [], note)
                await call(self._client, "chat.update", channel=origin.channel, ts=clicked["ts"],
                           text=clicked.get("text") or note, blocks=blocks)
            elif origin.follow_up:
                await _hook(origin.follow_up, text=note, replace_original=True)
        except CallFailed as exc:
            log.warning("could not mark the choice: %s", exc.error,
                        extra={"action": "slack_mark_chosen", "channel": origin.channel})

    async def publish_home(self, user: str, chunks: list[str]) -> None:
        await call(self._client, "views.publish", user_id=user, view=home_view(chunks))

    async def conversation(self, channel: str, name: str | None) -> Conversation:
        """What `conversations.info` says of where a command was typed (`core.commands.preflight`):
        one the bot cannot see (a private channel or group DM it was not added to, a direct message
        between two people) Slack answers as `channel_not_found` (or `not_in_channel`)."""
        try:
            response = await call(self._client, "conversations.info", channel=channel)
        except CallFailed as exc:
            if exc.error not in ("channel_not_found", "not_in_channel"):
                raise
            return inbound.conversation(channel, name, {})
        return inbound.conversation(channel, name, response.get("channel") or {})


async def _hook(url: str, **body: Any) -> bool:
    """POST `body` to a response URL; False (logged) when it was refused (expired, used up) or
    Slack could not be reached."""
    try:
        response = await AsyncWebhookClient(url).send(**body)
    except OSError as exc:
        log.warning("response url unreachable: %s", type(exc).__name__,
                    extra={"action": "slack_response_url_refused"})
        return False
    if response.status_code != 200:
        log.warning("response url refused: %s", response.body,
                    extra={"action": "slack_response_url_refused", "status": response.status_code})
        return False
    return True


def _seen(message: Mapping[str, Any]) -> Seen:
    """A listed message: its ts, the outbox key its metadata carries, and who posted it."""
    metadata = message.get("metadata") or {}
    ours = metadata.get("event_type") == OUTBOX_EVENT
    key = (metadata.get("event_payload") or {}).get("key") if ours else None
    return Seen(str(message["ts"]), key, str(message.get("bot_id") or ""), str(message.get("app_id") or ""))

