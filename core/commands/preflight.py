"""Which commands start a run where they were typed, and whether Baton can post there: before
handing a `run` to the handler, an adapter checks it (Slack: what `conversations.info` says of
the conversation; Discord: the interaction's app permissions) and, if Baton cannot post, nothing
starts and the user alone is told how to fix it (DESIGN.md, Delivery).

    preflight = Preflight(wire.conversation, FORMAT)   # where the platform says what a place is
    refused = await preflight.refusal(channel, name)   # None, or the two lines to tell the user
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from cachetools import TTLCache

from core.commands.model import RunCommand
from core.commands.parser import parse
from core.delivery.failures import CallFailed
from core.errors import BatonError
from core.render import Format, sentence

FRESH = 30.0  # seconds a conversation found writable is not asked about again
KEPT = 1_000  # conversations remembered

Kind = Literal["public", "private", "group_dm", "dm"]  # what a user can do about it differs


def starts_run(text: str) -> bool:
    """`text` (a typed command) would start a run in the conversation it was typed in. A command
    that does not parse starts nothing: the handler answers it with its usage."""
    try:
        return isinstance(parse(text), RunCommand)
    except BatonError:
        return False


@dataclass(frozen=True, slots=True)
class Conversation:
    """What the platform says of a conversation: its kind (which says what a user can do about
    it), whether it is the bot's own direct message, has the bot as a member, is archived. One
    the platform does not show the bot is a member of nothing."""

    kind: Kind
    own_dm: bool = False
    member: bool = False
    archived: bool = False


class Preflight:
    """Baton may post in its own direct messages, or where it is a member of a conversation that
    is not archived; anything else, or the platform unable to say (`CallFailed`), fails closed
    with the format's sentence for it (`cannot_post` by kind, `archived`, `cannot_check`). A
    conversation found writable is remembered for `FRESH` seconds, so a burst of runs asks once."""

    def __init__(self, look: Callable[[str, str | None], Awaitable[Conversation]], fmt: Format) -> None:
        self._look = look  # (conversation id, the name the request gave it) -> what it is
        self._fmt = fmt
        self._writable: TTLCache[str, bool] = TTLCache(KEPT, FRESH, timer=time.monotonic)

    async def refusal(self, channel: str, name: str | None = None) -> str | None:
        """None when Baton can post in `channel`; else the two lines to tell the user."""
        if channel in self._writable:
            return None
        try:
            seen = await self._look(channel, name)
        except CallFailed as exc:
            return sentence(self._fmt, "cannot_check", exc.error)
        if seen.own_dm or (seen.member and not seen.archived):
            self._writable[channel] = True
            return None
        if seen.archived:
            return sentence(self._fmt, "archived", channel)
        return sentence(self._fmt, "cannot_post", seen.kind, channel)
