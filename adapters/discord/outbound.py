"""Discord's transport (`core.delivery.transport.Transport`) and its answers to interactions.

The core's delivery service (`core.delivery.service`) decides where a reply goes, whether a
keyed message is edited or posted anew, the size policy (`attach`) and what becomes of a run's
thread, and hands each operation the message the core made of the reply
(`core.commands.text_messages.Message`: texts, the file, the nonce, who may be pinged). This
module posts, edits and uploads, and answers what it did, never calling back.

- `AllowedMentions.none()` on every message the bot posts, but for the people a reply calls
  (`Reply.pings`): everyone else a message names shows as a mention, never a ping.
- An edited message deleted meanwhile (10008) is posted again where it was; a 413 for the
  attached text posts every chunk as a message of its own.
- `starts_thread`: a thread is opened from the posted message (`Sent.thread`; None where none
  can be, e.g. a DM). The interaction's follow-up webhook is the run's follow-up (15 minutes).
- Refusals (deleted: 10003, no access: 50001 / 50013) send the reply to the next place; a
  failure that may pass (5xx after discord.py's own retries, a dropped connection) is raised as
  `NotDelivered`: the core sends the newest state again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import aiohttp
import discord

from adapters.discord.buttons import build_view
from adapters.discord.formatting import FORMAT
from core.commands.handler import Handler
from core.commands.messages import Reply
from core.commands.text_messages import Message, texts
from core.delivery.edits import NotDelivered, Outgoing, Posted
from core.delivery.fallbacks import FOLLOW_UP
from core.delivery.service import DeliveryService
from core.delivery.transport import Sent
from core.render import redacted, sentence

PLATFORM = "discord"
NONCE_LENGTH = 25  # Discord's limit
NO_MENTIONS = discord.AllowedMentions.none()
THREAD_ARCHIVE_MINUTES: Literal[1440] = 1440  # a day without messages
FOLLOW_UP_TTL = 14 * 60.0  # an interaction token lives 15 minutes
UNKNOWN_MESSAGE = 10008
#: Failures that may pass: the newest state is sent again later (`NotDelivered`).
TRANSIENT = (discord.DiscordServerError, discord.RateLimited, aiohttp.ClientError, OSError, TimeoutError)

log = logging.getLogger("baton.discord")

#: Posts one message: (content, file or None, view or None) -> the message Discord made.
Send = Callable[[str, discord.File | None, discord.ui.View | None], Awaitable[discord.Message]]


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

    async def send(content: str, file: discord.File | None, view: discord.ui.View | None) -> discord.Message:
        extra = dict(fixed)
        if file is not None:
            extra["attachments" if attachments else "file"] = [file] if attachments else file
        if view is not None:
            extra["view"] = view
        return await post(content=content, **extra)  # type: ignore[return-value]

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
    """Discord's transport (`post`, `edit`, `follow_up`, `person`, `moved`, `refusal`, `failed`)
    and the answers to its interactions (`answer`, `send_to`)."""

    client: discord.Client
    handler: Handler
    attach_over: int = 8000
    platform: str = PLATFORM
    thread_is_place: bool = True  # a thread is a channel of its own, tried before its channel
    #: the core's delivery service for Discord (registered as its outbox by the client)
    delivery: DeliveryService = field(init=False)

    def __post_init__(self) -> None:
        self.redactor = self.handler.redactor  # the runtime's one redactor (text and buttons)
        self.buttons = self.handler.buttons  # the core's store of long button commands
        compose = texts(FORMAT, self.redactor, attach_over=self.attach_over, nonce_length=NONCE_LENGTH)
        self.delivery = self.handler.delivery_service(self, compose)

    # -- answers ---------------------------------------------------------------------------
    async def send_to(self, channel_id: int, reply: Reply) -> None:
        """An answer to a message, in `channel_id` (a channel, a thread, a DM)."""
        await self.delivery.answer(reply, str(channel_id))

    async def answer(
        self, interaction: discord.Interaction, replies: Sequence[Reply], *, open_original: bool
    ) -> None:
        """Replies to an interaction: the first public one replaces the deferred response
        when `open_original`; replies aimed at another thread go there. A reply starting a
        run keeps the interaction's follow-up as that run's (a fallback place)."""
        for reply in replies:
            follow_up = (followup_send(interaction, ephemeral=False), FOLLOW_UP_TTL, None)
            if reply.to.thread is not None and reply.to.thread != str(interaction.channel_id):
                await self.delivery.answer(reply, reply.to.thread, follow_up=follow_up)  # the run's thread
                if open_original and not reply.how.ephemeral:  # typed here: answered here too
                    shown = dataclasses.replace(reply, buttons=(), menus=()).sent(starts_thread=False)
                    public = followup_send(interaction, ephemeral=False)
                    await self.delivery.answer(shown, Sends(original_edit(interaction), public))
                    open_original = False
            elif reply.how.ephemeral:
                if open_original:  # a deferral is public; only a new followup can be private
                    await interaction.delete_original_response()
                    open_original = False
                private = followup_send(interaction, ephemeral=True)
                await self.delivery.answer(reply, Sends(private, private), follow_up=follow_up)
            else:
                public = followup_send(interaction, ephemeral=False)
                first = original_edit(interaction) if open_original else public
                answering, open_original = open_original, False
                starts = bool(reply.how.starts_thread and reply.run_id and interaction.channel_id)
                try:
                    await self.delivery.answer(reply, Sends(first, public), follow_up=follow_up,
                                               thread_or_none=not starts)
                except (discord.HTTPException, *TRANSIENT) as exc:
                    if not starts:
                        raise
                    # the run started: its first message goes to the channel, its thread opens there
                    log.warning("the answer to a command that started a run failed (%s); posting it in "
                                "the channel", exc, extra={"action": "answer_failed", "run_id": reply.run_id})
                    await self.send_to(interaction.channel_id or 0, reply)  # no thread if this fails too
                    if answering:  # no "thinking…" left behind
                        with contextlib.suppress(discord.HTTPException, *TRANSIENT):
                            await interaction.delete_original_response()
        if open_original:
            await interaction.delete_original_response()

    def view_of(self, reply: Reply) -> discord.ui.View | None:
        """The buttons and choice lists of `reply`, through the redactor."""
        shown = redacted(reply, self.redactor)
        return build_view(shown.buttons, reply.run_id, self._keep, shown.menus)

    def _keep(self, command: bytes) -> str:
        return self.buttons.keep(command.decode("utf-8"))

    async def idle(self) -> None:
        """Wait until every background reply handed over so far has been sent."""
        await self.delivery.idle()

    async def aclose(self) -> None:
        """Take no more background replies; wait for those being sent."""
        await self.delivery.aclose()

    # -- the transport ---------------------------------------------------------------------
    async def post(self, place: object, reply: Outgoing, message: Message, *, attach: bool,
                   opens: bool) -> Sent:
        assert isinstance(reply, Reply)
        if isinstance(place, Sends):
            first, rest = place.first, place.rest
        else:
            channel_id = int(str(place))
            channel = self.client.get_channel(channel_id) or self.client.get_partial_messageable(channel_id)
            # the first message carries the nonce (a redelivered outbox row posts it once)
            mentions = allowed_mentions(message.pings)  # the people it calls, if any; else no ping
            first = channel_send(channel, message.nonce, mentions)  # type: ignore[arg-type]
            rest = channel_send(channel, mentions=mentions)  # type: ignore[arg-type]
        messages, filed = await self._post_new(reply, message, first, rest)
        thread = await self._open_thread(messages[0], reply) if opens and messages else None
        if not messages:
            return Sent(Posted("", ()), thread=thread, filed=filed)
        return Sent(Posted(str(messages[0].channel.id), tuple(str(m.id) for m in messages)),
                    thread=thread, filed=filed)

    async def edit(self, place: object, posted: Posted, reply: Outgoing, message: Message, *,
                   attach: bool) -> Sent:
        """Edit the messages kept as `posted` to show `reply`, where they are. A message deleted
        meanwhile (10008) is posted again there; a channel that refuses the edit (10003, 50001, 50013) raises:
        the reply goes to the next place."""
        assert isinstance(reply, Reply)
        channel = self.client.get_partial_messageable(int(posted.place))
        chunks, file, _ = _content(message)
        view = self.view_of(reply)
        ids: list[str] = []
        filed = False
        for index, chunk in enumerate(chunks):
            last = index == len(chunks) - 1
            attached = file if index == 0 else None
            if index < len(posted.ids):
                shown = channel.get_partial_message(int(posted.ids[index]))
                try:
                    edit = _send(shown.edit, {"allowed_mentions": NO_MENTIONS, "view": None},
                                 attachments=True)
                    await edit(chunk, attached, view if last else None)
                    ids.append(str(shown.id))
                    filed = filed or attached is not None
                    continue
                except discord.NotFound as exc:
                    if exc.code != UNKNOWN_MESSAGE:
                        raise
                    log.info("progress message gone; posting it again",
                             extra={"action": "repost", "run_id": reply.run_id})
            sent = await channel_send(channel)(chunk, attached, view if last else None)
            ids.append(str(sent.id))
        for stale in posted.ids[len(chunks):]:
            with contextlib.suppress(discord.NotFound):
                await channel.get_partial_message(int(stale)).delete()
        return Sent(Posted(posted.place, tuple(ids)), filed=filed)

    async def follow_up(self, handle: Send, reply: Outgoing, message: Message, *, attach: bool) -> bool:
        assert isinstance(reply, Reply)
        try:
            await self._post_new(reply, message, handle, handle)  # posted anew: never edited there
        except discord.HTTPException as exc:
            return self._follow_up_refused(exc, reply)
        return True

    async def person(self, user: str) -> str:
        """The direct message channel with `user`."""
        return str((await self.client.create_dm(discord.Object(int(user)))).id)

    async def moved(self, how: str, to: object, reply: Outgoing, error: str) -> bool:
        run_id = reply.run_id or ""
        if how == FOLLOW_UP:
            try:
                await to(sentence(FORMAT, "moved", run_id, how), None, None)  # type: ignore[operator]
            except discord.HTTPException as exc:
                return self._follow_up_refused(exc, reply)
            return True
        channel = self.client.get_partial_messageable(int(str(to)))
        await channel_send(channel)(sentence(FORMAT, "moved", run_id, how), None, None)
        return True

    @staticmethod
    def _follow_up_refused(exc: discord.HTTPException, reply: Outgoing) -> bool:
        if exc.status >= 500:
            raise exc
        log.info("interaction follow-up refused: %s", exc.text,  # e.g. its token expired (50027)
                 extra={"action": "follow_up_refused", "run_id": reply.run_id})
        return False

    def refusal(self, exc: BaseException, reply: Outgoing) -> str | None:
        """Deleted (10003), no access (50001, 50013), not a channel id: the next place."""
        if isinstance(exc, discord.Forbidden | discord.NotFound | ValueError):
            return str(getattr(exc, "text", "") or exc)
        return None

    def failed(self, exc: Exception, reply: Outgoing) -> None:
        if isinstance(exc, TRANSIENT):
            log.warning("reply not sent for now: %s", exc,
                        extra={"action": "not_delivered", "run_id": reply.run_id})
            raise NotDelivered(str(exc)) from exc
        raise exc

    # -- one message ------------------------------------------------------------------------
    async def _post_new(
        self, reply: Reply, message: Message, first: Send, rest: Send
    ) -> tuple[list[discord.Message], bool]:
        """The messages posted, and whether the whole text was attached to the first."""
        chunks, file, every = _content(message)
        view = self.view_of(reply)
        messages: list[discord.Message] = []
        filed = False
        index = 0
        while index < len(chunks):
            last = index == len(chunks) - 1
            send = first if index == 0 else rest
            try:
                attached = file if index == 0 else None
                messages.append(await send(chunks[index], attached, view if last else None))
                filed = filed or attached is not None
            except discord.HTTPException as exc:
                if exc.status != 413 or file is None or index:
                    raise
                log.warning("attachment refused as too large; sending the text in messages",
                            extra={"action": "upload_too_large", "run_id": reply.run_id})
                file = None  # every chunk as a message of its own: nothing is lost
                chunks = every
                continue
            index += 1
        return messages, filed

    async def _open_thread(self, message: discord.Message, reply: Reply) -> str | None:
        """The run's thread, opened from `message`; None where none can be (a DM, no permission)."""
        channel = message.channel
        if isinstance(channel, discord.Thread):
            return str(channel.id)
        name = f"{reply.data.get('workflow') or reply.kind} · {reply.run_id}"[:100]
        try:
            if message.guild is not None:
                thread = await message.create_thread(name=name, auto_archive_duration=THREAD_ARCHIVE_MINUTES)
                return str(thread.id)
            # a followup message knows its channel only by id
            data = await self.client.http.start_thread_with_message(
                channel.id, message.id, name=name,
                auto_archive_duration=THREAD_ARCHIVE_MINUTES, rate_limit_per_user=None,
            )
            return str(int(data["id"]))
        except discord.HTTPException as exc:  # a DM, or no permission: stay where we are
            log.warning("no thread for run: %s", exc.text,
                        extra={"action": "thread_failed", "run_id": reply.run_id})
            return None


def _content(message: Message) -> tuple[list[str], discord.File | None, list[str]]:
    """The messages' texts, the file attached to the first, and every chunk."""
    said = message.content
    file = None if said.file is None else discord.File(io.BytesIO(said.file[1]), filename=said.file[0])
    return list(said.chunks), file, list(said.every)
