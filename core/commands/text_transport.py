"""The transport of a platform that posts a reply as plain text messages (Discord), made of its
adapter's one-message operations (`Messages`): how a reply's messages are posted and edited is
decided once, in the core, and the adapter only posts, edits or deletes one message (#27).

    delivery = handler.delivery_service(TextTransport(sender, FORMAT), texts(FORMAT, ...))

- Posting (`post`, `follow_up`): each chunk of the composed `Message` is one message, the first
  carrying the file and the nonce, the last the buttons. A file refused as too large
  (`Messages.too_large`) posts every chunk as a message of its own instead: nothing is lost.
  `opens`: the run's thread is opened from the first message (`Messages.open_thread`), named by
  the format's sentence `thread_name`; where none can be (a DM, no permission) the run stays.
- Editing (`edit`): the messages kept under the key are edited in order, the buttons on the
  last; one deleted meanwhile (`Messages.gone`) is posted again there; more chunks are posted,
  fewer delete the messages left over.
- The notice that a run reports elsewhere now (`moved`) is the format's sentence `moved`.
- What the platform's failures mean is its data (`Failures`): a place refusing the reply (the
  next place is tried), a failure that may pass (`NotDelivered`: the newest state is sent again
  later), a follow-up used up (the next place's), a message gone, a file too large.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from core.commands.controls import Control
from core.commands.text_messages import Message
from core.delivery.edits import NotDelivered, Outgoing, Posted
from core.delivery.fallbacks import FOLLOW_UP
from core.delivery.transport import Sent
from core.render import Format, sentence

log = logging.getLogger("baton.delivery")


@dataclass(frozen=True, slots=True)
class Part:
    """One message: its text, the file it attaches (name, bytes), its buttons, the key its post
    lands once with, who it may ping; `first`: the first of its reply's messages."""

    text: str
    file: tuple[str, bytes] | None = None
    controls: tuple[Control, ...] = ()
    nonce: str | None = None
    pings: tuple[str, ...] = ()
    first: bool = True


@dataclass(frozen=True, slots=True)
class Failures:
    """What the platform's exceptions mean: `refused`, a place that will not take the reply
    (deleted, no access); `transient`, one that may pass; `gone`, a message deleted meanwhile;
    `too_large`, a file refused for its size; `expired`, a follow-up refused but for a server
    error (its token expired, used up); `api`, any refusal of the platform's API."""

    refused: tuple[type[BaseException], ...]
    transient: tuple[type[BaseException], ...]
    api: tuple[type[BaseException], ...]  # any refusal the platform's API answered
    gone: Callable[[BaseException], bool]
    too_large: Callable[[BaseException], bool]
    expired: Callable[[BaseException], bool]


class Messages(Protocol):
    """What the adapter does with one message (`place`: a channel id, or a place of its own such
    as an interaction's responses); its failures are its platform's exceptions."""

    platform: str
    thread_is_place: bool
    failures: Failures

    async def post(self, place: Any, part: Part) -> tuple[str, str, Any]:
        """Post `part` at `place`: (its channel id, its message id, the platform's message)."""
        ...

    async def edit(self, place: str, message_id: str, part: Part) -> None: ...

    async def delete(self, place: str, message_id: str) -> None:
        """Delete a message (gone already: nothing to do)."""
        ...

    async def open_thread(self, message: Any, name: str) -> str:
        """The run's thread opened from `message`, named `name`."""
        ...

    async def person(self, user: str) -> str: ...


