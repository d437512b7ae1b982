"""`Reply` -> Discord: rendered chunks, files for long output, buttons, threads, edits in place.

What is platform-neutral lives in the core's one edit-in-place component (`handler.edits`,
`core.delivery.edits`): the pace of progress edits (the core hands a run's replies over one
at a time, already paced and coalesced), where each keyed message is (kept in memory and in
the store, so after a restart the next update still edits it), the size policy (which reply
attaches its whole text as a file: never a progress edit of a run still moving, at most one
per keyed message), and where a run reports after a fallback. Long button commands are kept
in the core's one store (`handler.buttons`). This module posts, edits and uploads.

- Text is `core.render.render_reply(reply, "discord", redactor)` (the runtime's redactor: no
  secret in the text, the buttons' labels or their commands): chunks of at most 2,000 UTF-16
  units (the core splits without cutting code, see `core.splitting`). More than `attach_over`
  characters in all, or a command too wide for one message, go out as one message with the
  first chunk and, when the size policy says so, the whole text attached as a file.
- `AllowedMentions.none()` on every message the bot posts, but for the people a reply calls
  (`Reply.pings`: a gate's reminder or escalation to the approvers it waits on, "handled after
  a restart" to who typed the command): exactly those users may be pinged (`allowed_mentions`).
  Everyone else a message names shows as a mention (their name, never a ping).
- `replace_key`: the messages last posted with that key are edited instead of posting anew;
  one deleted meanwhile (10008) is posted again where it was.
- `starts_thread`: a thread is opened from the posted message and handed to the core with
  `attach_thread(run_id, thread_id)` (`None` where no thread can be opened, e.g. a DM); the
  core holds the run's background replies until then (the outbox is registered with
  `threads=True`), so they arrive carrying that thread. If the reply could not be posted,
  `attach_thread(run_id, None)` too: the core stops waiting for a thread at once. The
  interaction's follow-up webhook is kept as the run's follow-up (its token lives 15 minutes).
- Fallbacks: where the run's thread refuses a background reply or an edit of its progress
  (deleted: 10003, no access: 50001 / 50013), it goes to the channel, then the interaction's
  follow-up while its token lives (state-carrying replies only), then a direct message to
  whoever started the run; the first reply in a new place says so, once.
- A failure that may pass (5xx after discord.py's own retries, a dropped connection) is raised
  as `NotDelivered`: the core sends the newest state again.
"""

from __future__ import annotations

import asyncio
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
from core.commands.messages import Reply
from core.delivery import fallbacks
from core.delivery.buttons import ButtonCommands
from core.delivery.edits import Edits, NotDelivered, Posted
from core.delivery.fallbacks import DIRECT, FOLLOW_UP, Refused
from core.redaction import Redactor
from core.render import redacted, render_reply

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


