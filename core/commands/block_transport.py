"""The transport (`core.delivery.transport.Transport`) of a platform that posts a reply as one
message of blocks in a channel, maybe in a thread of it (Slack), over the platform's calls
(`Wire`): what the delivery service asks turned into those calls, so the adapter never reads
a reply's address or mode.

- A place is a conversation id; a reply's `thread` goes with its `conversation` (a thread lives
  in its channel), and a reply to a person's id lands in their direct messages.
- A post's whole text (when too long and the service says it may) and the reply's own file are
  uploaded in the thread the message is in, or opens (`Sent.thread`).
- An edit changes the message kept under the reply's key when the place still shows it
  (`Wire.edit`); gone, or elsewhere: the service posts it anew. An edit-only reply (a decided
  gate's message) changes only its text.
- "The run reports here now" is said once where it moved: through the follow-up, or as a
  line in the direct message (the format's sentences `moved_here`, `moved`).
- A redelivered outbox row's message is looked for first (`core.delivery.redelivery`): the
  wire lists a place's recent messages with their key and author.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from core.commands.block_messages import Layout
from core.delivery.edits import NotDelivered, Outgoing, Posted
from core.delivery.failures import CallFailed
from core.delivery.fallbacks import DIRECT, FOLLOW_UP
from core.delivery.redelivery import Seen
from core.delivery.transport import Sent
from core.errors import PlatformError
from core.render import Format, sentence

log = logging.getLogger("baton.delivery")


class Wire(Protocol):
    """A block platform's calls (Slack's: `adapters/slack/sender.py`). Failures are
    `CallFailed`; those whose `error` is one of `refusals` are a place refusing (the bot
    removed, the channel archived or gone): the service tries the next place."""

    @property
    def refusals(self) -> frozenset[str]: ...

    async def post(self, channel: str, thread: str | None, message: Layout) -> tuple[str, str]:
        """Post `message`; (the conversation it landed in, its id)."""
        ...

    async def edit(self, channel: str, kept: Posted, message: Layout) -> bool:
        """Edit the message `kept` to show `message`; False when it is gone, or is not the one a
        reply to `channel` shows (the service posts it anew there)."""
        ...

    async def upload(self, channel: str, thread: str, message: Layout) -> None:
        """`message`'s whole text (`Layout.upload`) and its file, in `thread`."""
        ...

    async def respond(self, handle: Any, message: Layout | str) -> bool:
        """Post through the asker's follow-up; False when it was refused (expired, used up)."""
        ...

    async def say(self, channel: str, text: str) -> None:
        """Post one line of text."""
        ...

    async def recent(self, place: Any, thread: str | None, oldest: float, limit: int,
                     cursor: str | None) -> tuple[Sequence[Seen], str | None] | None: ...

    async def own(self) -> tuple[str, str]: ...


class BlockTransport:
    thread_is_place = False  # a thread lives in its channel

    def __init__(self, wire: Wire, fmt: Format) -> None:
        self.wire = wire
        self.platform = fmt.name
        self._fmt = fmt
        self._own: tuple[str, str] | None = None  # the wire's `own()`, asked once

    @staticmethod
    def _where(place: str, reply: Outgoing) -> tuple[str, str | None]:
        """(channel, thread) of `place`: the reply's conversation and thread, or a person's id."""
        return place, reply.to.thread if place == reply.to.conversation else None

    async def post(self, place: str, reply: Outgoing, message: Layout, *, attach: bool, opens: bool) -> Sent:
        return await self.landed(place, reply, message, None, attach=attach)

    async def landed(self, place: str, reply: Outgoing, message: Layout, posted: str | None, *,
                     attach: bool) -> Sent:
        """`post`, the message posted already as `posted` (an earlier attempt's) or now (None)."""
        channel, thread = self._where(place, reply)
        landed = channel
        if posted is None:
            landed, posted = await self.wire.post(channel, thread, message)
        root = thread or posted
        await self._upload(channel, root, message)
        return Sent(Posted(landed, (posted,)), thread=root, filed=message.upload is not None)

    async def edit(self, place: str, posted: Posted, reply: Outgoing, message: Layout, *,
                   attach: bool) -> Sent | None:
        channel, thread = self._where(place, reply)
        if not await self.wire.edit(channel, posted, message):
            return None
        if reply.how.edit_only:  # a decided gate's message: only its text changes
            return Sent(posted)
        root = thread or posted.ids[0]
        await self._upload(channel, root, message)
        return Sent(posted, thread=root, filed=message.upload is not None)

    async def _upload(self, channel: str, thread: str, message: Layout) -> None:
        if message.upload is not None or message.file is not None:
            await self.wire.upload(channel, thread, message)

    async def follow_up(self, handle: Any, reply: Outgoing, message: Layout, *, attach: bool) -> bool:
        return await self.wire.respond(handle, message)

    async def person(self, user: str) -> str:
        return user  # posting to a person's id opens the app's direct messages with them

    async def moved(self, how: str, to: Any, reply: Outgoing, error: str) -> bool:
        said = (reply.run_id or "", reply.to.conversation or "", error)
        if how == FOLLOW_UP:
            return to is not None and await self.wire.respond(to, sentence(self._fmt, "moved_here", *said))
        if how == DIRECT and to:
            await self.wire.say(to, sentence(self._fmt, "moved", *said))
        return True

    def refusal(self, exc: BaseException, reply: Outgoing) -> str | None:
        return exc.error if isinstance(exc, CallFailed) and exc.error in self.wire.refusals else None

    def failed(self, exc: Exception, reply: Outgoing) -> None:
        if isinstance(exc, CallFailed) and exc.transient:  # logged where it was translated
            raise NotDelivered(exc.error) from exc
        if not isinstance(exc, PlatformError):  # a PlatformError was logged where it was translated
            log.error("%s delivery failed", self.platform, exc_info=exc,
                      extra={"action": f"{self.platform}_send", "run_id": reply.run_id})

    async def recent(self, place: Any, thread: str | None, oldest: float, limit: int,
                     cursor: str | None) -> tuple[Sequence[Seen], str | None] | None:
        return await self.wire.recent(place, thread, oldest, limit, cursor)

    async def own(self) -> tuple[str, str]:
        if self._own is None:  # asked at the first redelivery look-up
            self._own = await self.wire.own()
        return self._own
