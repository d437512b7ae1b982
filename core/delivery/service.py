"""One delivery service per chat platform: a reply's whole way out, decided in the core.

    delivery = handler.register_transport(transport, threads=True)   # SlackSender registers itself
    await delivery.send(reply)        # a background reply (the platform's outbox)
    await delivery.answer(reply, place, follow_up=(url, ttl, uses))   # the answer to a request
    await delivery.idle(); await delivery.aclose()

The service owns what used to go back and forth between the core and each adapter:

- **Places** (`core.delivery.fallbacks.along`): the run's usual places (Slack: its thread in
  its channel; Discord: its thread, then its channel: `Transport.thread_is_place`), the
  follow-up of the command that started it while it lives, then a direct message to whoever started it; the
  first reply in a new place says so once (`Transport.moved`).
- **Edits in place** (`core.delivery.edits.Edits`): one lock per key, the message last shown
  under a key (edited, or posted anew when it is gone or elsewhere, then kept), an edit-only
  reply never posted anew, the size policy (`attach`) and the file attached once per key.
- **Threads**: a `starts_thread` reply's thread (what `Transport.post` opened, or None when it
  could not be posted or opened) is handed to the core (`attach_thread`), never by the adapter.
- **Follow-ups**: the way back to whoever started a run, kept when the answer starts it.
- **In flight and shutdown**: background sends tracked (`idle`), refused once closing
  (`NotDelivered`: the outbox keeps them for the next process).

The transport (`core.delivery.transport.Transport`) posts, edits, uploads and follows up, and
answers what it did; it never calls back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from core.delivery import fallbacks, redelivery
from core.delivery.edits import Edits, NotDelivered, Outgoing
from core.delivery.fallbacks import DIRECT, FOLLOW_UP, Refused
from core.delivery.transport import Sent, Transport

log = logging.getLogger("baton.delivery")

#: The core's side of a run's thread: (run id, its thread; None: none will come).
AttachThread = Callable[[str, str | None], Awaitable[None]]
#: The asking person's way back: (the adapter's handle, seconds it lives, uses; None: any).
FollowUpOf = tuple[Any, float, int | None]
#: What the core makes of a reply for its platform before the transport sees it (its texts,
#: file, the names it shows: `core.commands.text_messages`): (reply, attach) -> the message the
#: transport posts. A service without one hands the transport the reply itself.
Compose = Callable[[Outgoing, bool], Awaitable[Any]]


async def _as_is(reply: Outgoing, attach: bool) -> Any:
    return reply


class DeliveryService:
    def __init__(self, transport: Transport, edits: Edits, attach_thread: AttachThread,
                 compose: Compose = _as_is) -> None:
        self.transport = transport
        #: the reply made the platform's message, in the core: the transport only posts it
        self.compose = compose
        self.platform = transport.platform
        self.edits = edits
        self._attach_thread = attach_thread
        self._closing = asyncio.Event()
        self._inflight: set[asyncio.Task[Any]] = set()

    # -- background replies (the platform's outbox) ----------------------------------------
    async def send(self, reply: Outgoing) -> None:
        """A background reply (progress, completion, a gate waiting): where its run reports,
        else at the next place that takes it. `NotDelivered` when it may pass."""
        if self._closing.is_set():  # shutting down: the next process sends it (the outbox keeps it)
            log.info("reply not sent: the client is closing",
                     extra={"action": "drop_on_close", "run_id": reply.run_id})
            raise NotDelivered(f"the {self.platform} client is closing")
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
        try:
            try:
                await self._background(reply)
            except Exception as exc:
                self.transport.failed(exc, reply)
        finally:
            if task is not None:
                self._inflight.discard(task)

    async def _background(self, reply: Outgoing) -> None:
        if reply.to.direct:  # to a person (a reminder): their direct messages
            try:
                await self._at(await self.transport.person(reply.to.conversation or ""), reply)
            except Exception as exc:
                if self.transport.refusal(exc, reply) is None:
                    raise
                log.warning("direct message refused: %s", exc,
                            extra={"action": "direct_refused", "run_id": reply.run_id})
            return
        refused: list[str] = []

        async def send_at(place: str, moving: bool) -> bool:
            try:
                return await self._place(place, reply, moving=moving,
                                         error=refused[0] if refused else "refused")
            except Refused:
                raise
            except Exception as exc:
                why = self.transport.refusal(exc, reply)
                if why is None:
                    raise
                log.warning("reply refused in %s: %s", place, why,
                            extra={"action": "fallback", "run_id": reply.run_id})
                refused.append(why)
                raise Refused(why) from exc

        thread = reply.to.thread if self.transport.thread_is_place else None  # else: in its channel
        usual = [p for p in (thread, reply.to.conversation) if p]
        if not await fallbacks.along(self.edits, self.platform, reply, usual, send_at):
            log.error("reply delivered nowhere", extra={"action": "undelivered", "run_id": reply.run_id})

    async def _place(self, place: str, reply: Outgoing, *, moving: bool, error: str) -> bool:
        """Send `reply` at `place` (`moving`: the first reply there, which says so); False when
        that place cannot take it."""
        transport, run_id = self.transport, reply.run_id or ""
        if place == FOLLOW_UP:
            if moving and not await transport.moved(
                    FOLLOW_UP, self.edits.follow_up_of(self.platform, run_id), reply, error):
                return False
            handle = self.edits.follow_up_of(self.platform, run_id)
            if handle is None:
                return False
            attach = self._attaches(reply)
            message = await self.compose(reply, attach)
            return await transport.follow_up(handle, reply, message, attach=attach)
        if place == DIRECT:
            requester, prefix = reply.to.requester or "", f"{self.platform}:"
            if not requester.startswith(prefix) or requester == prefix:
                return False
            to = await transport.person(requester.removeprefix(prefix))
            if moving:
                await transport.moved(DIRECT, to, reply, error)
            key = f"{reply.how.replace_key}:direct" if reply.how.replace_key else None
            await self._at(to, reply, key=key)
            return True
        if moving:
            await transport.moved(place, place, reply, error)
        await self._at(place, reply)
        return True

    # -- answers to a request ----------------------------------------------------------------
    async def answer(self, reply: Outgoing, place: Any, *, follow_up: FollowUpOf | None = None,
                     thread_or_none: bool = True) -> Sent | None:
        """Post (or edit) `reply` at `place`, the answer to a request. `follow_up`: the asking
        person's way back (handle, seconds it lives, uses), kept as the run's when `reply`
        starts it. `thread_or_none=False`: a `starts_thread` reply that could not be posted does
        not report "no thread" (the caller posts it elsewhere). The platform's errors are raised."""
        if follow_up is not None and reply.how.starts_thread and reply.run_id:
            handle, ttl, uses = follow_up
            self.edits.follow_up(self.platform, reply.run_id, handle, ttl=ttl, uses=uses)
        return await self._at(place, reply, thread_or_none=thread_or_none)

    async def no_thread(self, run_id: str) -> None:
        """No thread will come for `run_id` (its answer failed): it reports where it was asked."""
        await self._attach_thread(run_id, None)

    # -- one reply at one place --------------------------------------------------------------
    async def _at(self, place: Any, reply: Outgoing, *, key: str | None = None,
                  thread_or_none: bool = True) -> Sent | None:
        """Post `reply` at `place`, or edit the message(s) under its key (`key`: another)."""
        try:
            how = reply.how
            return await self._keyed(place, reply, key or (None if how.ephemeral else how.replace_key))
        except BaseException:
            if reply.how.starts_thread and reply.run_id and thread_or_none:
                await self._attach_thread(reply.run_id, None)  # no thread will come: it reports where asked
            raise

    async def _keyed(self, place: Any, reply: Outgoing, key: str | None) -> Sent | None:
        if key is None:
            if reply.how.edit_only:
                return None
            return await self._post(place, reply, None)
        async with self.edits.holding(self.platform, key):
            posted = self.edits.posted(self.platform, key)
            message = None
            if posted is not None:
                attach = self._attaches(reply)
                message = await self.compose(reply, attach)
                sent = await self.transport.edit(place, posted, reply, message, attach=attach)
                if sent is not None:
                    self._done(reply, key, sent)
                    if reply.how.starts_thread and reply.run_id and not reply.how.edit_only:
                        await self._attach_thread(reply.run_id, sent.thread)
                    return sent
            if reply.how.edit_only:  # only an edit of a message posted earlier (a decided gate's): none
                return None
            return await self._post(place, reply, key, message)

    async def _post(self, place: Any, reply: Outgoing, key: str | None, message: Any = None) -> Sent:
        """Post `reply` at `place` (`message`: what it was composed as already, if it was)."""
        opens = bool(reply.how.starts_thread and reply.run_id)
        attach = self._attaches(reply)
        if message is None:
            message = await self.compose(reply, attach)
        sent = await redelivery.post(self.transport, place, reply, message, attach=attach, opens=opens)
        self._done(reply, key, sent)
        if opens:
            await self._attach_thread(reply.run_id or "", sent.thread)
        return sent

    def _attaches(self, reply: Outgoing) -> bool:
        """Whether `reply`'s whole text may go as a file, if it is too long (the size policy)."""
        return self.edits.attaches(self.platform, reply, too_long=True)

    def _done(self, reply: Outgoing, key: str | None, sent: Sent) -> None:
        if sent.filed:
            self.edits.filed(self.platform, reply)
        if key is not None and sent.posted.ids:  # nothing posted (an empty text): nothing to edit
            self.edits.keep(self.platform, key, sent.posted)

    # -- in flight and shutdown --------------------------------------------------------------
    async def idle(self) -> None:
        """Until every background reply handed over so far has been sent."""
        current = asyncio.current_task()
        while waiting := [t for t in self._inflight if t is not current and not t.done()]:
            await asyncio.wait(waiting)

    async def aclose(self) -> None:
        """Take no more background replies; wait for those being sent."""
        self._closing.set()
        await self.idle()
