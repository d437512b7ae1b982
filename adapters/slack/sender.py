"""`Reply` -> Slack messages: where each goes, what is posted, edited or uploaded.

- Direct answers to a request (`deliver`) are sent in order before the listener returns.
- Background replies (`outbox`, registered with the core) never block the engine: they are
  queued per run and sent by one worker per run, in order. Progress messages
  (`replace_key`) are edited in place at most once per `throttle` seconds; an update that a
  newer one supersedes while waiting is dropped, the newest (final) state is always sent.
- A reply with `starts_thread` is posted in the channel and its `ts` becomes the run's
  thread (`Handler.attach_thread`); the core holds the run's background replies until then
  (the outbox is registered with `threads=True`), so they arrive carrying that thread.
- What must survive a restart is kept through the core (`Handler.remember` / `recall`): the
  channel and `ts` of each progress message (so the next update edits it rather than posting
  a new one) and button commands too long for a button's value (passed as `ref:<digest>`).
- Text over `UPLOAD_THRESHOLD` is uploaded whole as a file snippet in the thread, with the
  first section and a note in the message: never cut silently.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from adapters.slack import forms as slack_forms
from adapters.slack import wording
from adapters.slack.blocks import (
    OPTION_VALUE_LIMIT,
    VALUE_LIMIT,
    SlackMessage,
    build_message,
    needs_upload,
    unescape_mrkdwn,
)
from adapters.slack.forms import METADATA_LIMIT, FormPlace
from adapters.slack.inbound import PLATFORM, Origin
from adapters.slack.web_api import CHANNEL_ERRORS, SlackCallFailed, call
from core.commands.handler import Handler
from core.commands.messages import Button, Form, Reply
from core.errors import PlatformError
from core.render import redacted, render_reply

log = logging.getLogger("baton.slack")

MEMORY = 2_000  # progress messages kept in memory (the store keeps them all)
V = TypeVar("V")
STALE_MESSAGE = frozenset({"message_not_found", "cant_update_message", "edit_window_closed"})


@dataclass
class _Slot:
    """The message last posted under one `replace_key`."""

    channel: str | None = None
    ts: str | None = None
    last: float = float("-inf")
    uploads: set[str] = field(default_factory=set)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def _remember(store: OrderedDict[str, V], key: str, value: V) -> None:
    """Keep the newest `MEMORY` entries."""
    store[key] = value
    store.move_to_end(key)
    while len(store) > MEMORY:
        store.popitem(last=False)


class SlackSender:
    def __init__(self, client: AsyncWebClient, handler: Handler, *, throttle: float = 1.0) -> None:
        self._client = client
        self._handler = handler
        self._throttle = throttle
        self._slots: OrderedDict[str, _Slot] = OrderedDict()
        self._queues: dict[str, deque[Reply]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._moved: OrderedDict[str, str] = OrderedDict()  # run id -> the requester it reports to

    # -- buttons -------------------------------------------------------------------
    def button_value(self, button: Button, limit: int = VALUE_LIMIT) -> str:
        """The command itself; a reference when it exceeds Slack's limit for a value (2,000
        characters for a button, 150 for a select option)."""
        if len(button.command) <= limit:
            return button.command
        ref = "ref:" + hashlib.sha256(button.command.encode()).hexdigest()[:32]
        self._handler.remember(PLATFORM, ref, button.command)
        return ref

    def command_of(self, value: str) -> str | None:
        """The command a clicked button's value stands for (None: an unknown reference)."""
        return self._handler.recall(PLATFORM, value) if value.startswith("ref:") else value

    # -- direct answers -----------------------------------------------------------------
    async def deliver(self, replies: Sequence[Reply], origin: Origin) -> None:
        for reply in replies:
            try:
                await self._send(reply, origin)
            except SlackCallFailed as exc:
                started = reply.starts_thread and reply.run_id
                # a run that started must not be started again: say so, never "try again"
                await self.tell(origin, wording.started_unseen(reply.run_id, exc.error) if started
                                and reply.run_id else exc.user_text)
                if started and reply.run_id:  # no thread will come: report in the channel
                    await self._handler.attach_thread(reply.run_id, None)

    async def tell(self, origin: Origin, text: str) -> None:
        """Tell the asking user only: through the response URL, else an ephemeral message."""
        try:
            if origin.response_url:
                await AsyncWebhookClient(origin.response_url).send(
                    text=text, response_type="ephemeral", replace_original=False
                )
            else:
                await call(self._client, "chat.postEphemeral", channel=origin.channel, user=origin.user,
                           text=text, thread_ts=origin.thread)
        except (SlackCallFailed, OSError) as exc:
            log.warning("could not tell the user: %s", type(exc).__name__,
                        extra={"action": "slack_tell_failed", "channel": origin.channel})

    # -- background replies ----------------------------------------------------------------
    async def outbox(self, reply: Reply) -> None:
        """The core's outbox: queue and return at once; one worker per run sends in order."""
        key = reply.run_id or reply.replace_key or f"conversation:{reply.conversation}"
        self._queues.setdefault(key, deque()).append(reply)
        if key not in self._workers:
            self._workers[key] = asyncio.create_task(self._drain(key), name=f"slack-outbox-{key}")

    async def idle(self) -> None:
        """Wait until every queued background reply has been sent."""
        while self._workers:
            await asyncio.gather(*list(self._workers.values()), return_exceptions=True)

    async def _drain(self, key: str) -> None:
        queue = self._queues[key]
        try:
            while queue:
                reply = queue.popleft()
                if _superseded(reply, queue):
                    continue
                delay = self._delay(reply.replace_key)
                if delay > 0:
                    await asyncio.sleep(delay)
                    if _superseded(reply, queue):
                        continue
                try:
                    await self._send_background(reply)
                except PlatformError:
                    pass  # logged where it was translated
                except Exception:
                    log.exception("slack delivery failed",
                                  extra={"action": "slack_send", "run_id": reply.run_id})
        finally:
            del self._queues[key]
            del self._workers[key]

    async def _send_background(self, reply: Reply) -> None:
        """A background reply where the run lives; where Slack refuses it there (the bot was
        removed, the channel archived or gone), in a direct message to whoever started the run,
        the first one saying that the run reports there from now on."""
        if reply.direct:  # to a person: posting to a user id opens the app's DM with them
            await self._send(reply, None)
            return
        moved = self._moved.get(reply.run_id or "")
        if moved is None:
            try:
                await self._send(reply, None)
                return
            except SlackCallFailed as exc:
                requester = reply.requester or ""
                person = requester.removeprefix(f"{PLATFORM}:")
                if exc.error not in CHANNEL_ERRORS or not reply.run_id or person in ("", requester):
                    raise
                moved = self._moved[reply.run_id] = person
                while len(self._moved) > MEMORY:
                    self._moved.popitem(last=False)
                await call(self._client, "chat.postMessage", channel=person,
                           text=wording.moved(reply.run_id, reply.conversation or "", exc.error))
        key = f"{reply.replace_key}:direct" if reply.replace_key else None
        await self._send(dataclasses.replace(reply, conversation=moved, thread=None, replace_key=key), None)

    def _delay(self, replace_key: str | None) -> float:
        slot = self._slots.get(replace_key) if replace_key else None
        return 0.0 if slot is None else slot.last + self._throttle - time.monotonic()

    # -- sending one reply -------------------------------------------------------------------
    async def _send(self, reply: Reply, origin: Origin | None) -> None:
        if reply.form is not None and origin is not None and await self.open_form(reply.form, origin):
            return  # the modal asks; its text would only repeat it
        channel = reply.conversation or (origin.channel if origin else None)
        if not channel:
            log.warning("reply without a conversation dropped",
                        extra={"action": "slack_send", "run_id": reply.run_id})
            return
        thread = reply.thread or (origin.thread if origin else None)
        redactor = self._handler.redactor  # the runtime's one redactor: text, buttons, uploads
        rendered = render_reply(reply, PLATFORM, redactor)
        chunks = list(rendered.chunks)
        upload = needs_upload(chunks) or not rendered.whole  # a command too wide for a section
        full = rendered.text if upload else ""
        filename = f"{reply.kind}-{reply.run_id or 'baton'}.txt"
        shown = redacted(reply, redactor)
        message = build_message(
            chunks[:1] if upload else chunks,
            shown.buttons,
            menus=shown.menus,
            value_of=self.button_value,
            option_value_of=lambda b: self.button_value(b, OPTION_VALUE_LIMIT),
            note=wording.uploaded(len(full), filename) if upload else None,
        )
        if reply.ephemeral and origin is not None:
            await self._ephemeral(origin, channel, thread, message)
            return
        if reply.edit_only:  # a message posted earlier under `replace_key` (e.g. a decided gate's)
            if reply.replace_key:
                await self._edit_only(reply.replace_key, channel, message)
            return
        if reply.replace_key:
            ts = await self._replace(reply.replace_key, channel, thread, message)
        else:
            ts = await self._post(channel, thread, message)
        root = thread or ts
        if reply.starts_thread and reply.run_id:
            await self._handler.attach_thread(reply.run_id, root)
        if upload:
            await self._upload(reply.replace_key, channel, root, filename, unescape_mrkdwn(full))
        if reply.file is not None:  # a file the reply carries (`audit --since`), in the same thread
            await call(self._client, "files.uploadV2", channel=channel, thread_ts=root,
                       content=(reply.file.content or b"").decode("utf-8"), filename=reply.file.name,
                       title=reply.file.name)

    async def open_form(self, form: Form, origin: Origin) -> bool:
        """Open `form` as a modal with the request's trigger id (valid 3 s); False when there is
        none or Slack refused it (the reply's text, which says what to type, is posted instead)."""
        if not origin.trigger_id:
            return False
        place = FormPlace(form.command, origin.channel, origin.thread).encode()
        if len(place) > METADATA_LIMIT:  # a long message: kept through the core, like long buttons
            ref = "ref:" + hashlib.sha256(place.encode()).hexdigest()[:32]
            self._handler.remember(PLATFORM, ref, place)
            place = ref
        try:
            await call(self._client, "views.open", trigger_id=origin.trigger_id,
                       view=slack_forms.modal(form, place))
        except SlackCallFailed:
            return False  # logged where it was translated (e.g. expired_trigger_id)
        return True

    def form_place(self, metadata: str) -> FormPlace | None:
        """The `FormPlace` a submitted modal's metadata holds (directly, or by reference)."""
        return FormPlace.decode(self.command_of(metadata) or "")

    async def _ephemeral(
        self, origin: Origin, channel: str, thread: str | None, message: SlackMessage
    ) -> None:
        """chat.postEphemeral; where the bot is not a member, the request's response URL."""
        try:
            await call(self._client, "chat.postEphemeral", channel=channel, user=origin.user,
                       thread_ts=thread, **message.as_kwargs())
        except SlackCallFailed as exc:
            if exc.error not in CHANNEL_ERRORS or not origin.response_url:
                raise
            await AsyncWebhookClient(origin.response_url).send(
                response_type="ephemeral", replace_original=False, **message.as_kwargs()
            )

    async def _post(self, channel: str, thread: str | None, message: SlackMessage) -> str:
        response = await call(self._client, "chat.postMessage", channel=channel, thread_ts=thread,
                              unfurl_links=False, **message.as_kwargs())
        return str(response["ts"])

    def _slot(self, key: str) -> _Slot:
        """The message last posted under `key`: in memory, else as the store kept it."""
        slot = self._slots.get(key)
        if slot is None:
            slot = _Slot()
            kept = self._handler.recall(PLATFORM, f"message:{key}")
            if kept:
                slot.channel, _, slot.ts = kept.partition(" ")
        _remember(self._slots, key, slot)
        return slot

    async def _replace(self, key: str, channel: str, thread: str | None, message: SlackMessage) -> str:
        slot = self._slot(key)
        async with slot.lock:
            if slot.ts is not None and slot.channel == channel:
                try:
                    await call(self._client, "chat.update", channel=channel, ts=slot.ts,
                               **message.as_kwargs())
                    slot.last = time.monotonic()
                    return slot.ts
                except SlackCallFailed as exc:
                    if exc.error not in STALE_MESSAGE:
                        raise
            slot.channel, slot.ts = channel, await self._post(channel, thread, message)
            slot.last = time.monotonic()
            self._handler.remember(PLATFORM, f"message:{key}", f"{channel} {slot.ts}")
            return slot.ts

    async def _edit_only(self, key: str, channel: str, message: SlackMessage) -> None:
        """chat.update the message posted under `key`; nothing when there is none (never a new post)."""
        slot = self._slot(key)
        async with slot.lock:
            if slot.ts is None or slot.channel != channel:
                return
            try:
                await call(self._client, "chat.update", channel=channel, ts=slot.ts, **message.as_kwargs())
                slot.last = time.monotonic()
            except SlackCallFailed as exc:
                if exc.error not in STALE_MESSAGE:
                    raise

    async def _upload(self, key: str | None, channel: str, thread: str, filename: str, text: str) -> None:
        digest = hashlib.sha256(text.encode()).hexdigest()
        slot = self._slots.get(key) if key else None
        if slot is not None and digest in slot.uploads:
            return
        await call(self._client, "files.uploadV2", channel=channel, thread_ts=thread, content=text,
                   filename=filename, title=filename, snippet_type="text")
        if slot is not None:
            slot.uploads.add(digest)


def _superseded(reply: Reply, queue: deque[Reply]) -> bool:
    """A newer state of the same progress message is already queued."""
    return reply.replace_key is not None and any(r.replace_key == reply.replace_key for r in queue)