class TextTransport:
    """`core.delivery.transport.Transport` over `Messages`; `fmt`: the platform's sentences."""

    def __init__(self, messages: Messages, fmt: Format) -> None:
        self.messages, self.failures = messages, messages.failures
        self.fmt = fmt
        self.platform = messages.platform
        self.thread_is_place = messages.thread_is_place
        self.person = messages.person

    def refusal(self, exc: BaseException, reply: Outgoing) -> str | None:
        """A place refusing `reply` (deleted, no access, not a channel id): why; the next place."""
        if isinstance(exc, self.failures.refused):
            return str(getattr(exc, "text", "") or exc)
        return None

    def failed(self, exc: Exception, reply: Outgoing) -> None:
        if isinstance(exc, self.failures.transient):
            log.warning("reply not sent for now: %s", exc,
                        extra={"action": "not_delivered", "run_id": reply.run_id})
            raise NotDelivered(str(exc)) from exc
        raise exc

    def _expired(self, exc: BaseException, reply: Outgoing) -> bool:
        if not self.failures.expired(exc):
            return False
        log.info("interaction follow-up refused: %s", getattr(exc, "text", exc),  # e.g. its token expired
                 extra={"action": "follow_up_refused", "run_id": reply.run_id})
        return True

    async def post(self, place: Any, reply: Outgoing, message: Message, *, attach: bool, opens: bool) -> Sent:
        shown, filed = await self._post_new(place, reply, message)
        thread = await self._open_thread(shown[0][2], reply) if opens and shown else None
        if not shown:
            return Sent(Posted("", ()), thread=thread, filed=filed)
        return Sent(Posted(shown[0][0], tuple(s[1] for s in shown)), thread=thread, filed=filed)

    async def _open_thread(self, message: Any, reply: Outgoing) -> str | None:
        name = sentence(self.fmt, "thread_name", getattr(reply, "data", {}).get("workflow") or reply.kind,
                        reply.run_id)
        try:
            return await self.messages.open_thread(message, name)
        except self.failures.api as exc:  # a DM, or no permission: the run stays where it is
            log.warning("no thread for run: %s", getattr(exc, "text", exc),
                        extra={"action": "thread_failed", "run_id": reply.run_id})
            return None

    async def edit(self, place: Any, posted: Posted, reply: Outgoing, message: Message, *,
                   attach: bool) -> Sent:
        """Edit the messages kept as `posted` to show `message`, where they are. A channel that
        refuses the edit raises: the reply goes to the next place."""
        chunks, file = message.content.chunks, message.content.file
        ids: list[str] = []
        filed = False
        for index, chunk in enumerate(chunks):
            last = index == len(chunks) - 1
            part = Part(chunk, file if index == 0 else None, message.controls if last else ())
            if index < len(posted.ids):
                try:
                    await self.messages.edit(posted.place, posted.ids[index], part)
                    ids.append(posted.ids[index])
                    filed = filed or part.file is not None
                    continue
                except Exception as exc:
                    if not self.failures.gone(exc):
                        raise
                    log.info("message gone; posting it again",
                             extra={"action": "repost", "run_id": reply.run_id})
            ids.append((await self.messages.post(posted.place, part))[1])
        for stale in posted.ids[len(chunks):]:
            await self.messages.delete(posted.place, stale)
        return Sent(Posted(posted.place, tuple(ids)), filed=filed)

    async def follow_up(self, handle: Any, reply: Outgoing, message: Message, *, attach: bool) -> bool:
        try:
            await self._post_new(handle, reply, message)  # posted anew: never edited there
        except Exception as exc:
            if self._expired(exc, reply):
                return False
            raise
        return True

    async def moved(self, how: str, to: Any, reply: Outgoing, error: str) -> bool:
        try:
            await self.messages.post(to, Part(sentence(self.fmt, "moved", reply.run_id or "", how)))
        except Exception as exc:
            if how == FOLLOW_UP and self._expired(exc, reply):
                return False
            raise
        return True

    async def _post_new(self, place: Any, reply: Outgoing, message: Message
                        ) -> tuple[list[tuple[str, str, Any]], bool]:
        """The messages posted, and whether the whole text was attached to the first."""
        chunks, file = message.content.chunks, message.content.file
        shown: list[tuple[str, str, Any]] = []
        filed = False
        index = 0
        while index < len(chunks):
            last, attached = index == len(chunks) - 1, file if index == 0 else None
            part = Part(chunks[index], attached, message.controls if last else (),
                        message.nonce if index == 0 else None, message.pings, first=index == 0)
            try:
                shown.append(await self.messages.post(place, part))
                filed = filed or attached is not None
            except Exception as exc:
                if file is None or index or not self.failures.too_large(exc):
                    raise
                log.warning("attachment refused as too large; sending the text in messages",
                            extra={"action": "upload_too_large", "run_id": reply.run_id})
                file, chunks = None, message.content.every  # every chunk a message of its own
                continue
            index += 1
        return shown, filed
