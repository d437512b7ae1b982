"""Discord's one-message operations (`core.commands.text_transport.Messages`), and the places of
an interaction's responses (`Sends`: its deferred response, its follow-ups).

The core's delivery service (`core.delivery.service`) decides where a reply goes, whether a
keyed message is edited or posted anew, the size policy and what becomes of a run's thread; the
core's text transport (`core.commands.text_transport`) makes the reply's messages (texts, the
file, the nonce, who may be pinged, the buttons laid out) and hands this module one message at
a time. It posts, edits, deletes and opens threads, and answers what it did, never calling back.

- `AllowedMentions.none()` on every message the bot posts, but for the people a reply calls
  (`Reply.pings`): everyone else a message names shows as a mention, never a ping.
- `starts_thread`: a thread is opened from the posted message. The interaction's follow-up
  webhook is the run's follow-up (15 minutes).
- What Discord's failures mean is data the core reads (`FAILURES`): a place refusing the reply
  (the next place), a failure that may pass (5xx after discord.py's own retries, a dropped
  connection: sent again later), a message deleted meanwhile, a file too large.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import aiohttp
import discord

from adapters.discord.buttons import RULES, build_view
from adapters.discord.formatting import FORMAT
from core.commands.handler import Handler
from core.commands.text_messages import texts
from core.commands.text_transport import Failures, Part, TextTransport
from core.delivery.service import DeliveryService

PLATFORM = "discord"
NONCE_LENGTH = 25  # Discord's limit
NO_MENTIONS = discord.AllowedMentions.none()
ARCHIVE: Literal[1440] = 1440  # a run's thread is archived after a day without messages
FOLLOW_UP_TTL = 14 * 60.0  # an interaction token lives 15 minutes
UNKNOWN_MESSAGE = 10008
#: Failures that may pass: the newest state is sent again later (`NotDelivered`).
TRANSIENT = (discord.DiscordServerError, discord.RateLimited, aiohttp.ClientError, OSError, TimeoutError)
#: Refused: deleted (10003), no access (50001, 50013), not a channel id; gone: an edited message
#: deleted meanwhile (10008); a follow-up refused but for a 5xx: its token expired (50027).
FAILURES = Failures(
    refused=(discord.Forbidden, discord.NotFound, ValueError), transient=TRANSIENT,
    api=(discord.HTTPException,),
    gone=lambda exc: isinstance(exc, discord.NotFound) and exc.code == UNKNOWN_MESSAGE,
    too_large=lambda exc: isinstance(exc, discord.HTTPException) and exc.status == 413,
    expired=lambda exc: isinstance(exc, discord.HTTPException) and exc.status < 500)

#: Posts one message (its text, file and buttons) -> the message Discord made.
Send = Callable[[Part], Awaitable[discord.Message]]


def allowed_mentions(pings: Sequence[str]) -> discord.AllowedMentions:
    """No mention pings, but those of the people a reply calls (`Reply.pings`: their ids)."""
    users = [discord.Object(int(u)) for u in pings if u.isdigit()]
    if not users:
        return NO_MENTIONS
    return discord.AllowedMentions(everyone=False, roles=False, replied_user=False, users=users)


def _send(post: Callable[..., Awaitable[discord.Message | None]], fixed: dict[str, object], *,
          attachments: bool = False) -> Send:
    """`post` (a channel's send, a follow-up's, the edit of the deferred answer) as a `Send`;
    `attachments`: it takes its file as a list of attachments."""

    async def send(part: Part) -> discord.Message:
        extra = dict(fixed)
        if part.file is not None:
            file = discord.File(io.BytesIO(part.file[1]), filename=part.file[0])
            extra["attachments" if attachments else "file"] = [file] if attachments else file
        if (view := build_view(part.controls)) is not None:
            extra["view"] = view
        return await post(content=part.text, **extra)  # type: ignore[return-value]

    return send


def channel_send(channel: discord.abc.Messageable, nonce: str | None = None,
                 mentions: discord.AllowedMentions = NO_MENTIONS) -> Send:
    """`nonce`: discord.py sends it with `enforce_nonce: true`, so Discord answers a repeat
    within a few minutes with the message it made the first time instead of posting again."""
    once: dict[str, object] = {"nonce": nonce} if nonce is not None else {}
    return _send(channel.send, {"allowed_mentions": mentions, **once})


def followup_send(interaction: discord.Interaction, *, ephemeral: bool) -> Send:
    return _send(interaction.followup.send,
                 {"wait": True, "ephemeral": ephemeral, "allowed_mentions": NO_MENTIONS})


def original_edit(interaction: discord.Interaction) -> Send:
    """Replaces the deferred "thinking…" response of a slash command."""
    return _send(interaction.edit_original_response, {"allowed_mentions": NO_MENTIONS}, attachments=True)


@dataclass(frozen=True, slots=True)
class Sends:
    """A place of an interaction's own: the first message goes by `first` (e.g. the edit of the
    deferred "thinking…" response), the rest by `rest` (its follow-ups)."""

    first: Send
    rest: Send


@dataclass
class DiscordSender:
    """Discord's one-message operations (`post`, `edit`, `delete`, `open_thread`, `person`), and
    what its failures mean (`FAILURES`)."""

    client: discord.Client
    handler: Handler
    attach_over: int = 8000
    platform: str = PLATFORM
    thread_is_place: bool = True  # a thread is a channel of its own, tried before its channel
    failures: Failures = FAILURES
    #: the core's delivery service for Discord (registered as its outbox by the client)
    delivery: DeliveryService = field(init=False)

    def __post_init__(self) -> None:
        handler = self.handler  # the runtime's one redactor; the core's store of long button commands
        compose = texts(FORMAT, handler.redactor, attach_over=self.attach_over, nonce_length=NONCE_LENGTH,
                        controls=RULES, keep=handler.buttons.keep)
        self.delivery = handler.delivery_service(TextTransport(self, FORMAT), compose)

    # -- one message ------------------------------------------------------------------------
    async def post(self, place: object, part: Part) -> tuple[str, str, discord.Message]:
        if isinstance(place, Sends):
            send = place.first if part.first else place.rest
        else:
            channel_id = int(str(place))
            channel = self.client.get_channel(channel_id) or self.client.get_partial_messageable(channel_id)
            # the first message carries the nonce (a redelivered outbox row posts it once)
            send = channel_send(channel, part.nonce, allowed_mentions(part.pings))  # type: ignore[arg-type]
        message = await send(part)
        return str(message.channel.id), str(message.id), message

    async def edit(self, place: str, message_id: str, part: Part) -> None:
        shown = self.client.get_partial_messageable(int(place)).get_partial_message(int(message_id))
        await _send(shown.edit, {"allowed_mentions": NO_MENTIONS, "view": None}, attachments=True)(part)

    async def delete(self, place: str, message_id: str) -> None:
        channel = self.client.get_partial_messageable(int(place))
        with contextlib.suppress(discord.NotFound):
            await channel.get_partial_message(int(message_id)).delete()

    async def person(self, user: str) -> str:
        """The direct message channel with `user`."""
        return str((await self.client.create_dm(discord.Object(int(user)))).id)

    async def open_thread(self, message: discord.Message, name: str) -> str:
        """The run's thread, opened from `message` (or the one it is in)."""
        if isinstance(message.channel, discord.Thread):
            return str(message.channel.id)
        if message.guild is not None:
            return str((await message.create_thread(name=name[:100], auto_archive_duration=ARCHIVE)).id)
        # a followup message knows its channel only by id
        data = await self.client.http.start_thread_with_message(
            message.channel.id, message.id, name=name[:100],
            auto_archive_duration=ARCHIVE, rate_limit_per_user=None,
        )
        return str(int(data["id"]))
