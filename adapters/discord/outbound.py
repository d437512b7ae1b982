"""`Reply` -> Discord: rendered chunks, files for long output, buttons, threads, edits in place.

- Text is `core.render.render_reply(reply, "discord", redactor)` (the runtime's redactor: no
  secret in the text, the buttons' labels or their commands): chunks of at most 2,000 UTF-16
  units (the core splits without cutting code, see `core.splitting`). More than `attach_over`
  characters in all, or a command too wide for one message, go out as one message with the
  first chunk and the whole text attached as a file: nothing is cut.
- `AllowedMentions.none()` on every message the bot posts.
- `replace_key`: the messages last posted with that key are edited instead of posting anew,
  at most once per `edit_interval` seconds; the newest state always gets sent (also at close).
  Their ids are kept through the core (`remember` / `recall`), so after a restart the next
  update still edits them; one deleted meanwhile is posted again. In memory only the
  `MEMORY` most recently used keys are kept (idle ones are dropped, oldest first; the next
  update of a dropped key recalls its ids from the core), and a key's lock lives only while
  someone holds or waits for it: a long-running bot does not grow with the runs it reported.
- `starts_thread`: a thread is opened from the posted message and handed to the core with
  `attach_thread(run_id, thread_id)` (`None` where no thread can be opened, e.g. a DM); the
  core holds the run's background replies until then (the outbox is registered with
  `threads=True`), so they arrive carrying that thread. If the reply could not be posted,
  `attach_thread(run_id, None)` too: the core stops waiting for a thread at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import discord

from adapters.discord.buttons import build_view
from core.commands.messages import Reply
from core.redaction import Redactor
from core.render import redacted, render_reply

PLATFORM = "discord"
NO_MENTIONS = discord.AllowedMentions.none()
THREAD_ARCHIVE_MINUTES: Literal[1440] = 1440  # a day without messages
MEMORY = 2_000  # progress messages kept in memory (the store keeps them all)
DIRECT = "direct"  # the fallback place: a direct message to the run's requester

log = logging.getLogger("baton.discord")

#: Posts one message: (content, file or None, view or None) -> the message Discord made.
Send = Callable[[str, discord.File | None, discord.ui.View | None], Awaitable[discord.Message]]


def channel_send(channel: discord.abc.Messageable) -> Send:
    async def send(content: str, file: discord.File | None, view: discord.ui.View | None) -> discord.Message:
        extra: dict[str, object] = {"file": file} if file is not None else {}
        if view is not None:
            extra["view"] = view
        return await channel.send(content, allowed_mentions=NO_MENTIONS, **extra)  # type: ignore[call-overload]

    return send


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
class _Keyed:
    """The messages last posted under one `replace_key`, and the state not yet shown."""

    channel_id: int
    message_ids: list[int]
    last_edit: float = 0.0
    pending: Reply | None = None
    task: asyncio.Task[None] | None = None

    @property
    def idle(self) -> bool:
        """Nothing waits to be shown: forgetting it loses nothing the core does not keep."""
        return self.pending is None and (self.task is None or self.task.done())


@dataclass
class _KeyLock:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0  # holding or waiting


@dataclass
class DiscordSender:
    client: discord.Client
    put_blob: Callable[[bytes], str]
    attach_thread: Callable[[str, str | None], Awaitable[None]]
    redactor: Redactor  # the runtime's one redactor (text and buttons)
    edit_interval: float = 1.0
    attach_over: int = 8000
    remember: Callable[[str, str], None] = lambda key, value: None
    recall: Callable[[str], str | None] = lambda key: None
    _keyed: OrderedDict[str, _Keyed] = field(default_factory=OrderedDict)  # least recently used first
    _locks: dict[str, _KeyLock] = field(default_factory=dict)  # only keys held or waited for
    _closing: asyncio.Event = field(default_factory=asyncio.Event)
    _moved: OrderedDict[str, str] = field(default_factory=OrderedDict)  # run id -> where it reports now

    # -- entry points -------------------------------------------------------------------
    async def outbox(self, reply: Reply) -> None:
        """Background replies (progress, completion, a gate waiting) from the core: in the run's
        thread; where that refuses them (deleted: 10003, no access: 50001 / 50013), in its
        channel, else in a direct message to the person who started the run. The first reply
        that lands in a fallback place says so; the run's later replies go straight there."""
        if self._closing.is_set():  # shutting down: the next process edits the progress message
            log.info("reply not sent: the client is closing",
                     extra={"action": "drop_on_close", "run_id": reply.run_id})
            return
        if reply.direct:  # to a person (a reminder): their DM channel
            try:
                dm = await self.client.create_dm(discord.Object(int(reply.conversation or "")))
                await self.post(dm.id, reply)
            except (discord.Forbidden, discord.NotFound, ValueError) as exc:
                log.warning("direct message refused: %s", getattr(exc, "text", exc),
                            extra={"action": "direct_refused", "run_id": reply.run_id})
            return
        moved = self._moved.get(reply.run_id or "")
        usual = [p for p in dict.fromkeys((reply.thread, reply.conversation)) if p]
        places: list[str] = [moved] if moved else usual
        if not places:
            log.warning("reply without a place dropped", extra={"action": "drop", "run_id": reply.run_id})
            return
        if reply.requester and reply.requester.startswith("discord:") and moved != DIRECT:
            places.append(DIRECT)
        for index, place in enumerate(places):
            try:
                channel_id = await self._direct(reply) if place == DIRECT else int(place)
                if index > 0 and reply.run_id:  # a fallback: say once where the run reports now
                    await self._move(reply.run_id, place, channel_id)
                await self.post(channel_id, reply)
                return
            except (discord.Forbidden, discord.NotFound, ValueError) as exc:
                log.warning("reply refused in %s: %s", place, getattr(exc, "text", exc),
                            extra={"action": "fallback", "run_id": reply.run_id})
        log.error("reply delivered nowhere", extra={"action": "undelivered", "run_id": reply.run_id})

    async def _direct(self, reply: Reply) -> int:
        """The direct message channel with the run's requester."""
        user = int((reply.requester or "").removeprefix("discord:"))
        return (await self.client.create_dm(discord.Object(user))).id

    async def _move(self, run_id: str, place: str, channel_id: int) -> None:
        """From now on `run_id` reports in `channel_id`; say so there, once."""
        self._moved[run_id] = place
        while len(self._moved) > MEMORY:
            self._moved.popitem(last=False)
        key = f"progress:{run_id}"
        self._keyed.pop(key, None)  # its progress message is where replies no longer go: a new one
        self.remember(f"message:{key}", "")
        where = "a direct message" if place == DIRECT else "this channel"
        await channel_send(self.client.get_partial_messageable(channel_id))(
            f"Baton could not post in the thread of run `{run_id}` (deleted, or no access); "
            f"it reports that run in {where} from now on.", None, None)

    async def post(self, channel_id: int, reply: Reply) -> None:
        channel = self.client.get_channel(channel_id) or self.client.get_partial_messageable(channel_id)
        await self.deliver(reply, channel_send(channel), channel_send(channel))  # type: ignore[arg-type]

    async def answer(
        self, interaction: discord.Interaction, replies: Sequence[Reply], *, open_original: bool
    ) -> None:
        """Replies to an interaction: the first public one replaces the deferred response
        when `open_original`; replies aimed at another thread go there."""
        for reply in replies:
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
                open_original = False
                await self.deliver(reply, first, public)
        if open_original:
            await interaction.delete_original_response()

    def view_of(self, reply: Reply) -> discord.ui.View | None:
        """The buttons and choice lists of `reply`, through the redactor."""
        shown = redacted(reply, self.redactor)
        return build_view(shown.buttons, reply.run_id, self.put_blob, shown.menus)

    # -- delivery -----------------------------------------------------------------------
    async def deliver(self, reply: Reply, first: Send, rest: Send) -> None:
        key = reply.replace_key if not reply.ephemeral else None
        if key is None:
            await self._post_new(reply, first, rest)
            return
        async with self._lock(key):
            keyed = self._keyed.get(key) or self._recalled(key)
            if keyed is None and reply.edit_only:
                return  # only an edit of a message this bot posted (e.g. a decided gate's): none
            if keyed is None:
                messages = await self._post_new(reply, first, rest)
                if messages:
                    keyed = _Keyed(messages[0].channel.id, [m.id for m in messages], time.monotonic())
                    self._keep(key, keyed)
                return
            self._keyed.move_to_end(key)
            keyed.pending = reply
            if keyed.task is None or keyed.task.done():
                keyed.task = asyncio.create_task(self._flush_loop(key, keyed), name=f"discord-edit-{key}")

    @contextlib.asynccontextmanager
    async def _lock(self, key: str) -> AsyncIterator[None]:
        """`key`'s lock; forgotten once nobody holds or waits for it."""
        entry = self._locks.get(key)
        if entry is None:
            entry = self._locks[key] = _KeyLock()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._locks[key]

    async def _post_new(self, reply: Reply, first: Send, rest: Send) -> list[discord.Message]:
        chunks, file = self._content(reply)
        shown = redacted(reply, self.redactor)
        view = build_view(shown.buttons, reply.run_id, self.put_blob, shown.menus)
        messages: list[discord.Message] = []
        try:
            index = 0
            while index < len(chunks):
                last = index == len(chunks) - 1
                send = first if index == 0 else rest
                try:
                    attached = file if index == 0 else None
                    messages.append(await send(chunks[index], attached, view if last else None))
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
                else:  # not posted: no thread will come, the run reports where it was asked
                    await self.attach_thread(reply.run_id, None)
        return messages

    def _keep(self, key: str, keyed: _Keyed) -> None:
        self._hold(key, keyed)
        self.remember(f"message:{key}", " ".join(map(str, [keyed.channel_id, *keyed.message_ids])))

    def _hold(self, key: str, keyed: _Keyed) -> None:
        """Keep `keyed` in memory as the most recently used; beyond `MEMORY` keys, forget the
        least recently used idle ones (their ids stay with the core, `_recalled` reads them)."""
        self._keyed[key] = keyed
        self._keyed.move_to_end(key)
        self._trim()

    def _trim(self) -> None:
        excess = len(self._keyed) - MEMORY
        if excess > 0:
            for old in [k for k in itertools.islice(self._keyed, excess) if self._keyed[k].idle]:
                del self._keyed[old]

    def _recalled(self, key: str) -> _Keyed | None:
        """The messages an earlier process posted under `key`, as the core kept them."""
        kept = (self.recall(f"message:{key}") or "").split()
        if len(kept) < 2 or not all(part.isdigit() for part in kept):
            return None
        keyed = _Keyed(int(kept[0]), [int(part) for part in kept[1:]])
        self._hold(key, keyed)
        return keyed

    def _content(self, reply: Reply) -> tuple[list[str], discord.File | None]:
        """The messages' texts, and the file holding the whole text when it is long or when a
        command in it was too wide for one message (the file shows every command whole)."""
        rendered = render_reply(reply, PLATFORM, self.redactor)
        chunks = [c for c in rendered.chunks if c.strip()]
        if reply.file is not None:  # a file the reply carries (`audit --since`)
            return chunks, discord.File(io.BytesIO(reply.file.content or b""), filename=reply.file.name)
        if rendered.whole and sum(len(c) for c in chunks) <= self.attach_over:
            return chunks, None
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
    async def _flush_loop(self, key: str, keyed: _Keyed) -> None:
        while keyed.pending is not None:
            delay = keyed.last_edit + self.edit_interval - time.monotonic()
            if delay > 0 and not self._closing.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closing.wait(), delay)
            async with self._lock(key):
                reply, keyed.pending = keyed.pending, None
                if reply is not None:
                    keyed.last_edit = time.monotonic()
                    try:
                        await self._edit(key, keyed, reply)
                    except (discord.DiscordException, OSError, RuntimeError) as exc:  # incl. a closed session
                        log.warning("progress edit not sent: %s", exc,
                                    extra={"action": "edit_failed", "run_id": reply.run_id})
        keyed.task = None  # nothing pending, and no await from here: idle now
        self._trim()  # an entry busy when newer keys came may be the one over `MEMORY`

    async def _edit(self, key: str, keyed: _Keyed, reply: Reply) -> None:
        channel = self.client.get_partial_messageable(keyed.channel_id)
        chunks, file = self._content(reply)
        shown = redacted(reply, self.redactor)
        view = build_view(shown.buttons, reply.run_id, self.put_blob, shown.menus)
        ids: list[int] = []
        for index, chunk in enumerate(chunks):
            last = index == len(chunks) - 1
            attached = file if index == 0 else None
            if index < len(keyed.message_ids):
                message = channel.get_partial_message(keyed.message_ids[index])
                extra: dict[str, object] = {"attachments": [attached]} if attached is not None else {}
                try:
                    await message.edit(
                        content=chunk, view=view if last else None, allowed_mentions=NO_MENTIONS,
                        **extra,  # type: ignore[arg-type]
                    )
                    ids.append(message.id)
                    continue
                except discord.NotFound:  # deleted in Discord meanwhile: post it again
                    log.info("progress message gone; posting it again",
                             extra={"action": "repost", "run_id": reply.run_id})
            sent = await channel_send(channel)(chunk, attached, view if last else None)
            ids.append(sent.id)
        for stale in keyed.message_ids[len(chunks):]:
            with contextlib.suppress(discord.NotFound):
                await channel.get_partial_message(stale).delete()
        if ids != keyed.message_ids:
            keyed.message_ids = ids
            self._keep(key, keyed)

    async def idle(self) -> None:
        """Wait until every pending edit has been sent (at its `edit_interval` pace)."""
        while tasks := [k.task for k in self._keyed.values() if k.task is not None and not k.task.done()]:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def aclose(self) -> None:
        """Send every pending edit now."""
        self._closing.set()
        tasks = [k.task for k in self._keyed.values() if k.task is not None and not k.task.done()]
        await asyncio.gather(*tasks, return_exceptions=True)
