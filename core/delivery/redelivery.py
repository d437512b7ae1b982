"""A redelivered outbox row's message posted once, on a platform with no idempotency key (Slack).

    sent = await redelivery.post(transport, place, reply, message, attach=attach, opens=opens)

A message of an outbox row carries the row's key (`Reply.how.once.key`, `outbox:<row>[:<part>]`)
where the platform keeps it (Slack: the message metadata, `payload`). When the row is delivered
again after an attempt that may have reached the platform (`Once.since`), the place is looked
through first, since a little before the row was written (`CLOCK_SKEW`), `PAGES` pages at most:
a message under the row's key posted by the bot itself (`Lister.own`: metadata alone proves
nothing, any app may post a message carrying it) is taken for posted, and the transport only
finishes it (`Lister.landed`: its files). A look-up that fails, or a place that cannot be
listed, posts (at least once). A platform that deduplicates on the key itself (Discord's nonce)
is no `Lister`: it posts.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from core.delivery.edits import Outgoing
from core.delivery.envelope import Once
from core.delivery.transport import Sent, Transport
from core.errors import PlatformError

log = logging.getLogger("baton.delivery")

#: a redelivery looks through at most this many pages of this many messages for an earlier post
PAGES = 3
PAGE_SIZE = 200
#: the look-up starts this long before the row was written: our clock and the platform's may differ
CLOCK_SKEW = 60.0


@dataclass(frozen=True, slots=True)
class Seen:
    """A message of a place: its id, the outbox key it carries (None: none) and who posted it
    (the platform's bot and app ids; "": none said)."""

    id: str
    key: str | None
    bot: str = ""
    app: str = ""


@runtime_checkable
class Lister(Protocol):
    """What a transport without an idempotency key adds to `Transport`."""

    async def recent(self, place: Any, thread: str | None, oldest: float, limit: int,
                     cursor: str | None) -> tuple[Sequence[Seen], str | None] | None:
        """One page of the messages at `place` (in `thread`) since `oldest`, and the cursor of
        the next (None: the last); None when `place` cannot be listed (a DM by user id)."""
        ...

    async def own(self) -> tuple[str, str]:
        """(bot id, app id) of this bot ("": the platform did not say)."""
        ...

    async def landed(self, place: Any, reply: Outgoing, message: Any, posted: str, *, attach: bool) -> Sent:
        """`message` found posted as `posted` at `place` by an earlier attempt: what `post`
        does after posting (its files), and what it answers."""
        ...


def payload(once: Once) -> dict[str, Any]:
    """What an outbox row's message carries: its key, and the row's id."""
    found: dict[str, Any] = {"key": once.key}
    row = once.key.partition(":")[2].split(":", 1)[0]
    if row.isdigit():
        found["row"] = int(row)
    return found


async def post(transport: Transport, place: Any, reply: Outgoing, message: Any, *, attach: bool,
               opens: bool) -> Sent:
    """`transport.post`, unless an earlier attempt of the same outbox row posted it already."""
    once = reply.how.once
    if once is not None and once.since is not None and isinstance(transport, Lister):
        thread = reply.to.thread if place == reply.to.conversation else None
        found = await earlier(transport, place, thread, once.key, once.since)
        if found is not None:
            return await transport.landed(place, reply, message, found, attach=attach)
    return await transport.post(place, reply, message, attach=attach, opens=opens)


async def earlier(lister: Lister, place: Any, thread: str | None, key: str, since: float) -> str | None:
    """The id of the message an earlier attempt posted under `key` at `place` (in `thread`) since
    `since`; None when there is none in the pages looked through, when `place` cannot be listed,
    or when the look-up failed: the caller posts (at least once)."""
    extra = {"action": "redelivery", "channel": place, "delivery": key}
    cursor = None
    try:
        for _ in range(PAGES):
            page = await lister.recent(place, thread, max(0.0, since - CLOCK_SKEW), PAGE_SIZE, cursor)
            if page is None:
                return None
            seen, cursor = page
            for message in seen:
                if message.key == key and await _ours(lister, message):
                    log.info("outbox message already posted: not posted again", extra=extra)
                    return message.id
            if not cursor:
                break
    except PlatformError as exc:
        log.warning("outbox message not looked for (%s): posted again", exc, extra=extra)
        return None
    log.info("outbox message not found: posted", extra=extra)
    return None


async def _ours(lister: Lister, message: Seen) -> bool:
    """Whether the bot itself posted `message`: its bot id (and app id, when both say one)."""
    bot, app = await lister.own()
    if not bot or message.bot != bot:
        return False
    return not (app and message.app and message.app != app)
