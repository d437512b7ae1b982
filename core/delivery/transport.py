"""What a chat platform does to deliver a reply: the port each chat adapter implements.

    class SlackSender:              # adapters/slack/sender.py
        platform = "slack"
        thread_is_place = False     # a thread lives in its channel
        async def post(self, place, reply, message, *, attach, opens) -> Sent: ...   # chat.postMessage
        async def edit(self, place, posted, reply, message, *, attach) -> Sent | None: ...  # chat.update

Every decision about a reply is the delivery service's (`core.delivery.service`): which place
(the run's usual places, the follow-up, a direct message), whether a keyed message is edited or
posted anew, under which lock, whether the whole text is attached, which run a thread belongs
to, and what the reply says on the platform (`message`: its texts, its file, the names it
shows, made in the core by the service's `compose`). A transport does what the platform does
(post, edit, upload, follow up, open a direct message, say where a run reports now), answers
what it did (`Sent`), and never calls back into the core. Its failures are its platform's
exceptions; the service asks the transport which of them are a place refusing the reply
(`refusal`) and what a failed background send means (`failed`: `NotDelivered` for one that
may pass).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from core.delivery.edits import Outgoing, Posted


@dataclass(frozen=True, slots=True)
class Sent:
    """What a post or an edit did: where the message(s) are, the thread a `starts_thread` reply
    opened (the run's thread; None: none could be), and whether its whole text was attached."""

    posted: Posted
    thread: str | None = None
    filed: bool = False


class Transport(Protocol):
    """A platform's operations. `place` is a conversation id (a channel, a thread, a DM) or a
    place of the adapter's own (an interaction's responses on Discord); the service passes it
    through untouched. `thread_is_place`: a run's thread is a conversation of its own, tried
    before its channel (Discord); else the thread lives in the channel, one place (Slack, where
    a reply's `thread` goes with its `conversation`)."""

    @property
    def platform(self) -> str: ...

    @property
    def thread_is_place(self) -> bool: ...

    async def post(self, place: Any, reply: Outgoing, message: Any, *, attach: bool, opens: bool) -> Sent:
        """Post `message` (what the core made of `reply` for this platform: `DeliveryService.compose`)
        at `place`; `attach`: its whole text may go as a file when too long; `opens`: open the
        run's thread from it (`Sent.thread`)."""
        ...

    async def edit(self, place: Any, posted: Posted, reply: Outgoing, message: Any, *,
                   attach: bool) -> Sent | None:
        """Edit the message(s) kept as `posted` to show `message` (sent to `place`); None when
        they are gone or not the ones `place` shows (the service posts it anew there)."""
        ...

    async def follow_up(self, handle: Any, reply: Outgoing, message: Any, *, attach: bool) -> bool:
        """Post `message` through the asking person's follow-up (`handle`, kept by the service);
        False when the platform refused it (expired, used up)."""
        ...

    async def person(self, user: str) -> str:
        """The place of a direct message with `user` (the platform's user id)."""
        ...

    async def moved(self, how: str, to: Any, reply: Outgoing, error: str) -> bool:
        """Say once at `to` that the run of `reply` reports there from now on (`how`: the
        fallback, `FOLLOW_UP`, `DIRECT` or a usual place; `error`: why its place refused);
        False when `to` cannot take it."""
        ...

    def refusal(self, exc: BaseException, reply: Outgoing) -> str | None:
        """Why a place refused `reply`, when `exc` is such a refusal (deleted, no access): the
        next place is tried. None: any other failure."""
        ...

    def failed(self, exc: Exception, reply: Outgoing) -> None:
        """A background send of `reply` failed with `exc`: raise `NotDelivered` when it may
        pass (the core sends the newest state again), re-raise what the caller must see, or
        return when the failure was logged and the reply is dropped."""
        ...
