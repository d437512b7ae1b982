"""Messages edited in place, for every platform: one component the core and the adapters share.

What it decides, so that no adapter decides it again:

- **Pace** (`due_in`, `edited`): a message under one `replace_key` (a run's progress) is edited
  at most once per `interval` seconds. The progress reporter asks before it builds the next
  node table, so events in between are coalesced into one edit showing the newest state. A
  reply that carries state (`urgent`: a run at rest, a gate waiting, a completion) is never
  paced: it goes out at once, and the progress edit that shows the run at rest with it.
  `hurry()` (shutting down) makes every pending edit due now.
- **Where a keyed message is** (`posted`, `keep`, `forget`): the place and the platform's ids
  of the message(s) last shown under a key, in one bounded memory (the `MEMORY` most recently
  used) backed by the store (`remember` / `recall`), so the next process edits them too.
- **Size** (`attaches`): an edit of a run still moving never attaches a file (the progress
  view of a large run is a summary that fits one message; what does not fit is shown in
  part); a reply at rest whose text is too long for messages attaches it whole as one file,
  and a keyed message attaches at most one file in its life.
- **Where a run reports now** (`moved`, `move`): once a run's thread refused a message, its
  later messages go straight to the place that took it, told once there.
- **The interaction's follow-up** (`follow_up`, `follow_up_of`): the way back to whoever asked
  (a Discord interaction webhook, a Slack `response_url`), usable while it lives: a place to
  post when the run's own places refuse, before a direct message.
- **One lock per key** (`holding`): two senders never post the same keyed message twice.

Adapters keep only what the platform does: post, edit, upload, and their permission checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from cachetools import LRUCache

from core.delivery.envelope import Address, Mode

#: Seconds between two edits of one message (Slack allows about one `chat.update` a second
#: per channel; Discord about five per five seconds per channel).
INTERVAL = 1.0
#: Keyed messages, moved runs and follow-ups kept in memory (the store keeps the messages).
MEMORY = 2_000
#: The pace's memory is swept at most once per this many intervals, on an edit.
PRUNE_EVERY = 20
#: A run's statuses that end its progress: nothing moves until a person acts, or it is over.
RESTING = frozenset({"completed", "failed", "paused", "needs_attention", "cancelled"})

Remember = Callable[[str, str, str], None]  # (platform, key, value)
Recall = Callable[[str, str], "str | None"]  # (platform, key) -> value


class NotDelivered(Exception):
    """An adapter could not send a reply for now (a 5xx after the platform library's own
    retries, a dropped connection, a rate limit past its budget): the newest state is sent
    again later. A refusal that will not pass (no access, deleted) is not this: the adapter
    falls back to the next place instead."""


class Outgoing(Protocol):
    """What delivery reads of a reply (`core.commands.messages.Reply` is one): its kind and
    its run's status (is it urgent), its run, where it goes (`to`: its place, its requester)
    and how (`how`: the key of the message it edits, whether only the asker sees it).
    Delivery never imports the commands layer above it."""

    @property
    def kind(self) -> str: ...
    @property
    def run_id(self) -> str | None: ...
    @property
    def run_status(self) -> str | None: ...
    @property
    def to(self) -> Address: ...
    @property
    def how(self) -> Mode: ...


def urgent(reply: Outgoing) -> bool:
    """Whether `reply` carries state that must go out at once: anything but the edit of a
    progress message whose run still moves."""
    return reply.kind != "progress" or (reply.run_status or "") in RESTING


@dataclass(frozen=True, slots=True)
class Posted:
    """Where the message(s) shown under one key are: a place (a channel) and the platform's
    message ids (Slack: one ts; Discord: one id per message of a long text)."""

    place: str
    ids: tuple[str, ...]

    def encode(self) -> str:
        return " ".join((self.place, *self.ids))

    @classmethod
    def decode(cls, text: str | None) -> Posted | None:
        parts = (text or "").split()
        return cls(parts[0], tuple(parts[1:])) if len(parts) >= 2 else None


@dataclass
class _Lock:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0  # holding or waiting


@dataclass(frozen=True, slots=True)
class FollowUp:
    """A way back to the person who asked, usable until `expires` (monotonic) and `uses` times."""

    handle: Any  # the adapter's (a Discord `Send`, a Slack response URL)
    expires: float
    uses: int | None = None


class Edits:
    def __init__(
        self,
        *,
        remember: Remember = lambda platform, key, value: None,
        recall: Recall = lambda platform, key: None,
        interval: float = INTERVAL,
        memory: int = MEMORY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self._remember = remember
        self._recall = recall
        self._clock = clock
        self._last: dict[str, float] = {}  # key -> time of its last paced edit
        self._pruned_at = clock()
        # bounded memories, the least recently used forgotten first (the store keeps `_posted`)
        self._posted: LRUCache[tuple[str, str], Posted] = LRUCache(memory)
        self._filed: LRUCache[tuple[str, str], None] = LRUCache(memory)  # keys that attached their file
        self._moved: LRUCache[tuple[str, str], str] = LRUCache(memory)
        self._follow_ups: LRUCache[tuple[str, str], FollowUp] = LRUCache(memory)
        self._locks: dict[tuple[str, str], _Lock] = {}
        self.closing = asyncio.Event()

    @property
    def memory(self) -> int:
        """How many keyed messages (moved runs, follow-ups) are kept in memory."""
        return int(self._posted.maxsize)

    @memory.setter
    def memory(self, size: int) -> None:
        self._posted, self._filed, self._moved, self._follow_ups = (
            _bounded(m, size) for m in (self._posted, self._filed, self._moved, self._follow_ups))

    # -- pace -------------------------------------------------------------------------------
    def due_in(self, key: str) -> float:
        """Seconds until `key` may be edited again (0: now)."""
        if self.closing.is_set():
            return 0.0
        last = self._last.get(key)
        return 0.0 if last is None else max(0.0, last + self.interval - self._clock())

    def edited(self, key: str, at: float | None = None) -> None:
        """Note a paced edit of `key` now. Every `PRUNE_EVERY` intervals, entries more than
        one interval old are dropped: they delay nothing any more, so the map is bounded by
        the keys edited in the last `PRUNE_EVERY` intervals."""
        now = self._clock() if at is None else at
        self._last[key] = now
        if now - self._pruned_at < PRUNE_EVERY * self.interval:
            return
        self._pruned_at = now
        due = now - self.interval
        for stale in [k for k, t in self._last.items() if t <= due]:
            del self._last[stale]

    def rested(self, key: str) -> None:
        """`key`'s message shows a run at rest: nothing to pace for it any more."""
        self._last.pop(key, None)

    @property
    def paced(self) -> dict[str, float]:
        """The keys whose next edit may still wait (for tests of the memory bound)."""
        return self._last

    def hurry(self) -> None:
        """Shutting down: every pending edit is due now."""
        self.closing.set()

    # -- where keyed messages are ----------------------------------------------------------
    def posted(self, platform: str, key: str) -> Posted | None:
        """The message(s) last shown under `key`: in memory, else as the store kept them."""
        found = self._posted.get((platform, key))
        if found is None:
            found = Posted.decode(self._recall(platform, f"message:{key}"))
            if found is None:
                return None
            self._posted[(platform, key)] = found
        return found

    def keep(self, platform: str, key: str, posted: Posted) -> None:
        if self._posted.get((platform, key)) == posted:  # (reading it counts as a use)
            return
        self._posted[(platform, key)] = posted
        self._remember(platform, f"message:{key}", posted.encode())

    def forget(self, platform: str, key: str) -> None:
        """The message under `key` is no longer where replies go: the next one is posted anew."""
        self._posted.pop((platform, key), None)
        self._filed.pop((platform, key), None)
        self._remember(platform, f"message:{key}", "")

    # -- size ------------------------------------------------------------------------------
    def attaches(self, platform: str, reply: Outgoing, *, too_long: bool) -> bool:
        """Whether `reply`, whose text is `too_long` for the platform's messages, is sent with
        its whole text as a file: never while its run still moves, once per keyed message."""
        if not too_long or not urgent(reply):
            return False
        if reply.how.replace_key is None:
            return True
        return (platform, reply.how.replace_key) not in self._filed

    def filed(self, platform: str, reply: Outgoing) -> None:
        """`reply`'s file was attached (a keyed message attaches no other)."""
        if reply.how.replace_key is not None:
            self._filed[(platform, reply.how.replace_key)] = None

    # -- fallbacks ---------------------------------------------------------------------------
    def moved(self, platform: str, run_id: str | None) -> str | None:
        """Where `run_id` reports since its usual place refused a message (None: as usual)."""
        return self._moved.get((platform, run_id)) if run_id else None

    def move(self, platform: str, run_id: str, place: str) -> bool:
        """`run_id` reports at `place` from now on; whether that is news (the first reply to
        get there says so, once, however many replies of the run were on their way at once)."""
        if self._moved.get((platform, run_id)) == place:
            return False
        self._moved[(platform, run_id)] = place
        self.forget(platform, f"progress:{run_id}")  # its progress message is where it no longer goes
        return True

    def follow_up(self, platform: str, run_id: str, handle: Any, *, ttl: float,
                  uses: int | None = None) -> None:
        """Keep the asking person's way back for `run_id` (valid `ttl` seconds, `uses` times)."""
        self._follow_ups[(platform, run_id)] = FollowUp(handle, self._clock() + ttl, uses)

    def follow_up_of(self, platform: str, run_id: str | None, *, use: bool = True) -> Any:
        """The follow-up of `run_id` if it still lives, counting one `use` (None: none)."""
        found = self._follow_ups.get((platform, run_id or ""))
        if found is None:
            return None
        if found.expires <= self._clock() or found.uses == 0:
            del self._follow_ups[(platform, run_id or "")]
            return None
        if use and found.uses is not None:
            self._follow_ups[(platform, run_id or "")] = FollowUp(found.handle, found.expires, found.uses - 1)
        return found.handle

    # -- one lock per key --------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def holding(self, platform: str, key: str) -> AsyncIterator[None]:
        """`key`'s lock; forgotten once nobody holds or waits for it."""
        entry = self._locks.get((platform, key))
        if entry is None:
            entry = self._locks[(platform, key)] = _Lock()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._locks[(platform, key)]


def _bounded(memory: LRUCache[Any, Any], size: int) -> LRUCache[Any, Any]:
    """`memory` with room for `size` entries, the latest written kept."""
    resized: LRUCache[Any, Any] = LRUCache(size)
    resized.update(list(memory.items())[-size:] if size else [])
    return resized