@dataclass
class DiscordSender:
    client: discord.Client
    attach_thread: Callable[[str, str | None], Awaitable[None]]
    redactor: Redactor  # the runtime's one redactor (text and buttons)
    edits: Edits  # the core's edit-in-place component
    buttons: ButtonCommands  # the core's store of long button commands
    attach_over: int = 8000
    _closing: asyncio.Event = field(default_factory=asyncio.Event)
    _inflight: set[asyncio.Task[object]] = field(default_factory=set)

    # -- entry points -------------------------------------------------------------------
    async def outbox(self, reply: Reply) -> None:
        """Background replies (progress, completion, a gate waiting) from the core: in the run's
        thread; where that refuses them, at the next place that takes them (module docstring).
        `NotDelivered` when Discord failed in a way that may pass."""
        if self._closing.is_set():  # shutting down: the next process sends it (the outbox keeps it)
            log.info("reply not sent: the client is closing",
                     extra={"action": "drop_on_close", "run_id": reply.run_id})
            raise NotDelivered("the Discord client is closing")
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)  # type: ignore[arg-type]
        try:
            await self._background(reply)
        except TRANSIENT as exc:
            log.warning("reply not sent for now: %s", exc,
                        extra={"action": "not_delivered", "run_id": reply.run_id})
            raise NotDelivered(str(exc)) from exc
        finally:
            if task is not None:
                self._inflight.discard(task)  # type: ignore[arg-type]

    async def _background(self, reply: Reply) -> None:
        if reply.direct:  # to a person (a reminder): their DM channel
            try:
                dm = await self.client.create_dm(discord.Object(int(reply.conversation or "")))
                await self.post(dm.id, reply)
            except (discord.Forbidden, discord.NotFound, ValueError) as exc:
                log.warning("direct message refused: %s", getattr(exc, "text", exc),
                            extra={"action": "direct_refused", "run_id": reply.run_id})
            return

        async def send_at(place: str, moving: bool) -> bool:
            try:
                return await self._send_at(place, reply, moving=moving)
            except (discord.Forbidden, discord.NotFound, ValueError) as exc:
                log.warning("reply refused in %s: %s", place, getattr(exc, "text", exc),
                            extra={"action": "fallback", "run_id": reply.run_id})
                raise Refused(str(exc)) from exc

        usual = [p for p in (reply.thread, reply.conversation) if p]
        if not await fallbacks.along(self.edits, PLATFORM, reply, usual, send_at):
            log.error("reply delivered nowhere", extra={"action": "undelivered", "run_id": reply.run_id})

    async def _send_at(self, place: str, reply: Reply, *, moving: bool) -> bool:
        """Send `reply` at `place` (`moving`: the first reply there, which says so); False when
        that place cannot take it."""
        run_id = reply.run_id or ""
        if place == FOLLOW_UP:
            send: Send = self.edits.follow_up_of(PLATFORM, run_id)
            try:
                if moving:
                    await send(_moved_text(run_id, "here, in replies to your command, while Discord allows"),
                               None, None)
                once = dataclasses.replace(reply, replace_key=None, starts_thread=False)  # not edited there
                await self._post_new(once, send, send)
            except discord.HTTPException as exc:
                if exc.status >= 500:
                    raise
                log.info("interaction follow-up refused: %s", exc.text,  # e.g. its token expired (50027)
                         extra={"action": "follow_up_refused", "run_id": reply.run_id})
                return False
            return True
        if place == DIRECT and not (reply.requester or "").startswith("discord:"):
            return False
        channel_id = await self._direct(reply) if place == DIRECT else int(place)
        if moving:  # a fallback: say once where the run reports now
            where = "a direct message" if place == DIRECT else "this channel"
            await channel_send(self.client.get_partial_messageable(channel_id))(
                _moved_text(run_id, where), None, None)
        await self.post(channel_id, reply)
        return True

    async def _direct(self, reply: Reply) -> int:
        """The direct message channel with the run's requester."""
        user = int((reply.requester or "").removeprefix("discord:"))
        return (await self.client.create_dm(discord.Object(user))).id

    async def post(self, channel_id: int, reply: Reply) -> None:
        channel = self.client.get_channel(channel_id) or self.client.get_partial_messageable(channel_id)
        # the first message carries the nonce (a redelivered outbox row posts it once)
        mentions = allowed_mentions(reply)  # the people it calls, if any; else no ping
        first = channel_send(channel, nonce_of(reply), mentions)  # type: ignore[arg-type]
        await self.deliver(reply, first, channel_send(channel, mentions=mentions))  # type: ignore[arg-type]

    async def answer(
        self, interaction: discord.Interaction, replies: Sequence[Reply], *, open_original: bool
    ) -> None:
        """Replies to an interaction: the first public one replaces the deferred response
        when `open_original`; replies aimed at another thread go there. A reply starting a
        run keeps the interaction's follow-up as that run's (a fallback place)."""
        for reply in replies:
            if reply.starts_thread and reply.run_id:
                self.edits.follow_up(PLATFORM, reply.run_id, followup_send(interaction, ephemeral=False),
                                     ttl=FOLLOW_UP_TTL)
            if reply.thread is not None and reply.thread != str(interaction.channel_id):
                await self.post(int(reply.thread), reply)  # the run's thread holds its story
                if open_original and not reply.ephemeral:  # typed here: answered here too
                    shown = dataclasses.replace(reply, buttons=(), menus=(), starts_thread=False)
                    public = followup_send(interaction, ephemeral=False)
                    await self.deliver(shown, original_edit(interaction), public)
                    open_original = False
            elif reply.ephemeral:
                if open_original:  # a deferral is public; only a new followup can be private
                    await interaction.delete_original_response()
                    open_original = False
                private = followup_send(interaction, ephemeral=True)
                await self.deliver(reply, private, private)
            else:
                public = followup_send(interaction, ephemeral=False)
                first = original_edit(interaction) if open_original else public
                answering, open_original = open_original, False
                starts = bool(reply.starts_thread and reply.run_id and interaction.channel_id)
                try:
                    await self.deliver(reply, first, public, thread_or_none=not starts)
                except (discord.HTTPException, *TRANSIENT) as exc:
                    if not starts:
                        raise
                    # the run started: its first message goes to the channel, its thread opens there
                    log.warning("the answer to a command that started a run failed (%s); posting it in "
                                "the channel", exc, extra={"action": "answer_failed", "run_id": reply.run_id})
                    try:
                        await self.post(interaction.channel_id or 0, reply)
                    except BaseException:
                        await self.attach_thread(reply.run_id or "", None)  # reports where it can
                        raise
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

    # -- delivery -----------------------------------------------------------------------
    async def deliver(self, reply: Reply, first: Send, rest: Send, *, thread_or_none: bool = True) -> None:
        """Post `reply` (or edit the messages under its `replace_key`). `thread_or_none=False`:
        a `starts_thread` reply that could not be posted does not report "no thread" (the caller
        posts it elsewhere)."""
        key = reply.replace_key if not reply.ephemeral else None
        if key is None:
            await self._post_new(reply, first, rest, thread_or_none=thread_or_none)
            return
        async with self.edits.holding(PLATFORM, key):
            posted = self.edits.posted(PLATFORM, key)
            if posted is None:
                if reply.edit_only:
                    return  # only an edit of a message this bot posted (e.g. a decided gate's): none
                messages = await self._post_new(reply, first, rest)
                if messages:
                    ids = tuple(str(m.id) for m in messages)
                    self.edits.keep(PLATFORM, key, Posted(str(messages[0].channel.id), ids))
                return
            await self._edit(key, posted, reply)

    async def _post_new(
        self, reply: Reply, first: Send, rest: Send, *, thread_or_none: bool = True
    ) -> list[discord.Message]:
        chunks, file = self._content(reply)
        view = self.view_of(reply)
        messages: list[discord.Message] = []
        try:
            index = 0
            while index < len(chunks):
                last = index == len(chunks) - 1
                send = first if index == 0 else rest
                try:
                    attached = file if index == 0 else None
                    messages.append(await send(chunks[index], attached, view if last else None))
                    if attached is not None:
                        self.edits.filed(PLATFORM, reply)
                except discord.HTTPException as exc:
                    if exc.status != 413 or file is None or index:
                        raise
                    log.warning("attachment refused as too large; sending the text in messages",
                                extra={"action": "upload_too_large", "run_id": reply.run_id})
                    file = None  # every chunk as a message of its own: nothing is lost
                    chunks = [c for c in render_reply(reply, PLATFORM, self.redactor).chunks if c.strip()]
                    continue
                index += 1
        finally:
            if reply.starts_thread and reply.run_id:
                if messages:
                    await self._open_thread(messages[0], reply)
                elif thread_or_none:  # not posted: no thread will come, the run reports where it was asked
                    await self.attach_thread(reply.run_id, None)
        return messages

    def _content(self, reply: Reply) -> tuple[list[str], discord.File | None]:
        """The messages' texts, and the file holding the whole text when it is long or when a
        command in it was too wide for one message (the file shows every command whole), as
        the core's size policy allows (else the first message's worth)."""
        rendered = render_reply(reply, PLATFORM, self.redactor)
        chunks = [c for c in rendered.chunks if c.strip()]
        if reply.file is not None:  # a file the reply carries (`audit --since`)
            return chunks, discord.File(io.BytesIO(reply.file.content or b""), filename=reply.file.name)
        too_long = not rendered.whole or sum(len(c) for c in chunks) > self.attach_over
        if not too_long:
            return chunks, None
        if not self.edits.attaches(PLATFORM, reply, too_long=True):
            return chunks[:1], None
        name = f"{reply.kind}-{reply.run_id}.txt" if reply.run_id else f"{reply.kind}.txt"
        return chunks[:1], discord.File(io.BytesIO(rendered.text.encode("utf-8")), filename=name)

    async def _open_thread(self, message: discord.Message, reply: Reply) -> None:
        assert reply.run_id is not None
        channel = message.channel
        if isinstance(channel, discord.Thread):
            thread_id = channel.id
        else:
            name = f"{reply.data.get('workflow') or reply.kind} · {reply.run_id}"[:100]
            try:
                if message.guild is not None:
                    thread = await message.create_thread(
                        name=name, auto_archive_duration=THREAD_ARCHIVE_MINUTES
                    )
                    thread_id = thread.id
                else:  # a followup message knows its channel only by id
                    data = await self.client.http.start_thread_with_message(
                        channel.id, message.id, name=name,
                        auto_archive_duration=THREAD_ARCHIVE_MINUTES, rate_limit_per_user=None,
                    )
                    thread_id = int(data["id"])
            except discord.HTTPException as exc:  # a DM, or no permission: stay where we are
                log.warning("no thread for run: %s", exc.text,
                            extra={"action": "thread_failed", "run_id": reply.run_id})
                await self.attach_thread(reply.run_id, None)
                return
        await self.attach_thread(reply.run_id, str(thread_id))

    # -- edits in place -------------------------------------------------------------------
    async def _edit(self, key: str, posted: Posted, reply: Reply) -> None:
        """Edit the messages under `key` to show `reply`. A message deleted meanwhile (10008)
        is posted again there; a channel that refuses the edit (10003, 50001, 50013) raises:
        the reply goes to the next place."""
        channel = self.client.get_partial_messageable(int(posted.place))
        chunks, file = self._content(reply)
        view = self.view_of(reply)
        ids: list[str] = []
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
                    if attached is not None:
                        self.edits.filed(PLATFORM, reply)
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
        self.edits.keep(PLATFORM, key, Posted(posted.place, tuple(ids)))

    async def idle(self) -> None:
        """Wait until every background reply handed over so far has been sent."""
        current = asyncio.current_task()
        while waiting := [t for t in self._inflight if t is not current and not t.done()]:
            await asyncio.wait(waiting)

    async def aclose(self) -> None:
        """Take no more background replies; wait for those being sent."""
        self._closing.set()
        await self.idle()


def _moved_text(run_id: str, where: str) -> str:
    """Said once where a run reports after its thread refused a message."""
    return (f"Baton could not post in the thread of run `{run_id}` (deleted, or no access); "
            f"it reports that run in {where} from now on.")
