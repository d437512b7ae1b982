"""Slack's transport (`core.delivery.transport.Transport`) and its answers to requests.

The core's delivery service (`core.delivery.service`) decides where each reply goes and
whether a keyed message is edited or posted anew; this module posts, edits and uploads, and
answers what it did, never calling back. Slack's own mechanics here:

- Answers to a request (`deliver`) go out in order before the listener returns: a form as a
  modal, an ephemeral answer privately, the rest through the service, which keeps the request's
  `response_url` as the run's follow-up (30 minutes, 5 uses).
- A message of an outbox row carries the row in its metadata (`baton_outbox`). Slack has no
  idempotency key: on a redelivery the core looks through the thread or channel first
  (`core.delivery.redelivery`), through the messages and authors this transport lists (`recent`).
- Text too long for a message's blocks is uploaded whole as a file snippet in the thread, with
  the first section and a note in the message, when the service says it may (`attach`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from adapters.slack import forms as slack_forms
from adapters.slack.blocks import RULES, SlackMessage, build_message
from adapters.slack.formatting import FORMAT, said
from adapters.slack.inbound import PLATFORM
from adapters.slack.web_api import CHANNEL_ERRORS, SlackCallFailed, call, display_names, read
from core.commands.block_messages import Layout, blocks
from core.commands.handler import Handler
from core.commands.messages import Form, Reply
from core.commands.requests import Origin
from core.delivery.edits import NotDelivered, Outgoing, Posted
from core.delivery.fallbacks import DIRECT, FOLLOW_UP
from core.delivery.names import Names
from core.delivery.redelivery import Seen
from core.delivery.transport import Sent
from core.errors import PlatformError

log = logging.getLogger("baton.slack")

STALE_MESSAGE = frozenset({"message_not_found", "cant_update_message", "edit_window_closed"})
USER_IDS = r"[UW][A-Z0-9]{2,}"  # a person's immutable id: their name is looked up, never pinged
#: A slash command's response URL: "up to five times within thirty minutes of receipt".
RESPONSE_URL_TTL = 30 * 60.0
RESPONSE_URL_USES = 5
#: the metadata event type of an outbox row's messages (`core.delivery.redelivery`)
OUTBOX_EVENT = "baton_outbox"


class SlackSender:
    """Slack's transport (`post`, `edit`, `follow_up`, `person`, `moved`, `refusal`, `failed`)
    and the answers to its requests (`deliver`, `tell`)."""

    platform = PLATFORM
    thread_is_place = False  # a thread lives in its channel

    def __init__(self, client: AsyncWebClient, handler: Handler, *, threads: bool = True) -> None:
        self._client = client
        self._handler = handler
        #: people's names, so a message names them without pinging them (`core.delivery.names`)
        self.names = Names(PLATFORM, USER_IDS, functools.partial(display_names, client))
        #: (bot_id, app_id) of this bot (`auth.test`), asked for at the first redelivery look-up
        self._own: tuple[str, str] | None = None
        #: the core's delivery service for Slack: background replies and answers go through it
        compose = blocks(FORMAT, RULES, handler.redactor, self.names, handler.buttons)
        self.delivery = handler.register_transport(self, threads=threads, compose=compose)

    # -- the asker of a request (`core.commands.requests.Asker`) -----------------------------
    async def tell(self, origin: Origin, text: str) -> None:
        """Tell the asking user only: through the response URL, else an ephemeral message."""
        try:
            if origin.follow_up:
                await AsyncWebhookClient(origin.follow_up).send(
                    text=text, response_type="ephemeral", replace_original=False
                )
            else:
                await call(self._client, "chat.postEphemeral", channel=origin.channel, user=origin.user,
                           text=text, thread_ts=origin.thread)
        except (SlackCallFailed, OSError) as exc:
            log.warning("could not tell the user: %s", type(exc).__name__,
                        extra={"action": "slack_tell_failed", "channel": origin.channel})

    async def idle(self) -> None:
        """Wait until every background reply handed over so far has been sent."""
        await self.delivery.idle()

    # -- the transport ---------------------------------------------------------------------
    @staticmethod
    def _where(place: str, reply: Outgoing) -> tuple[str, str | None]:
        """(channel, thread) of `place`: the reply's conversation and thread, or a person's id
        (their DM)."""
        return place, reply.to.thread if place == reply.to.conversation else None

    async def post(self, place: str, reply: Outgoing, layout: Layout, *, attach: bool, opens: bool) -> Sent:
        """chat.postMessage; posted to a user id, a message lands in their DM (`D…`), the id
        chat.update needs. An outbox row's message carries the row in its metadata."""
        return await self.landed(place, reply, layout, None, attach=attach)

    async def landed(self, place: str, reply: Outgoing, layout: Layout, posted: str | None, *,
                     attach: bool) -> Sent:
        """`post`, the message posted already as `posted` (an earlier attempt's) or now (None)."""
        assert isinstance(reply, Reply)
        channel, thread = self._where(place, reply)
        message = self._message(layout)
        landed = channel
        if posted is None:
            once = layout.once
            metadata = None if once is None else {"event_type": OUTBOX_EVENT, "event_payload": once}
            response = await call(self._client, "chat.postMessage", channel=channel, thread_ts=thread,
                                  unfurl_links=False, metadata=metadata, **message.as_kwargs())
            landed, posted = str(response.get("channel") or channel), str(response["ts"])
        root = thread or posted
        await self._files(layout, channel, root)
        return Sent(Posted(landed, (posted,)), thread=root, filed=layout.upload is not None)

    async def recent(self, place: str, thread: str | None, oldest: float, limit: int,
                     cursor: str | None) -> tuple[list[Seen], str | None] | None:
        """A page of `conversations.replies` (in a thread) or `.history`; None for a DM by user id
        (its `D…` id is not known)."""
        if place[:1] in ("U", "W"):
            return None
        response = await read(self._client, "conversations.replies" if thread else "conversations.history",
                              channel=place, ts=thread, cursor=cursor, oldest=f"{oldest:.6f}", limit=limit,
                              include_all_metadata=True)
        seen = [_seen(message) for message in response.get("messages") or []]
        return seen, (response.get("response_metadata") or {}).get("next_cursor") or None

    async def own(self) -> tuple[str, str]:
        """(bot_id, app_id) of this bot (`auth.test`, asked once)."""
        if self._own is None:
            response = await call(self._client, "auth.test")
            self._own = (str(response.get("bot_id") or ""), str(response.get("app_id") or ""))
        return self._own

    async def edit(self, place: str, posted: Posted, reply: Outgoing, layout: Layout, *,
                   attach: bool) -> Sent | None:
        """chat.update the message kept as `posted`; None when it is gone (deleted meanwhile)
        or elsewhere than `place`."""
        assert isinstance(reply, Reply)
        channel, thread = self._where(place, reply)
        if not _same_place(posted, channel):
            return None
        message = self._message(layout)
        try:
            await call(self._client, "chat.update", channel=posted.place, ts=posted.ids[0],
                       **message.as_kwargs())
        except SlackCallFailed as exc:
            if exc.error not in STALE_MESSAGE:
                raise
            return None
        if reply.how.edit_only:  # a decided gate's message: only its text changes
            return Sent(posted)
        root = thread or posted.ids[0]
        await self._files(layout, channel, root)
        return Sent(posted, thread=root, filed=layout.upload is not None)

    async def follow_up(self, handle: str, reply: Outgoing, layout: Layout, *, attach: bool) -> bool:
        assert isinstance(reply, Reply)
        return await self._respond(handle, self._message(layout))

    async def person(self, user: str) -> str:
        return user  # posting to a user id opens the app's DM with them

    async def moved(self, how: str, to: str | None, reply: Outgoing, error: str) -> bool:
        run_id = reply.run_id or ""
        if how == FOLLOW_UP:
            return to is not None and await self._respond(
                to, said("moved_here", run_id, reply.to.conversation or "", error))
        if how == DIRECT and to:
            await call(self._client, "chat.postMessage", channel=to,
                       text=said("moved", run_id, reply.to.conversation or "", error))
        return True

    def refusal(self, exc: BaseException, reply: Outgoing) -> str | None:
        """The bot removed, the channel archived or gone (the service tries the next place)."""
        return exc.error if isinstance(exc, SlackCallFailed) and exc.error in CHANNEL_ERRORS else None

    def failed(self, exc: Exception, reply: Outgoing) -> None:
        if isinstance(exc, SlackCallFailed) and exc.transient:  # logged where it was translated
            raise NotDelivered(exc.error) from exc
        if not isinstance(exc, PlatformError):  # a PlatformError was logged where it was translated
            log.error("slack delivery failed", exc_info=exc,
                      extra={"action": "slack_send", "run_id": reply.run_id})

    async def _respond(self, url: str, message: SlackMessage | str) -> bool:
        """Post through a response URL, visible in the channel; False when it was refused
        (expired, used up) or Slack could not be reached."""
        kwargs = {"text": message} if isinstance(message, str) else message.as_kwargs()
        try:
            response = await AsyncWebhookClient(url).send(
                response_type="in_channel", replace_original=False, **kwargs)
        except OSError as exc:
            log.warning("response url unreachable: %s", type(exc).__name__,
                        extra={"action": "slack_response_url_refused"})
            return False
        if response.status_code != 200:
            log.warning("response url refused: %s", response.body,
                        extra={"action": "slack_response_url_refused", "status": response.status_code})
            return False
        return True

    # -- sending one reply -------------------------------------------------------------------
    @staticmethod
    def _message(layout: Layout) -> SlackMessage:
        """The blocks of a reply the core laid out (`core.commands.block_messages`)."""
        return build_message(layout.sections, layout.buttons, menus=layout.menus, note=layout.note,
                             text=layout.fallback)

    async def _files(self, layout: Layout, channel: str, root: str) -> None:
        """The whole text as a snippet (`upload`), and the file the reply carries, in its thread."""
        if layout.upload is not None:
            await call(self._client, "files.uploadV2", channel=channel, thread_ts=root, content=layout.upload,
                       filename=layout.filename, title=layout.filename, snippet_type="text")
        if layout.file is not None:  # a file the reply carries (`audit --since`), in the same thread
            await call(self._client, "files.uploadV2", channel=channel, thread_ts=root,
                       content=(layout.file.content or b"").decode("utf-8"), filename=layout.file.name,
                       title=layout.file.name)

    async def open_form(self, form: Form, origin: Origin, place: str) -> bool:
        """Open `form` as a modal with the request's trigger id (valid 3 s); False when Slack
        refused it (the reply's text, which says what to type, is posted instead)."""
        try:
            await call(self._client, "views.open", trigger_id=origin.trigger,
                       view=slack_forms.modal(form, place))
        except SlackCallFailed:
            return False  # logged where it was translated (e.g. expired_trigger_id)
        return True

    async def ephemeral(self, origin: Origin, channel: str, thread: str | None, layout: Layout) -> None:
        """chat.postEphemeral; where the bot is not a member, the request's response URL."""
        message = self._message(layout)
        try:
            await call(self._client, "chat.postEphemeral", channel=channel, user=origin.user,
                       thread_ts=thread, **message.as_kwargs())
        except SlackCallFailed as exc:
            if exc.error not in CHANNEL_ERRORS or not origin.follow_up:
                raise
            await AsyncWebhookClient(origin.follow_up).send(
                response_type="ephemeral", replace_original=False, **message.as_kwargs()
            )


def _seen(message: Mapping[str, Any]) -> Seen:
    """A listed message: its ts, the outbox key its metadata carries, and who posted it."""
    metadata = message.get("metadata") or {}
    ours = metadata.get("event_type") == OUTBOX_EVENT
    key = (metadata.get("event_payload") or {}).get("key") if ours else None
    return Seen(str(message["ts"]), key, str(message.get("bot_id") or ""), str(message.get("app_id") or ""))


def _same_place(posted: Posted, channel: str) -> bool:
    """Whether a message kept as `posted` is the one a reply to `channel` would edit: the same
    conversation, or, for a reply to a user id (`U…`/`W…`), the DM (`D…`) it landed in."""
    return posted.place == channel or (channel[:1] in ("U", "W") and posted.place[:1] == "D")
