"""Discord's transport (`core.delivery.transport.Transport`) and its answers to interactions.

The core's delivery service (`core.delivery.service`) decides where a reply goes (the run's
thread, then its channel, then the interaction's follow-up while its token lives, then a direct
message to whoever started the run; the first reply in a new place says so, once), whether a
keyed message is edited or posted anew (kept in memory and in the store, so after a restart the
next update still edits it), the size policy (`attach`), and what becomes of a run's thread.
This module posts, edits and uploads, and answers what it did, never calling back.

- Text is `core.render.render_reply(reply, FORMAT, redactor)` (Discord's format, `formatting.py`;
  the runtime's redactor: no secret in the text, the buttons' labels or their commands): chunks
  of at most 2,000 UTF-16 units (the core splits without cutting code, see `core.splitting`).
  More than `attach_over` characters in all, or a command too wide for one message, go out as
  one message with the first chunk and, when the service says it may, the whole text attached
  as a file.
- `AllowedMentions.none()` on every message the bot posts, but for the people a reply calls
  (`Reply.pings`: a gate's reminder or escalation to the approvers it waits on, "handled after
  a restart" to who typed the command): exactly those users may be pinged (`allowed_mentions`).
  Everyone else a message names shows as a mention (their name, never a ping).
- An edited message deleted meanwhile (10008) is posted again where it was.
- `starts_thread`: a thread is opened from the posted message (`Sent.thread`; None where none
  can be, e.g. a DM). The interaction's follow-up webhook is the run's follow-up (its token
  lives 15 minutes).
- Refusals (deleted: 10003, no access: 50001 / 50013) send the reply to the next place; a
  failure that may pass (5xx after discord.py's own retries, a dropped connection) is raised as
  `NotDelivered`: the core sends the newest state again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
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
from core.delivery.edits import NotDelivered, Outgoing, Posted
from core.delivery.fallbacks import FOLLOW_UP
from core.delivery.service import DeliveryService
from core.delivery.transport import Sent
from core.render import redacted, render_reply, sentence

PLATFORM = "discord"
NO_MENTIONS = discord.AllowedMentions.none()
THREAD_ARCHIVE_MINUTES: Literal[1440] = 1440  # a day without messages
FOLLOW_UP_TTL = 14 * 60.0  # an interaction token lives 15 minutes
UNKNOWN_MESSAGE = 10008
#: Failures that may pass: the newest state is sent again later (`NotDelivered`).
TRANSIENT = (discord.DiscordServerError, discord.RateLimited, aiohttp.ClientError, OSError, TimeoutError)

log = logging.getLogger("baton.discord")

#: Posts one message: (content, file or None, view or None) -> the message Discord made.
Send = Callable[[str, discord.File | None, discord.ui.View | None], Awaitable[discord.Message]]


def allowed_mentions(reply: Reply) -> discord.AllowedMentions:
    """No mention pings, but those of the people `reply` calls (`Reply.pings`)."""
    users = [discord.Object(int(p[len(PLATFORM) + 1:])) for p in reply.pings
             if p.startswith(f"{PLATFORM}:") and p[len(PLATFORM) + 1:].isdigit()]
    if not users:
        return NO_MENTIONS
    return discord.AllowedMentions(everyone=False, roles=False, replied_user=False, users=users)


def channel_send(channel: discord.abc.Messageable, nonce: str | None = None,
                 mentions: discord.AllowedMentions = NO_MENTIONS) -> Send:
    """`nonce`: discord.py sends it with `enforce_nonce: true`, so Discord answers a repeat
    within a few minutes with the message it made the first time instead of posting again.
    `mentions`: who may be pinged (no one by default)."""

    async def send(content: str, file: discord.File | None, view: discord.ui.View | None) -> discord.Message:
        extra: dict[str, object] = {"file": file} if file is not None else {}
        if view is not None:
            extra["view"] = view
        if nonce is not None:
            extra["nonce"] = nonce
        return await channel.send(content, allowed_mentions=mentions, **extra)  # type: ignore[call-overload]

    return send


NONCE_LENGTH = 25  # Discord's limit


def nonce_of(reply: Reply) -> str | None:
    """The nonce of an outbox row's message: its `delivery_key`, the same on every redelivery
    (a long one hashed to Discord's 25 characters); None for any other reply."""
    key = reply.delivery_key
    if key is None:
        return None
    return key if len(key) <= NONCE_LENGTH else hashlib.sha256(key.encode()).hexdigest()[:NONCE_LENGTH]


def followup_send(interaction: discord.Interaction, *, ephemeral: bool) -> Send:
    async def send(content: str, file: discord.File | None, view: discord.ui.View | None) -> discord.Message:
        extra: dict[str, object] = {"file": file} if file is not None else {}
        if view is not None:
            extra["view"] = view
        return await interaction.followup.send(  # type: ignore[call-overload,no-any-return]
            content, wait=True, ephemeral=ephemeral, allowed_mentions=NO_MENTIONS, **extra
        )

    return send


def original_edit(interaction: discord.Interaction) -> Send:
    """Replaces the deferred "thinking…" response of a slash command."""

    async def send(content: str, file: discord.File | None, view: discord.ui.View | None) -> discord.Message:
        extra: dict[str, object] = {"attachments": [file]} if file is not None else {}
        if view is not None:
            extra["view"] = view
        return await interaction.edit_original_response(
            content=content, allowed_mentions=NO_MENTIONS, **extra  # type: ignore[arg-type]
        )

    return send


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
        self.delivery = DeliveryService(self, self.handler.edits, self.handler.attach_thread)

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
            if reply.thread is not None and reply.thread != str(interaction.channel_id):
                await self.delivery.answer(reply, reply.thread, follow_up=follow_up)  # the run's thread
                if open_original and not reply.ephemeral:  # typed here: answered here too
                    shown = dataclasses.replace(reply, buttons=(), menus=(), starts_thread=False)
                    public = followup_send(interaction, ephemeral=False)
                    await self.delivery.answer(shown, Sends(original_edit(interaction), public))
                    open_original = False
            elif reply.ephemeral:
                if open_original:  # a deferral is public; only a new followup can be private
                    await interaction.delete_original_response()
                    open_original = False
                private = followup_send(interaction, ephemeral=True)
                await self.delivery.answer(reply, Sends(private, private), follow_up=follow_up)
            else:
                public = followup_send(interaction, ephemeral=False)
                first = original_edit(interaction) if open_original else public
                answering, open_original = open_original, False
                starts = bool(reply.starts_thread and reply.run_id and interaction.channel_id)
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
    async def post(self, place: object, reply: Outgoing, *, attach: bool, opens: bool) -> Sent:
        assert isinstance(reply, Reply)
        if isinstance(place, Sends):
            first, rest = place.first, place.rest
        else:
            channel_id = int(str(place))
            channel = self.client.get_channel(channel_id) or self.client.get_partial_messageable(channel_id)
            # the first message carries the nonce (a redelivered outbox row posts it once)
            mentions = allowed_mentions(reply)  # the people it calls, if any; else no ping
            first = channel_send(channel, nonce_of(reply), mentions)  # type: ignore[arg-type]
            rest = channel_send(channel, mentions=mentions)  # type: ignore[arg-type]
        messages, filed = await self._post_new(reply, first, rest, attach=attach)
        thread = await self._open_thread(messages[0], reply) if opens and messages else None
        if not messages:
            return Sent(Posted("", ()), thread=thread, filed=filed)
        return Sent(Posted(str(messages[0].channel.id), tuple(str(m.id) for m in messages)),
                    thread=thread, filed=filed)

    async def edit(self, place: object, posted: Posted, reply: Outgoing, *, attach: bool) -> Sent:
        """Edit the messages kept as `posted` to show `reply`, where they are. A message deleted
        meanwhile (10008) is posted again there; a channel that refuses the edit (10003, 50001, 50013) raises:
        the reply goes to the next place."""
        assert isinstance(reply, Reply)
        channel = self.client.get_partial_messageable(int(posted.place))
        chunks, file = self._content(reply, attach=attach)
        view = self.view_of(reply)
        ids: list[str] = []
        filed = False
        for index, chunk in enumerate(chunks):
            last = index == len(chunks) - 1
            attached = file if index == 0 else None
            if index < len(posted.ids):
                message = channel.get_partial_message(int(posted.ids[index]))
                extra: dict[str, object] = {"attachments": [attached]} if attached is not None else {}
                try:
                    await message.edit(
                        content=chunk, view=view if last else None, allowed_mentions=NO_MENTIONS,
                        **extra,  # type: ignore[arg-type]
                    )
                    ids.append(str(message.id))
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

    async def follow_up(self, handle: Send, reply: Outgoing, *, attach: bool) -> bool:
        assert isinstance(reply, Reply)
        once = dataclasses.replace(reply, replace_key=None, starts_thread=False)  # not edited there
        try:
            await self._post_new(once, handle, handle, attach=attach)
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
        self, reply: Reply, first: Send, rest: Send, *, attach: bool
    ) -> tuple[list[discord.Message], bool]:
        """The messages posted, and whether the whole text was attached to the first."""
        chunks, file = self._content(reply, attach=attach)
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
                chunks = [c for c in render_reply(reply, FORMAT, self.redactor).chunks if c.strip()]
                continue
            index += 1
        return messages, filed

    def _content(self, reply: Reply, *, attach: bool) -> tuple[list[str], discord.File | None]:
        """The messages' texts, and the file holding the whole text when it is long or when a
        command in it was too wide for one message (the file shows every command whole), when
        `attach` (else the first message's worth)."""
        rendered = render_reply(reply, FORMAT, self.redactor)
        chunks = [c for c in rendered.chunks if c.strip()]
        if reply.file is not None:  # a file the reply carries (`audit --since`)
            return chunks, discord.File(io.BytesIO(reply.file.content or b""), filename=reply.file.name)
        too_long = not rendered.whole or sum(len(c) for c in chunks) > self.attach_over
        if not too_long:
            return chunks, None
        if not attach:
            return chunks[:1], None
        name = f"{reply.kind}-{reply.run_id}.txt" if reply.run_id else f"{reply.kind}.txt"
        return chunks[:1], discord.File(io.BytesIO(rendered.text.encode("utf-8")), filename=name)

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
